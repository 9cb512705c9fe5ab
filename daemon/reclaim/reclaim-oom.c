/* SPDX-License-Identifier: MIT */
/*
 * reclaim-oom.c - mem_cgroup_out_of_memory() for cooperative reclaim (see
 * reclaim-internal.h): with OOMPolicy=kill, a charge (or a lowered max)
 * that reclaim cannot satisfy kills the client holding the most pages in
 * the subtree that is out of memory, then waits for it to go.  The kill
 * itself is the ops table's (struct reclaim_client_ops.kill).
 *
 * Main thread only.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "macros.h"
#include "mb_size.h"
#include "reclaim-internal.h"
#include "tenant_state.h"

struct victim_walk {
        struct reclaim_client *best;
        uint64_t best_held;
        /* A victim of an earlier kill still exiting: no new victim. */
        struct reclaim_client *exiting;
};

static uint64_t oom_now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* oom_evaluate_task(): a task that is already an OOM victim and not yet
 * MMF_OOM_SKIP aborts the selection (the kill in flight will free memory);
 * otherwise the largest wins. */
static int victim_cb(struct tenant *t, void *userdata) {
        struct victim_walk *vw = userdata;
        struct tenant_state *ts = tenant_state_of(t);

        if (!ts || t->nchildren > 0)
                return 0;
        pthread_mutex_lock(&ts->lock);
        for (struct reclaim_client *rc = ts->clients; rc; rc = rc->next) {
                uint64_t held = atomic_load_explicit(&rc->held, memory_order_relaxed) +
                                atomic_load_explicit(&rc->outside, memory_order_relaxed);

                if (atomic_load(&rc->gone))
                        continue;
                if (rc->killed) {
                        if (!rc->oom_skip && !vw->exiting)
                                vw->exiting = reclaim_client_ref(rc);
                        continue;
                }
                if (held == 0 || held <= vw->best_held)
                        continue;
                reclaim_client_unref(vw->best);
                vw->best = reclaim_client_ref(rc);
                vw->best_held = held;
        }
        pthread_mutex_unlock(&ts->lock);
        return 0;
}

/* Make @j wait for @victim (a reference is taken over) to go, at most until
 * RECLAIM_OOM_WAIT_USEC after it was killed. */
static void oom_wait_victim(struct reclaim_job *j, struct reclaim_client *victim) {
        uint64_t now = oom_now_usec(), end = victim->killed_usec + RECLAIM_OOM_WAIT_USEC;
        uint64_t left = end > now ? end - now : 0;
        struct timeval tv = { .tv_sec = left / 1000000, .tv_usec = left % 1000000 };

        j->victim = victim;
        j->state = JOB_WAIT_VICTIM;
        if (atomic_load(&victim->gone))
                reclaim_job_kick(j);
        else
                event_add(j->timer, &tv);
}

/* mem_cgroup_get_oom_group(): the highest tenant with OOMGroup=yes from
 * the victim's tenant @t up to the OOM domain @oom; NULL when none. */
static struct tenant *oom_group_of(struct tenant *t, struct tenant *oom) {
        struct tenant *group = NULL;

        for (; t; t = t->parent) {
                if (t->oom_group)
                        group = t;
                if (t == oom)
                        break;
        }
        return group;
}

struct group_walk {
        struct reclaim_client **v;
        size_t n, alloc;
};

/* The clients of a leaf of the group not killed yet (referenced). */
static int group_cb(struct tenant *t, void *userdata) {
        struct group_walk *gw = userdata;
        struct tenant_state *ts = tenant_state_of(t);
        int r = 0;

        if (!ts || t->nchildren > 0)
                return 0;
        pthread_mutex_lock(&ts->lock);
        for (struct reclaim_client *rc = ts->clients; rc; rc = rc->next) {
                if (rc->killed || atomic_load(&rc->gone))
                        continue;
                if (gw->n == gw->alloc) {
                        size_t a = gw->alloc ? gw->alloc * 2 : 8;
                        struct reclaim_client **v = realloc(gw->v, a * sizeof(*v));

                        if (!v) {
                                r = -ENOMEM;
                                break;
                        }
                        gw->v = v;
                        gw->alloc = a;
                }
                gw->v[gw->n++] = reclaim_client_ref(rc);
        }
        pthread_mutex_unlock(&ts->lock);
        return r;
}

/* Kill @rc for an OOM of @oom (reason @why): SIGKILL, mark it a victim,
 * count oom_kill on its tenant.  False when the kill failed. */
static bool oom_kill_one(struct reclaimer *r, struct tenant *oom, struct reclaim_client *rc, const char *why) {
        int k = r->ops->kill(rc);

        rc->killed = true;
        rc->killed_usec = oom_now_usec();
        if (k < 0) {
                log_error_errno(k, "tenant %s: out of memory; cannot kill client %" PRIu64 " (pid %d): %m", oom->path,
                                rc->client_id, (int) rc->pid);
                rc->oom_skip = true; /* nothing to wait for */
                return false;
        }
        {
                char b_usage[MB_SIZE_FORMAT_MAX], b_max[MB_SIZE_FORMAT_MAX], b_held[MB_SIZE_FORMAT_MAX];
                uint64_t page_size = r->b->page_size;

                log_struct(LOG_WARNING, LOG_MESSAGE_OOM_KILL, rc->tenant->path, (int) rc->pid,
                           "tenant %s: out of memory (usage %s, MemoryMax=%s); killed client %" PRIu64
                           " (%s, pid %d) of tenant %s holding %s (%s)",
                           oom->path,
                           mb_size_format_pages(b_usage, sizeof(b_usage), page_counter_read(&oom->memory),
                                                page_size, PAGE_COUNTER_MAX),
                           mb_size_format_pages(b_max, sizeof(b_max), page_counter_get_max(&oom->memory),
                                                page_size, PAGE_COUNTER_MAX),
                           rc->client_id, rc->name, (int) rc->pid, rc->tenant->path,
                           mb_size_format_pages(b_held, sizeof(b_held), atomic_load(&rc->held), page_size,
                                                UINT64_MAX),
                           why);
        }
        /* The kernel counts MEMCG_OOM_KILL on each killed task's memcg. */
        reclaim_memory_event(r, rc->tenant, MB_EVENT_OOM_KILL);
        r->stats.oom_kills++;
        return true;
}

/* oom_kill_process() with memory.oom.group: every other client of @group
 * goes with the victim (mem_cgroup_scan_tasks(oom_kill_memcg_member)),
 * and MEMCG_OOM_GROUP_KILL is counted on @group. */
static void oom_kill_group(struct reclaimer *r, struct tenant *oom, struct tenant *group) {
        struct group_walk gw = {};
        char why[160];

        reclaim_memory_event(r, group, MB_EVENT_OOM_GROUP_KILL);
        if (tenant_walk(group, group_cb, &gw) < 0)
                log_error("tenant %s: out of memory while collecting the OOM group; some clients live on",
                          group->path);
        snprintf(why, sizeof(why), "OOMGroup=yes of tenant %s", group->path);
        for (size_t i = 0; i < gw.n; i++) {
                (void) oom_kill_one(r, oom, gw.v[i], why);
                reclaim_client_unref(gw.v[i]);
        }
        free(gw.v);
}

int reclaimer_kill_client(struct reclaimer *r, struct reclaim_client *rc) {
        reclaim_assert_main_thread(r);
        return r->ops->kill(rc);
}

bool reclaim_job_oom_kill(struct reclaim_job *j, struct tenant *oom) {
        struct reclaimer *r = j->r;
        struct victim_walk vw = {};
        struct tenant *group;

        /* mem_cgroup_out_of_memory() runs under oom_lock: here everything
         * runs on the main thread, so one OOM decision at a time, and the
         * caller re-checked the margin (its charge retry) just before. */
        (void) tenant_walk(oom, victim_cb, &vw);
        if (vw.exiting) {
                /* tsk_is_oom_victim(): the victim of an earlier kill in
                 * this subtree is still exiting; wait for it, then retry
                 * the charge, as try_charge_memcg() does after an OOM that
                 * chose nobody. */
                log_debug("tenant %s: out of memory; client %" PRIu64 " (pid %d), killed earlier, is still exiting: "
                          "waiting for it instead of choosing another victim",
                          oom->path, vw.exiting->client_id, (int) vw.exiting->pid);
                reclaim_client_unref(vw.best);
                oom_wait_victim(j, vw.exiting);
                return true;
        }
        if (!vw.best) {
                log_struct(LOG_WARNING, LOG_MESSAGE_OOM, oom->path, 0,
                           "tenant %s: out of memory and no client holds pages to kill", oom->path);
                return false;
        }
        if (!oom_kill_one(r, oom, vw.best, "OOMPolicy=kill")) {
                reclaim_client_unref(vw.best);
                return false;
        }
        group = oom_group_of(vw.best->tenant, oom);
        if (group)
                oom_kill_group(r, oom, group);
        oom_wait_victim(j, vw.best);
        return true;
}
