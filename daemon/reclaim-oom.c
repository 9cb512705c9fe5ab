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
#include <sys/syscall.h>
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
};

static int victim_cb(struct tenant *t, void *userdata) {
        struct victim_walk *vw = userdata;
        struct tenant_state *ts = tenant_state_of(t);

        if (!ts || t->nchildren > 0)
                return 0;
        pthread_mutex_lock(&ts->lock);
        for (struct reclaim_client *rc = ts->clients; rc; rc = rc->next) {
                uint64_t held = atomic_load_explicit(&rc->held, memory_order_relaxed);

                if (rc->killed || atomic_load(&rc->gone) || held == 0 || held <= vw->best_held)
                        continue;
                reclaim_client_unref(vw->best);
                vw->best = reclaim_client_ref(rc);
                vw->best_held = held;
        }
        pthread_mutex_unlock(&ts->lock);
        return 0;
}

int reclaimer_kill_client(struct reclaimer *r, struct reclaim_client *rc) {
        return r->ops->kill(rc);
}

bool reclaim_job_oom_kill(struct reclaim_job *j, struct tenant *oom) {
        struct reclaimer *r = j->r;
        struct victim_walk vw = {};
        struct timeval tv = { .tv_sec = RECLAIM_OOM_WAIT_USEC / 1000000,
                              .tv_usec = RECLAIM_OOM_WAIT_USEC % 1000000 };
        char b_usage[MB_SIZE_FORMAT_MAX], b_max[MB_SIZE_FORMAT_MAX], b_held[MB_SIZE_FORMAT_MAX];
        uint64_t page_size = r->m->page_size;
        int k;

        (void) tenant_walk(oom, victim_cb, &vw);
        if (!vw.best) {
                log_struct(LOG_WARNING, LOG_MESSAGE_OOM, oom->path, 0,
                           "tenant %s: out of memory and no client holds pages to kill", oom->path);
                return false;
        }
        k = r->ops->kill(vw.best);
        vw.best->killed = true;
        if (k < 0) {
                log_error_errno(k, "tenant %s: out of memory; cannot kill client %" PRIu64 " (pid %d): %m", oom->path,
                                vw.best->client_id, (int) vw.best->pid);
                reclaim_client_unref(vw.best);
                return false;
        }
        log_struct(LOG_WARNING, LOG_MESSAGE_OOM_KILL, vw.best->tenant->path, (int) vw.best->pid,
                   "tenant %s: out of memory (usage %s, MemoryMax=%s); killed client %" PRIu64
                   " (%s, pid %d) of tenant %s holding %s (OOMPolicy=kill)",
                   oom->path,
                   mb_size_format_pages(b_usage, sizeof(b_usage), page_counter_read(&oom->memory), page_size,
                                        PAGE_COUNTER_MAX),
                   mb_size_format_pages(b_max, sizeof(b_max), page_counter_get_max(&oom->memory), page_size,
                                        PAGE_COUNTER_MAX),
                   vw.best->client_id, vw.best->name, (int) vw.best->pid, vw.best->tenant->path,
                   mb_size_format_pages(b_held, sizeof(b_held), vw.best_held, page_size, UINT64_MAX));
        /* The kernel counts MEMCG_OOM_KILL on the victim's memcg. */
        reclaim_memory_event(r, vw.best->tenant, MB_EVENT_OOM_KILL);
        r->stats.oom_kills++;
        j->victim = vw.best;
        j->state = JOB_WAIT_VICTIM;
        if (atomic_load(&j->victim->gone))
                reclaim_job_kick(j);
        else
                event_add(j->timer, &tv);
        return true;
}
