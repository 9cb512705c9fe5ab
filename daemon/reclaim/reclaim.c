/* SPDX-License-Identifier: MIT */
/*
 * reclaim.c - cooperative reclaim, transport (see reclaim.h and
 * reclaim-internal.h): the client handles, the mailboxes between the
 * reclaimer (main thread) and the workers, and the calls into the
 * connections through struct reclaim_client_ops.
 *
 * Everything here runs on the main thread, except the posting functions
 * that workers call (reclaim_charge_failed() ...) and the worker side of the
 * mailboxes (worker_box_handle(), on each worker's thread).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "macros.h"
#include "mailbox.h"
#include "reclaim-internal.h"
#include "tenant_state.h"
#include "worker.h"

/* ---- references ---- */

struct reclaim_client *reclaim_client_ref(struct reclaim_client *rc) {
        if (rc)
                atomic_fetch_add_explicit(&rc->refs, 1, memory_order_relaxed);
        return rc;
}

void reclaim_client_unref(struct reclaim_client *rc) {
        if (!rc || atomic_fetch_sub_explicit(&rc->refs, 1, memory_order_acq_rel) != 1)
                return;
        if (rc->pidfd >= 0)
                close(rc->pidfd);
        free(rc);
}

/* ---- mailboxes ---- */

static void rmsg_dispose(void *userdata, void *p) {
        struct rmsg *msg = p;

        reclaim_client_unref(msg->rc);
        free(msg->text);
}

static void post_to_reclaimer(struct reclaimer *r, enum rmsg_type type, struct reclaim_client *rc, uint32_t seq,
                              uint32_t pages, uint64_t value) {
        struct rmsg msg = { .type = type, .rc = reclaim_client_ref(rc), .seq = seq, .pages = pages, .value = value };
        int k;

        k = mailbox_post(r->inbox, &msg);
        if (k == -ENOMEM)
                log_error("reclaim: out of memory, a %d message is lost", (int) type);
}

void reclaim_post_to_worker(struct reclaimer *r, enum rmsg_type type, struct reclaim_client *rc, uint32_t seq,
                            uint32_t pages, uint64_t value, int error, char *text) {
        struct rmsg msg = { .type = type, .rc = reclaim_client_ref(rc), .seq = seq, .pages = pages, .value = value,
                            .error = error, .text = text };
        unsigned i = rc->worker;

        if (r->shutting_down || i >= r->nboxes || !r->boxes[i]) {
                rmsg_dispose(r, &msg);
                return;
        }
        if (mailbox_post(r->boxes[i], &msg) == -ENOMEM)
                log_error("reclaim: out of memory, a %d message is lost", (int) type);
}

/* ---- the worker side ---- */

static void worker_box_handle(void *userdata, void *p) {
        const struct reclaimer *r = userdata;
        struct rmsg *msg = p;
        struct reclaim_client *rc = msg->rc;
        struct conn *c = rc->conn; /* this thread owns it */

        switch (msg->type) {
        case RMSG_SEND_RECLAIM:
                if (c)
                        r->ops->reclaim_request(c, msg->seq, msg->pages);
                break;
        case RMSG_SEND_DRAIN:
                if (c)
                        r->ops->drain_request(c, msg->seq);
                break;
        case RMSG_CHARGE_DONE:
                if (c)
                        r->ops->charge_resume(c, msg->seq, msg->pages, msg->error, msg->text);
                else if (msg->error == 0)
                        /* Charged for a client that left meanwhile.  The
                         * tenant cannot have gone: it has this usage. */
                        page_counter_uncharge(&rc->tenant->memory, msg->pages);
                break;
        case RMSG_GRANT_LATER:
                /* A client that left uncharged its parked charge itself. */
                if (c)
                        r->ops->charge_grant_later(c, msg->seq, msg->value);
                break;
        default:
                log_error("reclaim: message %d sent to a worker", (int) msg->type);
        }
        rmsg_dispose(NULL, msg);
}

/* ---- client handles ---- */

int reclaim_client_attach(struct reclaimer *r, unsigned worker, struct conn *c, struct tenant *t,
                          uint64_t client_id, const char *name, pid_t pid, int pidfd,
                          struct reclaim_client **ret) {
        struct tenant_state *ts = tenant_state_of(t);
        struct reclaim_client *rc;

        rc = calloc(1, sizeof(*rc));
        if (!rc)
                return -ENOMEM;
        atomic_init(&rc->refs, 1);
        rc->r = r;
        rc->worker = worker;
        rc->conn = c;
        rc->tenant = t;
        rc->client_id = client_id;
        snprintf(rc->name, sizeof(rc->name), "%s", name ? name : "unnamed");
        rc->pid = pid;
        rc->pidfd = pidfd >= 0 ? fcntl(pidfd, F_DUPFD_CLOEXEC, 3) : -1;

        pthread_mutex_lock(&ts->lock);
        MB_LIST_PREPEND(ts->clients, rc);
        rc->linked = true;
        pthread_mutex_unlock(&ts->lock);

        *ret = rc;
        return 0;
}

void reclaim_client_detach(struct reclaim_client *rc) {
        struct tenant_state *ts;

        if (!rc)
                return;
        ts = tenant_state_of(rc->tenant);
        pthread_mutex_lock(&ts->lock);
        if (rc->linked) {
                MB_LIST_REMOVE(ts->clients, rc);
                rc->linked = false;
        }
        pthread_mutex_unlock(&ts->lock);

        rc->conn = NULL;
        atomic_store(&rc->held, 0);
        atomic_store(&rc->outside, 0);
        atomic_store(&rc->gone, true);
        if (rc->r)
                post_to_reclaimer(rc->r, RMSG_GONE, rc, 0, 0, 0);
        reclaim_client_unref(rc);
}

void reclaim_charge_failed(struct reclaim_client *rc, uint32_t seq, uint32_t pages, uint32_t flags) {
        post_to_reclaimer(rc->r, RMSG_CHARGE_FAILED, rc, seq, pages, flags);
}

void reclaim_charge_over_high(struct reclaim_client *rc, uint32_t seq, uint32_t pages) {
        post_to_reclaimer(rc->r, RMSG_OVER_HIGH, rc, seq, pages, 0);
}

void reclaim_answered(struct reclaim_client *rc, uint32_t reply_to, uint64_t pages, bool nothing_left) {
        /* Before the answer is posted: the reclaimer reads it with the
         * answer (the mailbox orders the two), and a Charge this worker
         * reads later clears it. */
        atomic_store_explicit(&rc->nothing_left_seq, nothing_left ? reply_to : 0, memory_order_relaxed);
        post_to_reclaimer(rc->r, RMSG_ANSWER, rc, reply_to, 0, pages);
}

/* ---- the reclaimer's side ---- */

void reclaim_memory_event(struct reclaimer *r, struct tenant *t, enum mb_event event) {
        broker_memory_event(r->b, t, event);
}

static void reclaimer_box_handle(void *userdata, void *p) {
        struct reclaimer *r = userdata;
        struct rmsg *msg = p;

        reclaim_assert_main_thread(r);
        if (r->shutting_down)
                goto done;
        switch (msg->type) {
        case RMSG_CHARGE_FAILED:
                reclaim_job_charge_failed(r, msg->rc, msg->seq, msg->pages, (uint32_t) msg->value);
                break;
        case RMSG_OVER_HIGH:
                reclaim_job_over_high(r, msg->rc, msg->seq, msg->pages);
                break;
        case RMSG_ANSWER:
                reclaim_job_answer(r, msg->rc, msg->seq, msg->value);
                break;
        case RMSG_GONE:
                reclaim_job_client_gone(r, msg->rc);
                break;
        default:
                log_error("reclaim: message %d sent to the reclaimer", (int) msg->type);
        }
done:
        rmsg_dispose(r, msg);
}

void reclaim_get_stats(const struct reclaimer *r, struct reclaim_stats *ret) {
        if (!r) {
                *ret = (struct reclaim_stats) {};
                return;
        }
        *ret = r->stats;
}

/* ---- life cycle ---- */

int reclaimer_new(struct broker *b, struct event_base *base, const struct reclaim_client_ops *ops,
                  struct reclaimer **ret) {
        struct reclaimer *r;
        int k;

        broker_assert_main_thread(b);
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->b = b;
        r->base = base;
        r->ops = ops;
        r->boxes = calloc(MB_MAX(b->nworkers, 1u), sizeof(struct mailbox *));
        k = r->boxes ? mailbox_new(base, sizeof(struct rmsg), reclaimer_box_handle, rmsg_dispose, r, &r->inbox)
                     : -ENOMEM;
        if (k < 0) {
                reclaimer_free(r);
                return k;
        }
        r->nboxes = b->nworkers;
        for (unsigned i = 0; i < b->nworkers; i++) {
                k = mailbox_new(b->workers[i]->base, sizeof(struct rmsg), worker_box_handle, rmsg_dispose, r,
                                &r->boxes[i]);
                if (k < 0) {
                        reclaimer_free(r);
                        return k;
                }
        }
        *ret = r;
        return 0;
}

void reclaimer_shutdown(struct reclaimer *r) {
        if (!r || r->shutting_down)
                return;
        /* Jobs end now: proactive requests answer with what they got. */
        reclaim_jobs_stop(r);
        /* Nothing more goes to the workers; what they post is dropped. */
        for (unsigned i = 0; i < r->nboxes; i++)
                mailbox_close(r->boxes[i]);
        mailbox_close(r->inbox);
}

void reclaimer_free(struct reclaimer *r) {
        if (!r)
                return;
        reclaimer_shutdown(r);
        for (unsigned i = 0; r->boxes && i < r->nboxes; i++)
                mailbox_free(r->boxes[i]);
        free(r->boxes);
        mailbox_free(r->inbox);
        free(r);
}
