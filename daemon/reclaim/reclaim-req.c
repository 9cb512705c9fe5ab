/* SPDX-License-Identifier: MIT */
/*
 * reclaim-req.c - the requests of cooperative reclaim: one Reclaim or Drain
 * to one client, the rounds waiting for it, and its answer (see
 * reclaim-internal.h; the job state machine is reclaim-job.c).  Main thread
 * only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include <event2/event.h>

#include "log.h"
#include "macros.h"
#include "reclaim-internal.h"

/* ---- small arrays ---- */

int reclaim_ptr_push(void ***v, size_t *n, size_t *alloc, void *p) {
        if (*n == *alloc) {
                size_t a = MB_MAX(*alloc * 2, (size_t) 8);
                void **nv = realloc(*v, a * sizeof(void *));

                if (!nv)
                        return -ENOMEM;
                *v = nv;
                *alloc = a;
        }
        (*v)[(*n)++] = p;
        return 0;
}

/* Remove @p from the array (order is not kept); false when absent. */
bool reclaim_ptr_remove(void **v, size_t *n, const void *p) {
        for (size_t i = 0; i < *n; i++)
                if (v[i] == p) {
                        v[i] = v[--*n];
                        return true;
                }
        return false;
}

uint64_t reclaim_now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* Time spent since @j started. */
uint64_t reclaim_job_elapsed_usec(const struct reclaim_job *j) {
        return reclaim_now_usec() - j->start_usec;
}


/* ---- requests ---- */

void reclaim_job_kick(struct reclaim_job *j) {
        event_active(j->kick, EV_TIMEOUT, 0);
}

void reclaim_req_free(struct reclaim_req *req) {
        struct reclaimer *r = req->r;

        MB_LIST_REMOVE(r->reqs, req);
        if (req->rc->outstanding == req)
                req->rc->outstanding = NULL;
        reclaim_client_unref(req->rc);
        free(req->waiters);
        free(req);
}

/* The rounds waiting for @req stop waiting for it. */
void reclaim_req_release_waiters(struct reclaim_req *req) {
        for (size_t i = 0; i < req->nwaiters; i++) {
                struct reclaim_job *w = req->waiters[i];

                (void) reclaim_ptr_remove((void **) w->round.subs, &w->round.nsubs, req);
                if (w->round.pending > 0 && --w->round.pending == 0)
                        reclaim_job_kick(w);
        }
        req->nwaiters = 0;
}

/* @req got its answer (@pages were returned) or its client left. */
void reclaim_req_resolve(struct reclaim_req *req, uint64_t pages) {
        struct reclaim_job *j = req->owner;

        /* A client that left has no tenant to speak of any more (it may be
         * removed once the client is gone): rc->tenant is only used while
         * !gone, on this thread. */
        if (req->timed_out && !atomic_load(&req->rc->gone)) {
                req->r->stats.late_answers++;
                if (req->rc->timeout_logged)
                        log_info("client %" PRIu64 " (%s, pid %d) of tenant %s answered a reclaim request late "
                                 "(%" PRIu64 " pages)",
                                 req->rc->client_id, req->rc->name, (int) req->rc->pid, req->rc->tenant->path, pages);
                req->rc->timeout_logged = false;
        }
        if (j) {
                (void) reclaim_ptr_remove((void **) j->round.owned, &j->round.nowned, req);
                j->round.got += pages;
                /* Whatever it gave, it is asked again next round, as
                 * shrink_slab() calls every shrinker again on each pass of
                 * memory_reclaim()/try_charge_memcg(): a shrinker that
                 * freed nothing now may free later (an object unpinned, an
                 * LRU emptying slabs).  Unless it said "nothing left"
                 * (reclaim_job_answer()): no shrinker, an empty stock. */
                if (j->round.pending > 0 && --j->round.pending == 0)
                        reclaim_job_kick(j);
        }
        reclaim_req_release_waiters(req);
        reclaim_req_free(req);
}

int reclaim_req_send(struct reclaim_job *j, struct reclaim_client *rc, uint32_t asked, bool drain) {
        struct reclaimer *r = j->r;
        struct reclaim_req *req;

        req = calloc(1, sizeof(*req));
        if (!req)
                return -ENOMEM;
        if (reclaim_ptr_push((void ***) &j->round.owned, &j->round.nowned, &j->round.owned_alloc, req) < 0) {
                free(req);
                return -ENOMEM;
        }
        req->r = r;
        req->rc = reclaim_client_ref(rc);
        req->seq = ++rc->next_seq;
        if (req->seq == 0)
                req->seq = ++rc->next_seq;
        req->asked = asked;
        req->drain = drain;
        req->owner = j;
        MB_LIST_PREPEND(r->reqs, req);
        rc->outstanding = req;
        j->round.pending++;
        r->stats.requests++;
        reclaim_post_to_worker(r, drain ? RMSG_SEND_DRAIN : RMSG_SEND_RECLAIM, rc, req->seq, asked, 0, 0, NULL);
        return 0;
}

/* @rc is busy with another request: wait for that answer in this round,
 * unless it already timed out (then the client is skipped).  True when
 * subscribed. */
bool reclaim_req_subscribe(struct reclaim_job *j, struct reclaim_req *req) {
        if (req->timed_out || req->owner == j)
                return false;
        for (size_t i = 0; i < j->round.nsubs; i++)
                if (j->round.subs[i] == req)
                        return false;
        if (reclaim_ptr_push((void ***) &req->waiters, &req->nwaiters, &req->waiters_alloc, j) < 0)
                return false;
        if (reclaim_ptr_push((void ***) &j->round.subs, &j->round.nsubs, &j->round.subs_alloc, req) < 0) {
                req->nwaiters--;
                return false;
        }
        j->round.pending++;
        return true;
}


