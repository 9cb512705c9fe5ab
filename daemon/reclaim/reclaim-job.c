/* SPDX-License-Identifier: MIT */
/*
 * reclaim-job.c - cooperative reclaim, the job state machine (see
 * reclaim.h and reclaim-internal.h).
 *
 * A job is one reason to reclaim: a charge that failed at a max
 * (try_charge_memcg()), charges that went above a high
 * (mem_cgroup_handle_over_high()), a proactive request (memory_reclaim()),
 * a lowered limit (memory_max_write()), host pressure or a step of
 * MemoryPressureTarget=.  A job runs in
 * rounds; a round asks some clients for pages (Reclaim) or for their stocks
 * (Drain) and ends when every one of them answered, or when
 * ReclaimTimeoutMSec= passed.  Between rounds the job decides, as the kernel
 * function it mirrors does, whether to retry, to charge, to throttle, to
 * invoke the OOM policy or to stop.
 *
 * A request is one Reclaim or Drain to one client.  A client has at most one
 * unanswered request (rc->outstanding): a round that wants to ask a client
 * that is still busy with another job's request waits for that answer
 * instead (it "subscribes"), unless the request already timed out, in which
 * case the client is skipped at once.  So concurrent charges at one limit
 * share the clients' answers, and a stopped client costs one timeout, not
 * one per round.
 *
 * A client that answered a request of a job with "nothing left"
 * (Uncharge.nothing_left: no shrinker, stocks emptied) is skipped by the
 * later rounds of that job, as the kernel's reclaim does not scan anon pages
 * without swap (can_reclaim_anon_pages()) nor call a memcg-aware shrinker
 * whose count was empty (shrink_slab_memcg()), until it sends a Charge (or
 * gets a Grant).  The rounds still count: one with nobody left to ask ends
 * at once as a round that freed nothing, so MAX_RECLAIM_RETRIES and the
 * OOM path keep their meaning without the round trips.  A later job asks it
 * again: its application may have freed pages into its stock meanwhile,
 * which tells the daemon nothing.
 *
 * Main thread only.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "high_delay.h"
#include "log.h"
#include "macros.h"
#include "mb_size.h"
#include "reclaim-internal.h"
#include "reclaim_plan.h"
#include "tenant_state.h"
#include "wire.h"

static void job_continue(struct reclaim_job *j);
static void job_free(struct reclaim_job *j);
static void round_finish(struct reclaim_job *j);

/* ---- planning a round (daemon/core/reclaim_plan.h) ---- */

/* Whether @rc can be asked in this round: it holds pages and it is not
 * stalled on a request it let time out (rc->outstanding: main thread),
 * which counts in @j's unanswered (not for a @drain plan). */
static bool plan_client_usable(struct reclaim_job *j, const struct reclaim_client *rc, bool drain) {
        if (atomic_load_explicit(&rc->held, memory_order_relaxed) == 0 || atomic_load(&rc->gone))
                return false;
        if (rc->outstanding && rc->outstanding->timed_out) {
                if (!drain)
                        j->unanswered++; /* still silent: skipped */
                return false;
        }
        return true;
}

/* @rc answered a request of @j "nothing left" and sent no Charge nor got a
 * Grant since (the worker cleared nothing_left_seq then): shrink_slab_memcg()
 * skipping a shrinker whose bit SHRINK_EMPTY cleared, until
 * set_shrinker_bit(). */
static bool plan_client_nothing_left(const struct reclaim_job *j, const struct reclaim_client *rc) {
        return rc->empty_job == j->serial && rc->empty_seq != 0 &&
               atomic_load_explicit(&rc->nothing_left_seq, memory_order_relaxed) == rc->empty_seq;
}

/* reclaim_plan_clients_cb: the usable clients of leaf @t, referenced (the
 * targets' handles; plan_release() drops them). */
static int plan_clients_cb(struct reclaim_plan *p, struct tenant *t, uint64_t offer, bool low, void *userdata) {
        struct reclaim_job *j = userdata;
        struct tenant_state *ts = tenant_state_of(t);
        _cleanup_(freep) struct reclaim_plan_client *v = NULL;
        size_t n = 0, alloc = 0, taken = 0;
        int r = 0;

        if (!ts)
                return 0;
        pthread_mutex_lock(&ts->lock);
        for (struct reclaim_client *rc = ts->clients; rc; rc = rc->next) {
                if (!plan_client_usable(j, rc, p->drain))
                        continue;
                if (n == alloc) {
                        size_t a = MB_MAX(alloc * 2, (size_t) 8);
                        struct reclaim_plan_client *nv = realloc(v, a * sizeof(*nv));

                        if (!nv) {
                                r = -ENOMEM;
                                break;
                        }
                        v = nv;
                        alloc = a;
                }
                v[n++] = (struct reclaim_plan_client) {
                        .handle = reclaim_client_ref(rc),
                        .held = atomic_load_explicit(&rc->held, memory_order_relaxed),
                        .skip = plan_client_nothing_left(j, rc),
                };
        }
        pthread_mutex_unlock(&ts->lock);
        if (r == 0) {
                size_t first = p->ntargets;

                r = reclaim_plan_add_clients(p, t, offer, low, v, n);
                taken = p->ntargets - first;
        }
        /* The first @taken clients not skipped are targets now:
         * plan_release() drops them. */
        for (size_t i = 0; i < n; i++) {
                if (!v[i].skip && taken > 0)
                        taken--;
                else
                        reclaim_client_unref(v[i].handle);
        }
        return r;
}

static void plan_release(struct reclaim_plan *p) {
        for (size_t i = 0; i < p->ntargets; i++)
                reclaim_client_unref(p->targets[i].handle);
        reclaim_plan_done(p);
}

static struct reclaim_plan plan_init(struct reclaim_job *j, struct tenant *root, bool drain) {
        return (struct reclaim_plan) {
                .root = root,
                .drain = drain,
                .recursive = j->r->b->tree->recursive_protection,
                .clients = plan_clients_cb,
                .userdata = j,
        };
}


/* ---- rounds ---- */

static void round_arm_timer(struct reclaim_job *j) {
        unsigned ms = j->r->b->config ? j->r->b->config->broker.reclaim_timeout_msec : 250;
        struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

        j->state = JOB_ROUND;
        if (j->round.pending == 0)
                reclaim_job_kick(j);
        else
                event_add(j->timer, &tv);
}

/* Send the requests of @p; true when the round waits for answers. */
static bool round_send(struct reclaim_job *j, struct reclaim_plan *p) {
        struct tenant *low_counted = NULL;

        for (size_t i = 0; i < p->ntargets; i++) {
                struct reclaim_target *tg = &p->targets[i];
                struct reclaim_client *rc = tg->handle;

                if (!p->drain && tg->ask == 0)
                        continue;
                if (rc->outstanding) {
                        (void) reclaim_req_subscribe(j, rc->outstanding);
                        continue;
                }
                if (tg->low && tg->tenant != low_counted) {
                        /* shrink_node_memcgs(): reclaiming below low is an
                         * event of the tenant, once per round (a tenant's
                         * clients are next to each other in the plan). */
                        reclaim_memory_event(j->r, tg->tenant, MB_EVENT_LOW);
                        low_counted = tg->tenant;
                }
                if (reclaim_req_send(j, rc, p->drain ? 0 : (uint32_t) MB_MIN(tg->ask, (uint64_t) UINT32_MAX), p->drain) < 0)
                        log_error("reclaim: out of memory, client %" PRIu64 " is not asked", rc->client_id);
        }
        return j->round.pending > 0;
}

/* Start a round that drains the stocks of @root's subtree
 * (drain_all_stock()).  False when there is nobody to ask. */
static bool job_start_drain(struct reclaim_job *j, struct tenant *root) {
        struct reclaim_plan p = plan_init(j, root, true);
        bool wait;

        if (reclaim_plan_build(&p, 0) < 0) {
                plan_release(&p);
                return false;
        }
        j->round.drain = true;
        j->round.low = false;
        j->round.got = 0;
        wait = round_send(j, &p);
        j->r->stats.skipped += p.nskipped;
        plan_release(&p);
        /* Nobody (left) to ask: drained at once. */
        if (!wait)
                return false;
        j->r->stats.rounds++;
        round_arm_timer(j);
        return true;
}

/*
 * Start one reclaim round in @root's subtree for @goal pages, as one
 * try_to_free_mem_cgroup_pages() call: a pass that respects low, and when
 * that finds nothing because low protects everything (or the last round got
 * nothing that way), a pass below low (do_try_to_free_pages()'s
 * memcg_low_reclaim retry).  @allow_low false never reclaims below low
 * (pressure).  False when there is nobody to ask.
 */
static bool job_start_reclaim(struct reclaim_job *j, struct tenant *root, uint64_t goal, bool allow_low) {
        struct reclaim_plan p = plan_init(j, root, false);
        unsigned shift;
        bool wait, skipped;

        if (goal == 0)
                return false;
        p.allow_low = allow_low;
        p.low_first = j->use_low;
        /* Every client is asked again each round, those that gave nothing
         * too; so that a small tenant whose proportional share rounds down
         * to nothing is reached all the same, each fruitless round asks
         * twice as much as the one before (progress starts over), as
         * do_try_to_free_pages() lowers sc->priority and scans a larger
         * part of every lruvec (size >> priority) until everything is. */
        shift = MB_MIN(j->fruitless_streak, RECLAIM_PRIORITY_SHIFT_MAX);
        goal = goal > (UINT64_MAX >> shift) ? UINT64_MAX : goal << shift;
        if (reclaim_plan_build(&p, goal) < 0) {
                plan_release(&p);
                return false;
        }
        /* shrink_node_memcgs(): every intermediate tenant the pass below
         * low visited below its low counts `low`, once per visit. */
        for (size_t i = 0; i < p.nlow_visited; i++)
                reclaim_memory_event(j->r, p.low_visited[i], MB_EVENT_LOW);
        j->round.drain = false;
        j->round.low = p.low_pass;
        j->last_low_skipped = p.low_skipped;
        j->round.got = 0;
        wait = round_send(j, &p);
        skipped = p.nskipped > 0;
        j->r->stats.skipped += p.nskipped;
        plan_release(&p);
        /* Nobody to ask: no round.  Nobody *left* to ask (every client
         * there said "nothing left"): a round that ends at once having
         * freed nothing, as try_to_free_mem_cgroup_pages() returns 0 when
         * nothing it scans is reclaimable, and try_charge_memcg() counts
         * that against MAX_RECLAIM_RETRIES. */
        if (!wait && !skipped)
                return false;
        j->r->stats.rounds++;
        round_arm_timer(j);
        return true;
}

/* The round is over: every answer is in, or the timeout passed (then the
 * requests still unanswered are the clients skipped). */
static void round_finish(struct reclaim_job *j) {
        struct reclaimer *r = j->r;
        unsigned ms = r->b->config ? r->b->config->broker.reclaim_timeout_msec : 250;

        event_del(j->timer);
        /* Requests still unanswered: the clients are skipped this round. */
        while (j->round.nowned > 0) {
                struct reclaim_req *req = j->round.owned[--j->round.nowned];
                struct reclaim_client *rc = req->rc;

                req->owner = NULL;
                req->timed_out = true;
                r->stats.timeouts++;
                j->unanswered++;
                if (!rc->timeout_logged && !atomic_load(&rc->gone)) {
                        rc->timeout_logged = true;
                        log_notice("client %" PRIu64 " (%s, pid %d) of tenant %s did not answer a %s request "
                                   "within %u ms; skipped until it answers",
                                   rc->client_id, rc->name, (int) rc->pid, rc->tenant->path,
                                   req->drain ? "drain" : "reclaim", ms);
                }
                reclaim_req_release_waiters(req);
        }
        while (j->round.nsubs > 0) {
                struct reclaim_req *req = j->round.subs[--j->round.nsubs];

                (void) reclaim_ptr_remove((void **) req->waiters, &req->nwaiters, j);
        }
        j->round.pending = 0;
        j->state = JOB_IDLE;
        j->rounds++;

        if (!j->round.drain) {
                j->reclaim_rounds++;
                j->reclaimed += j->round.got;
                j->last_got = j->round.got;
                /* Nothing that way: the next round may go below low. */
                j->use_low = j->round.got == 0 && j->last_low_skipped && !j->round.low;
                if (j->round.got == 0 && !j->use_low) {
                        j->fruitless++;
                        j->fruitless_streak++;
                } else if (j->round.got > 0)
                        j->fruitless_streak = 0;
        }
        job_continue(j);
}

/* ---- the steps of each kind of job ---- */

static bool job_charger_gone(const struct reclaim_job *j) {
        return !j->charger || atomic_load(&j->charger->gone);
}

/* The charge failed for good: reply ENOMEM with the reason. */
static void charge_fail(struct reclaim_job *j, const struct tenant_charge *res, unsigned long usage,
                        unsigned long max) {
        struct reclaim_client *rc = j->charger;
        uint64_t page_size = j->r->b->page_size;
        char b_charge[MB_SIZE_FORMAT_MAX], b_usage[MB_SIZE_FORMAT_MAX], b_max[MB_SIZE_FORMAT_MAX];
        char *reason = NULL;

        /* Bytes, as MemoryMax= is written, with the pages in parentheses. */
        if (asprintf(&reason, "charge of %s to %s failed: %s at max: usage %s, MemoryMax=%s",
                     mb_size_format_pages(b_charge, sizeof(b_charge), j->pages, page_size, UINT64_MAX),
                     rc->tenant->path, res->over->path,
                     mb_size_format_pages(b_usage, sizeof(b_usage), usage, page_size, PAGE_COUNTER_MAX),
                     mb_size_format_pages(b_max, sizeof(b_max), max, page_size, PAGE_COUNTER_MAX)) < 0)
                reason = NULL;
        log_debug("client %" PRIu64 ": %s", rc->client_id, reason ? reason : "out of memory");
        reclaim_post_to_worker(j->r, RMSG_CHARGE_DONE, rc, j->seq, j->pages, 0, ENOMEM,
                               reason ? reason : strdup("out of memory"));
}

/* try_charge_memcg() from its first failure on, the decisions being
 * tenant_try_charge() and tenant_charge_next(); false when done. */
static bool step_charge(struct reclaim_job *j) {
        struct reclaimer *r = j->r;
        struct reclaim_client *rc = j->charger;
        struct tenant_charge res;
        struct tenant_charge_retry retry;
        unsigned long usage, max, goal;

        if (job_charger_gone(j))
                return false; /* the client left; its parked charge went with it */
        /* The worker counted `max` at the first failure, and counts `high`
         * when it resumes the charge (it makes the Grant). */
        if (tenant_try_charge(rc->tenant, j->pages, j->pages, TENANT_CHARGE_RETRY, &res)) {
                reclaim_post_to_worker(r, RMSG_CHARGE_DONE, rc, j->seq, j->pages, 0, 0, NULL);
                return false;
        }
        usage = page_counter_read(&res.over->memory);
        max = page_counter_get_max(&res.over->memory);
        retry = (struct tenant_charge_retry) { .drained = j->drained, .elapsed_usec = reclaim_job_elapsed_usec(j),
                                              .fruitless = j->fruitless, .noretry = j->noretry,
                                              .reclaim_rounds = j->reclaim_rounds };
        for (;;) {
                switch (tenant_charge_next(&res, j->pages, &retry, &goal)) {
                case TENANT_CHARGE_DRAIN:
                        retry.drained = j->drained = true;
                        if (job_start_drain(j, res.over))
                                return true;
                        continue;
                case TENANT_CHARGE_RECLAIM:
                        if (job_start_reclaim(j, res.over, goal, true))
                                return true;
                        retry.reclaim_exhausted = true;
                        continue;
                case TENANT_CHARGE_OOM_KILL:
                case TENANT_CHARGE_NOMEM:
                        break;
                }
                break;
        }
        /* Still short: the OOM path (the `oom` event is in res), unless
         * __GFP_NORETRY stopped before it. */
        for (size_t i = 0; i < res.nevents; i++)
                reclaim_memory_event(r, res.events[i].tenant, res.events[i].event);
        if (!j->noretry && res.over->oom_policy == MB_OOM_KILL && reclaim_job_oom_kill(j, res.over))
                return true;
        charge_fail(j, &res, usage, max);
        return false;
}

/* The @depth-th ancestor of @t (0: @t itself), NULL past the root. */
static struct tenant *tenant_up(struct tenant *t, size_t depth) {
        while (t && depth-- > 0)
                t = t->parent;
        return t;
}

/* Release every waiting charge of @j, each after its throttle (0: at once). */
static void high_release(struct reclaim_job *j, bool throttle) {
        for (size_t i = 0; i < j->high.nwaiters; i++) {
                struct grant_waiter *gw = &j->high.waiters[i];
                uint64_t delay = 0;

                if (atomic_load(&gw->rc->gone))
                        continue; /* its parked charge went with it */
                if (throttle)
                        delay = high_delay_throttle_usec(&gw->rc->tenant->memory, gw->pages);
                reclaim_post_to_worker(j->r, RMSG_GRANT_LATER, gw->rc, gw->seq, gw->pages, delay, 0, NULL);
        }
}

/*
 * mem_cgroup_handle_over_high(): passes of reclaim_high() -- up from the
 * charging tenant, every level above its high counts a `high` event and
 * reclaims the pages charged (SWAP_CLUSTER_MAX in the retries) there --
 * until the throttle the waiting charges would get is 10 ms or less (then
 * nobody waits), or until a pass frees nothing after MAX_RECLAIM_RETRIES
 * fruitless ones (then each charge waits for calculate_high_delay()).
 * While reclaim makes progress it goes on rather than throttle, for at most
 * RECLAIM_MAX_USEC.  The levels are read anew at every pass.
 */
static bool step_high(struct reclaim_job *j) {
        struct reclaimer *r = j->r;
        struct tenant *leaf = tenant_lookup(r->b->tree, j->path);
        uint64_t sum = 0, delay;

        for (size_t i = 0; i < j->high.nwaiters; i++)
                if (!atomic_load(&j->high.waiters[i].rc->gone))
                        sum += j->high.waiters[i].pages;
        if (!leaf || sum == 0)
                return false; /* the charges went with their clients */

        for (;;) {
                struct tenant *x;

                if (j->high.level_round) {
                        /* A round at this level ended; below low once more
                         * when it found nothing above low (use_low). */
                        j->high.level_round = false;
                        j->high.pass_got += j->last_got;
                        if (!j->use_low)
                                j->high.level++;
                }
                x = tenant_up(leaf, j->high.level);
                if (x) {
                        unsigned long usage = page_counter_read(&x->memory), high = page_counter_get_high(&x->memory);

                        if (usage > high) {
                                uint64_t goal = j->high.in_retry ? RECLAIM_CLUSTER_PAGES : sum;

                                /* Above the right-sizing limit (not memory.high):
                                 * only the overage, never below the limit, which
                                 * is at least the effective min/low. */
                                if (page_counter_get_high_auto(&x->memory) < page_counter_get_high_setting(&x->memory))
                                        goal = MB_MIN(goal, (uint64_t) (usage - high));

                                if (!j->use_low)
                                        reclaim_memory_event(r, x, MB_EVENT_HIGH);
                                j->high.level_round = true;
                                if (job_start_reclaim(j, x, goal, true))
                                        return true;
                                j->high.level_round = false;
                        }
                        j->high.level++;
                        j->use_low = false; /* a pass below low was for that level */
                        continue;
                }

                /* The pass is over: the penalty of the largest charge
                 * waiting (they share the overage). */
                delay = 0;
                for (size_t i = 0; i < j->high.nwaiters; i++)
                        if (!atomic_load(&j->high.waiters[i].rc->gone))
                                delay = MB_MAX(delay, high_delay_throttle_usec(&j->high.waiters[i].rc->tenant->memory,
                                                                               j->high.waiters[i].pages));
                if (delay == 0) {
                        high_release(j, false);
                        return false;
                }
                if ((j->high.pass_got > 0 || (j->high.retries > 0 && j->high.retries--)) &&
                    reclaim_job_elapsed_usec(j) < RECLAIM_MAX_USEC) {
                        j->high.in_retry = true;
                        j->high.level = 0;
                        j->high.pass_got = 0;
                        continue;
                }
                high_release(j, true);
                return false;
        }
}

static bool step_proactive(struct reclaim_job *j) {
        struct tenant *t = tenant_lookup(j->r->b->tree, j->path);

        if (!t || j->reclaimed >= j->goal || j->fruitless >= MAX_RECLAIM_RETRIES ||
            reclaim_job_elapsed_usec(j) >= RECLAIM_MAX_USEC)
                return false;
        return job_start_reclaim(j, t, j->goal - j->reclaimed, true);
}

static bool step_limit(struct reclaim_job *j) {
        struct reclaimer *r = j->r;
        struct tenant *t = tenant_lookup(r->b->tree, j->path);
        unsigned long usage, max, high;

        if (!t)
                return false;
        usage = page_counter_read(&t->memory);
        max = page_counter_get_max(&t->memory);
        high = page_counter_get_high(&t->memory);

        if (usage <= max && usage <= high)
                return false;
        /* Both drain the stocks once first. */
        if (!j->drained) {
                j->drained = true;
                if (job_start_drain(j, t))
                        return true;
        }
        if (usage > max) {
                /* memory_max_write() */
                if (j->fruitless < MAX_RECLAIM_RETRIES && reclaim_job_elapsed_usec(j) < RECLAIM_MAX_USEC &&
                    job_start_reclaim(j, t, usage - max, true))
                        return true;
                reclaim_memory_event(r, t, MB_EVENT_OOM);
                if (t->oom_policy == MB_OOM_KILL && reclaim_job_oom_kill(j, t))
                        return true;
                return false;
        }
        if (j->fruitless < MAX_RECLAIM_RETRIES && reclaim_job_elapsed_usec(j) < RECLAIM_MAX_USEC)
                /* memory_high_write() */
                return job_start_reclaim(j, t, usage - high, true);
        return false;
}

/* A limit write's reclaim ended: log how it went (a reload learns it from
 * the log) and tell the writers waiting. */
static void limit_finish(struct reclaim_job *j) {
        struct reclaimer *r = j->r;
        struct tenant *t = r->shutting_down ? NULL : tenant_lookup(r->b->tree, j->path);
        struct reclaim_limits_outcome o = { .gone = !t, .reclaimed = j->reclaimed };

        if (t) {
                o.usage = page_counter_read(&t->memory);
                o.max = page_counter_get_max(&t->memory);
                o.high = page_counter_get_high(&t->memory);
                o.fits = o.usage <= o.max && o.usage <= o.high;
                char b_usage[MB_SIZE_FORMAT_MAX], b_limit[MB_SIZE_FORMAT_MAX], b_got[MB_SIZE_FORMAT_MAX];
                uint64_t ps = r->b->page_size;

                mb_size_format_pages(b_usage, sizeof(b_usage), o.usage, ps, PAGE_COUNTER_MAX);
                mb_size_format_pages(b_got, sizeof(b_got), o.reclaimed, ps, UINT64_MAX);
                if (o.fits)
                        log_info("tenant %s: usage %s is under its limits (MemoryMax=%s) after reclaiming %s",
                                 t->path, b_usage,
                                 mb_size_format_pages(b_limit, sizeof(b_limit), o.max, ps, PAGE_COUNTER_MAX), b_got);
                else
                        log_struct(LOG_WARNING, LOG_MESSAGE_OOM, t->path, 0,
                                   "tenant %s: usage %s stays above its %s=%s after reclaiming %s: nothing more to "
                                   "reclaim",
                                   t->path, b_usage, o.usage > o.max ? "MemoryMax" : "MemoryHigh",
                                   mb_size_format_pages(b_limit, sizeof(b_limit), o.usage > o.max ? o.max : o.high,
                                                        ps, PAGE_COUNTER_MAX),
                                   b_got);
        }
        for (size_t i = 0; i < j->nlwaiters; i++)
                j->lwaiters[i].cb(&o, j->lwaiters[i].userdata);
}

/* A right-sizing step: what is left of the goal, down to the floor. */
static bool step_rightsize(struct reclaim_job *j) {
        struct tenant *t = tenant_lookup(j->r->b->tree, j->path);
        uint64_t usage, room;

        if (!t || j->reclaimed >= j->goal || j->fruitless > 0 || j->rounds >= PRESSURE_MAX_ROUNDS)
                return false;
        usage = page_counter_read(&t->memory);
        room = usage > j->floor ? usage - j->floor : 0;
        return job_start_reclaim(j, t, MB_MIN(j->goal - j->reclaimed, room), false);
}

/* Host pressure: a share of every tenant's usage above its effective low,
 * never below it. */
static bool step_pressure(struct reclaim_job *j) {
        struct tenant *root = j->r->b->tree->root;

        if (j->rounds == 0) {
                uint64_t excess = reclaim_plan_excess_above_low(root, j->r->b->tree->recursive_protection);

                j->goal = excess >> RECLAIM_PRESSURE_SHIFT;
                if (j->goal == 0 && excess > 0)
                        j->goal = 1;
                log_debug("memory pressure: %" PRIu64 " pages above effective low, asking for %" PRIu64, excess,
                          j->goal);
        }
        if (j->reclaimed >= j->goal || j->fruitless > 0 || j->rounds >= PRESSURE_MAX_ROUNDS)
                return false;
        return job_start_reclaim(j, root, j->goal - j->reclaimed, false);
}

/* What ends a job of each kind, beside its requests and references. */
static void finish_proactive(struct reclaim_job *j) {
        if (j->cb)
                j->cb(MB_MIN(j->reclaimed, j->goal) * j->r->b->page_size, j->userdata);
}

static void finish_rightsize(struct reclaim_job *j) {
        if (j->step_cb)
                j->step_cb(&(struct reclaim_step_outcome) { .reclaimed = MB_MIN(j->reclaimed, j->goal),
                                                            .unanswered = j->unanswered },
                           j->userdata);
}

static void finish_pressure(struct reclaim_job *j) {
        j->r->pressure_running = false;
}

static void finish_limit(struct reclaim_job *j) {
        if (j->path)
                limit_finish(j);
}

/*
 * A job by its kind, as the kernel's shrinkers and rstat ops reach their
 * implementations through a table: step runs the next round (false when
 * the job is done), finish (may be NULL) reports the outcome before the
 * job is freed.
 */
struct job_ops {
        bool (*step)(struct reclaim_job *j);
        void (*finish)(struct reclaim_job *j);
};

static const struct job_ops job_ops[] = {
        [JOB_CHARGE] = { step_charge, NULL },
        [JOB_HIGH] = { step_high, NULL },
        [JOB_PROACTIVE] = { step_proactive, finish_proactive },
        [JOB_LIMIT] = { step_limit, finish_limit },
        [JOB_PRESSURE] = { step_pressure, finish_pressure },
        [JOB_RIGHTSIZE] = { step_rightsize, finish_rightsize },
};

/* Run the job's next step; free it when it is done. */
static void job_continue(struct reclaim_job *j) {
        bool more;

        reclaim_assert_main_thread(j->r);
        if (j->r->shutting_down)
                return;
        more = job_ops[j->kind].step(j);
        if (!more)
                job_free(j);
}

static void job_kick_cb(evutil_socket_t fd, short what, void *userdata) {
        struct reclaim_job *j = userdata;

        switch (j->state) {
        case JOB_IDLE:
                job_continue(j);
                break;
        case JOB_ROUND:
                if (j->round.pending == 0)
                        round_finish(j);
                break;
        case JOB_WAIT_VICTIM:
                if (j->victim && atomic_load(&j->victim->gone)) {
                        event_del(j->timer);
                        reclaim_client_unref(TAKE_PTR(j->victim));
                        j->state = JOB_IDLE;
                        j->fruitless = 0; /* a kill freed memory: the retries start over */
                        job_continue(j);
                }
                break;
        }
}

static void job_timer_cb(evutil_socket_t fd, short what, void *userdata) {
        struct reclaim_job *j = userdata;

        switch (j->state) {
        case JOB_ROUND:
                round_finish(j);
                break;
        case JOB_WAIT_VICTIM:
                /* The oom_reaper's MMF_OOM_SKIP: a victim that does not go
                 * is not waited for again; the next OOM chooses another. */
                if (!j->victim->oom_skip)
                        log_warning("client %" PRIu64 " (pid %d) did not exit within %llu ms of SIGKILL",
                                    j->victim->client_id, (int) j->victim->pid, RECLAIM_OOM_WAIT_USEC / 1000);
                j->victim->oom_skip = true;
                reclaim_client_unref(TAKE_PTR(j->victim));
                j->state = JOB_IDLE;
                job_continue(j);
                break;
        case JOB_IDLE:
                break;
        }
}

static struct reclaim_job *job_new(struct reclaimer *r, enum job_kind kind) {
        struct reclaim_job *j = calloc(1, sizeof(*j));

        if (!j)
                return NULL;
        j->r = r;
        j->kind = kind;
        j->serial = ++r->job_serial;
        j->start_usec = reclaim_now_usec();
        j->timer = evtimer_new(r->base, job_timer_cb, j);
        j->kick = event_new(r->base, -1, 0, job_kick_cb, j);
        if (!j->timer || !j->kick) {
                if (j->timer)
                        event_free(j->timer);
                if (j->kick)
                        event_free(j->kick);
                free(j);
                return NULL;
        }
        MB_LIST_PREPEND(r->jobs, j);
        r->stats.jobs++;
        return j;
}

static void job_free(struct reclaim_job *j) {
        struct reclaimer *r = j->r;

        MB_LIST_REMOVE(r->jobs, j);

        /* Requests of a job that ends early stay with their clients. */
        while (j->round.nowned > 0) {
                struct reclaim_req *req = j->round.owned[--j->round.nowned];

                req->owner = NULL;
                reclaim_req_release_waiters(req);
        }
        while (j->round.nsubs > 0) {
                struct reclaim_req *req = j->round.subs[--j->round.nsubs];

                (void) reclaim_ptr_remove((void **) req->waiters, &req->nwaiters, j);
        }
        if (job_ops[j->kind].finish)
                job_ops[j->kind].finish(j);
        free(j->lwaiters);

        event_free(j->timer);
        event_free(j->kick);
        reclaim_client_unref(j->charger);
        reclaim_client_unref(j->victim);
        for (size_t i = 0; i < j->high.nwaiters; i++)
                reclaim_client_unref(j->high.waiters[i].rc);
        free(j->high.waiters);
        free(j->round.owned);
        free(j->round.subs);
        free(j->path);
        free(j);
}

/* ---- messages from the workers (reclaim.c) ---- */

void reclaim_job_charge_failed(struct reclaimer *r, struct reclaim_client *rc, uint32_t seq, uint32_t pages,
                               uint32_t flags) {
        struct reclaim_job *j;

        if (atomic_load(&rc->gone))
                return;
        j = job_new(r, JOB_CHARGE);
        if (!j) {
                reclaim_post_to_worker(r, RMSG_CHARGE_DONE, rc, seq, pages, 0, ENOMEM,
                               strdup("out of memory in membrokerd while reclaiming"));
                return;
        }
        j->charger = reclaim_client_ref(rc);
        j->seq = seq;
        j->pages = pages;
        j->noretry = flags & WIRE_CHARGE_FLAG_NORETRY;
        reclaim_job_kick(j);
}

void reclaim_job_over_high(struct reclaimer *r, struct reclaim_client *rc, uint32_t seq, uint32_t pages) {
        struct reclaim_job *j = NULL;
        struct grant_waiter *gw;

        if (atomic_load(&rc->gone))
                return;
        /* Charges of one tenant that go over high together wait for one
         * reclaim of the overage. */
        for (struct reclaim_job *x = r->jobs; x; x = x->next)
                if (x->kind == JOB_HIGH && x->high.leaf == rc->tenant) {
                        j = x;
                        break;
                }
        if (!j) {
                j = job_new(r, JOB_HIGH);
                if (!j)
                        goto grant_now;
                j->high.leaf = rc->tenant;
                j->path = strdup(rc->tenant->path);
                if (!j->path) {
                        job_free(j);
                        goto grant_now;
                }
                j->high.retries = MAX_RECLAIM_RETRIES;
                reclaim_job_kick(j);
        }
        if (j->high.nwaiters == j->high.waiters_alloc) {
                size_t a = MB_MAX(j->high.waiters_alloc * 2, (size_t) 4);
                struct grant_waiter *v = realloc(j->high.waiters, a * sizeof(*v));

                if (!v)
                        goto grant_now;
                j->high.waiters = v;
                j->high.waiters_alloc = a;
        }
        gw = &j->high.waiters[j->high.nwaiters++];
        *gw = (struct grant_waiter) { .rc = reclaim_client_ref(rc), .seq = seq, .pages = pages };
        return;

grant_now:
        reclaim_post_to_worker(r, RMSG_GRANT_LATER, rc, seq, pages, high_delay_throttle_usec(&rc->tenant->memory, pages),
                               0, NULL);
}

void reclaim_job_answer(struct reclaimer *r, struct reclaim_client *rc, uint32_t seq, uint64_t pages) {
        struct reclaim_req *req = rc->outstanding;

        if (!req || req->seq != seq) {
                log_debug("client %" PRIu64 ": answer to reclaim request %u, which is not outstanding (%" PRIu64
                          " pages)",
                          rc->client_id, seq, pages);
                return;
        }
        /* "Nothing left" (the worker stored this seq before posting the
         * answer, and clears it on a Charge): later rounds of the job that
         * asked skip the client (shrink_slab_memcg() clearing the shrinker
         * bit on SHRINK_EMPTY).  Only the asking job: the rounds of other
         * jobs waiting for this answer plan afresh. */
        if (req->owner && atomic_load_explicit(&rc->nothing_left_seq, memory_order_relaxed) == seq) {
                rc->empty_job = req->owner->serial;
                rc->empty_seq = seq;
        }
        reclaim_req_resolve(req, pages);
}

void reclaim_job_client_gone(struct reclaimer *r, struct reclaim_client *rc) {
        if (rc->outstanding)
                reclaim_req_resolve(rc->outstanding, 0);
        for (struct reclaim_job *j = r->jobs; j; j = j->next)
                if ((j->state == JOB_WAIT_VICTIM && j->victim == rc) || (j->charger == rc && j->state == JOB_IDLE))
                        reclaim_job_kick(j);
}

/* ---- main thread API ---- */

int reclaim_proactive(struct reclaimer *r, struct tenant *t, uint64_t pages, reclaim_done_cb cb, void *userdata) {
        struct reclaim_job *j;

        reclaim_assert_main_thread(r);
        j = job_new(r, JOB_PROACTIVE);
        if (!j)
                return -ENOMEM;
        j->path = strdup(t->path);
        if (!j->path) {
                job_free(j);
                return -ENOMEM;
        }
        j->goal = pages;
        j->cb = cb; /* set last: job_free() above must not call it */
        j->userdata = userdata;
        reclaim_job_kick(j); /* the callback runs after we return */
        return 0;
}

int reclaim_rightsize_step(struct reclaimer *r, struct tenant *t, uint64_t pages, uint64_t floor_pages,
                           reclaim_step_cb cb, void *userdata) {
        struct reclaim_job *j;

        reclaim_assert_main_thread(r);
        if (r->shutting_down)
                return -ESHUTDOWN;
        j = job_new(r, JOB_RIGHTSIZE);
        if (!j)
                return -ENOMEM;
        j->path = strdup(t->path);
        if (!j->path) {
                job_free(j);
                return -ENOMEM;
        }
        j->goal = pages;
        j->floor = floor_pages;
        j->step_cb = cb; /* set last: job_free() above must not call it */
        j->userdata = userdata;
        reclaim_job_kick(j);
        return 0;
}

/* The limit job of @t, started when there is none; NULL when the usage
 * fits or out of memory (*ret_fits says which). */
static struct reclaim_job *limit_job(struct reclaimer *r, struct tenant *t, bool *ret_fits) {
        struct reclaim_job *j;

        *ret_fits = page_counter_read(&t->memory) <= MB_MIN(page_counter_get_max(&t->memory),
                                                            page_counter_get_high(&t->memory));
        if (*ret_fits)
                return NULL;
        for (j = r->jobs; j; j = j->next)
                if (j->kind == JOB_LIMIT && strcmp(j->path, t->path) == 0) {
                        /* It reads the limits anew at every step; a new
                         * limit gets a full set of retries. */
                        j->fruitless = 0;
                        j->drained = false;
                        j->start_usec = reclaim_now_usec();
                        j->serial = ++r->job_serial; /* and asks everyone again */
                        return j;
                }
        j = job_new(r, JOB_LIMIT);
        if (!j)
                return NULL;
        j->path = strdup(t->path);
        if (!j->path) {
                job_free(j);
                return NULL;
        }
        reclaim_job_kick(j);
        return j;
}

void reclaim_enforce_limits(struct reclaimer *r, struct tenant *t) {
        bool fits;

        if (!r || r->shutting_down)
                return;
        reclaim_assert_main_thread(r);
        (void) limit_job(r, t, &fits);
}

int reclaim_enforce_limits_wait(struct reclaimer *r, struct tenant *t, reclaim_limits_cb cb, void *userdata) {
        struct reclaim_job *j;
        struct limit_waiter *v;
        bool fits;

        if (!r || r->shutting_down)
                return -ESHUTDOWN;
        reclaim_assert_main_thread(r);
        j = limit_job(r, t, &fits);
        if (!j)
                return fits ? 1 : -ENOMEM;
        v = realloc(j->lwaiters, (j->nlwaiters + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        j->lwaiters = v;
        j->lwaiters[j->nlwaiters++] = (struct limit_waiter) { .cb = cb, .userdata = userdata };
        return 0;
}

void reclaim_pressure(struct reclaimer *r) {
        struct reclaim_job *j;

        if (!r || r->shutting_down)
                return;
        reclaim_assert_main_thread(r);
        r->stats.pressure_events++;
        if (r->pressure_running)
                return;
        j = job_new(r, JOB_PRESSURE);
        if (!j)
                return;
        r->pressure_running = true;
        reclaim_job_kick(j);
}

void reclaim_jobs_stop(struct reclaimer *r) {
        while (r->jobs) {
                struct reclaim_job *j = r->jobs;

                event_del(j->timer);
                job_free(j);
        }
        r->shutting_down = true;
        while (r->reqs)
                reclaim_req_free(r->reqs);
}
