/* SPDX-License-Identifier: MIT */
/*
 * reclaim.c - cooperative reclaim (see reclaim.h).
 *
 * A job is one reason to reclaim: a charge that failed at a max
 * (try_charge_memcg()), charges that went above a high
 * (mem_cgroup_handle_over_high()), a proactive request (memory_reclaim()),
 * a lowered limit (memory_max_write()) or host pressure.  A job runs in
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
 * Everything here runs on the main thread, except the mailbox posting
 * functions that workers call (reclaim_charge_failed() ...) and the worker
 * side of the mailboxes (worker_box_cb(), on each worker's thread).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <event2/event.h>

#include "conn.h"
#include "high_delay.h"
#include "log.h"
#include "macros.h"
#include "manager.h"
#include "protection.h"
#include "reclaim.h"
#include "tenant_state.h"
#include "worker.h"

/* ---- mailboxes ---- */

enum rmsg_type {
        /* to the reclaimer (main thread) */
        RMSG_CHARGE_FAILED,
        RMSG_OVER_HIGH,
        RMSG_ANSWER,
        RMSG_GONE,
        /* to a worker */
        RMSG_SEND_RECLAIM,
        RMSG_SEND_DRAIN,
        RMSG_CHARGE_DONE,
        RMSG_GRANT_LATER,
        RMSG_EVENT,
};

struct rmsg {
        enum rmsg_type type;
        struct reclaim_client *rc; /* a reference travels with the message */
        uint32_t seq;
        uint32_t pages;
        uint64_t value; /* pages answered, delay in usec, event count */
        int error;
        char *text;  /* error reason, event name */
        char *text2; /* event tenant */
};

struct mailbox {
        pthread_mutex_t lock;
        struct rmsg *msgs;
        size_t n, alloc;
        struct event *ev;
        bool closed;
        void (*handle)(void *owner, struct rmsg *msg);
        void *owner;
};

/* ---- jobs and requests ---- */

enum job_kind {
        JOB_CHARGE,     /* try_charge_memcg() at max */
        JOB_HIGH,       /* mem_cgroup_handle_over_high() */
        JOB_PROACTIVE,  /* memory_reclaim() */
        JOB_LIMIT,      /* memory_max_write() / memory_high_write() */
        JOB_PRESSURE,   /* PSI */
};

enum job_state {
        JOB_IDLE,        /* between rounds: the next step is due */
        JOB_ROUND,       /* requests in flight */
        JOB_WAIT_VICTIM, /* an OOM kill was sent, waiting for the client to go */
};

struct grant_waiter {
        struct reclaim_client *rc;
        uint32_t seq, pages;
};

struct reclaim_req {
        struct reclaimer *r;
        struct reclaim_client *rc;
        uint32_t seq;
        uint32_t asked; /* pages; 0 for a Drain */
        bool drain;
        bool timed_out;
        struct reclaim_job *owner;   /* NULL once the owner stopped waiting */
        struct reclaim_job **waiters; /* rounds of other jobs waiting for this answer */
        size_t nwaiters, waiters_alloc;
        struct reclaim_req *prev, *next; /* reclaimer->reqs */
};

struct reclaim_job {
        struct reclaimer *r;
        struct reclaim_job *prev, *next;
        enum job_kind kind;
        enum job_state state;
        struct event *timer, *kick;
        char *path;            /* PROACTIVE, LIMIT: the target */

        uint64_t goal, reclaimed; /* pages */
        unsigned rounds, fruitless;
        bool drained;
        bool use_low;          /* the next round starts with the pass below low */
        bool last_low_skipped; /* the last round skipped tenants below low */
        uint64_t last_got;

        /* The round in flight. */
        unsigned pending;
        uint64_t round_got;
        bool round_drain, round_low;
        struct reclaim_req **owned;
        size_t nowned, owned_alloc;
        struct reclaim_req **subs;
        size_t nsubs, subs_alloc;

        /* Clients that gave nothing: not asked again by this job. */
        uint64_t *dry;
        size_t ndry, dry_alloc;

        /* CHARGE */
        struct reclaim_client *charger;
        uint32_t seq, pages;

        /* HIGH: the charging clients' tenant and the levels over high */
        struct tenant *leaf;
        struct grant_waiter *waiters;
        size_t nwaiters, waiters_alloc;
        char **levels;
        size_t nlevels, level;
        unsigned level_rounds;

        /* PROACTIVE */
        manager_reclaim_cb cb;
        void *userdata;

        /* OOM */
        struct reclaim_client *victim;
};

struct reclaimer {
        struct manager *m;
        struct mailbox *inbox;
        struct mailbox **boxes; /* one per worker, by worker index */
        unsigned nboxes;
        struct reclaim_job *jobs;
        struct reclaim_req *reqs;
        bool pressure_running;
        bool shutting_down;
        struct reclaim_stats stats;
};

/* mem_cgroup_handle_over_high() retries while reclaim makes progress; the
 * broker asks every client of the subtree in one round, so a few rounds per
 * level are plenty. */
#define HIGH_MAX_ROUNDS_PER_LEVEL 4u
#define PRESSURE_MAX_ROUNDS 4u
/* try_to_free_mem_cgroup_pages() asks for max(nr_pages, SWAP_CLUSTER_MAX):
 * a charge short of a page still reclaims a cluster, so that the next
 * charges find room and the split between tenants stays proportional. */
#define RECLAIM_CLUSTER_PAGES 32u

static void job_continue(struct reclaim_job *j);
static void job_free(struct reclaim_job *j);

/* ---- references ---- */

static struct reclaim_client *rc_ref(struct reclaim_client *rc) {
        if (rc)
                atomic_fetch_add_explicit(&rc->refs, 1, memory_order_relaxed);
        return rc;
}

static void rc_unref(struct reclaim_client *rc) {
        if (!rc || atomic_fetch_sub_explicit(&rc->refs, 1, memory_order_acq_rel) != 1)
                return;
        if (rc->pidfd >= 0)
                close(rc->pidfd);
        free(rc);
}

static struct tenant *tenant_of_counter(struct page_counter *pc) {
        return (struct tenant *) ((char *) pc - offsetof(struct tenant, memory));
}

/* ---- mailboxes ---- */

static void rmsg_done(struct rmsg *msg) {
        rc_unref(msg->rc);
        free(msg->text);
        free(msg->text2);
}

static void mailbox_cb(evutil_socket_t fd, short what, void *userdata) {
        struct mailbox *box = userdata;
        struct rmsg *msgs;
        size_t n;

        pthread_mutex_lock(&box->lock);
        msgs = TAKE_PTR(box->msgs);
        n = box->n;
        box->n = box->alloc = 0;
        pthread_mutex_unlock(&box->lock);

        for (size_t i = 0; i < n; i++) {
                box->handle(box->owner, &msgs[i]);
                rmsg_done(&msgs[i]);
        }
        free(msgs);
}

static struct mailbox *mailbox_new(struct event_base *base, void (*handle)(void *, struct rmsg *), void *owner) {
        struct mailbox *box = calloc(1, sizeof(*box));

        if (!box)
                return NULL;
        if (pthread_mutex_init(&box->lock, NULL) != 0) {
                free(box);
                return NULL;
        }
        box->ev = event_new(base, -1, 0, mailbox_cb, box);
        if (!box->ev) {
                pthread_mutex_destroy(&box->lock);
                free(box);
                return NULL;
        }
        box->handle = handle;
        box->owner = owner;
        return box;
}

/* No more deliveries; what is queued is dropped.  The event is freed here,
 * so call it before the event base goes. */
static void mailbox_close(struct mailbox *box) {
        struct rmsg *msgs;
        size_t n;

        if (!box)
                return;
        pthread_mutex_lock(&box->lock);
        box->closed = true;
        msgs = TAKE_PTR(box->msgs);
        n = box->n;
        box->n = box->alloc = 0;
        pthread_mutex_unlock(&box->lock);
        for (size_t i = 0; i < n; i++)
                rmsg_done(&msgs[i]);
        free(msgs);
        if (box->ev) {
                event_free(box->ev);
                box->ev = NULL;
        }
}

static void mailbox_free(struct mailbox *box) {
        if (!box)
                return;
        mailbox_close(box);
        pthread_mutex_destroy(&box->lock);
        free(box);
}

/* Queue @msg (its reference and strings go with it) and wake the owner's
 * loop.  Thread-safe.  A closed box drops the message. */
static void mailbox_post(struct mailbox *box, struct rmsg *msg) {
        pthread_mutex_lock(&box->lock);
        if (box->closed)
                goto drop;
        if (box->n == box->alloc) {
                size_t n = MB_MAX(box->alloc * 2, (size_t) 16);
                struct rmsg *p = realloc(box->msgs, n * sizeof(*p));

                if (!p) {
                        log_error("reclaim: out of memory, a %d message is lost", (int) msg->type);
                        goto drop;
                }
                box->msgs = p;
                box->alloc = n;
        }
        box->msgs[box->n++] = *msg;
        /* Under the lock: mailbox_close() frees the event only after taking
         * it. */
        event_active(box->ev, EV_READ, 0);
        pthread_mutex_unlock(&box->lock);
        return;
drop:
        pthread_mutex_unlock(&box->lock);
        rmsg_done(msg);
}

static void post_to_reclaimer(struct reclaimer *r, enum rmsg_type type, struct reclaim_client *rc, uint32_t seq,
                              uint32_t pages, uint64_t value) {
        struct rmsg msg = { .type = type, .rc = rc_ref(rc), .seq = seq, .pages = pages, .value = value };

        mailbox_post(r->inbox, &msg);
}

/* Main thread: a message for the worker serving @rc.  Takes @text/@text2. */
static void post_to_worker(struct reclaimer *r, enum rmsg_type type, struct reclaim_client *rc, uint32_t seq,
                           uint32_t pages, uint64_t value, int error, char *text, char *text2) {
        struct rmsg msg = { .type = type, .rc = rc_ref(rc), .seq = seq, .pages = pages, .value = value,
                            .error = error, .text = text, .text2 = text2 };
        unsigned i = rc->w->index;

        if (r->shutting_down || i >= r->nboxes || !r->boxes[i]) {
                rmsg_done(&msg);
                return;
        }
        mailbox_post(r->boxes[i], &msg);
}

/* ---- the worker side ---- */

static void worker_box_handle(void *owner, struct rmsg *msg) {
        struct reclaim_client *rc = msg->rc;
        struct conn *c = rc->conn; /* this thread owns it */

        switch (msg->type) {
        case RMSG_SEND_RECLAIM:
                if (c)
                        conn_reclaim_request(c, msg->seq, msg->pages);
                break;
        case RMSG_SEND_DRAIN:
                if (c)
                        conn_drain_request(c, msg->seq);
                break;
        case RMSG_CHARGE_DONE:
                if (c)
                        conn_charge_resume(c, msg->seq, msg->pages, msg->error, msg->text);
                else if (msg->error == 0)
                        /* Charged for a client that left meanwhile.  The
                         * tenant cannot have gone: it has this usage. */
                        page_counter_uncharge(&rc->tenant->memory, msg->pages);
                break;
        case RMSG_GRANT_LATER:
                /* A client that left uncharged its parked charge itself. */
                if (c)
                        conn_charge_grant_later(c, msg->seq, msg->value);
                break;
        case RMSG_EVENT:
                if (c)
                        conn_send_event(c, msg->text, msg->value, msg->text2);
                break;
        default:
                log_error("reclaim: message %d sent to a worker", (int) msg->type);
        }
}

/* ---- client handles ---- */

int reclaim_client_attach(struct manager *m, struct worker *w, struct conn *c, struct tenant *t,
                          uint64_t client_id, const char *name, pid_t pid, int pidfd,
                          struct reclaim_client **ret) {
        struct tenant_state *ts = tenant_state_of(t);
        struct reclaim_client *rc;

        rc = calloc(1, sizeof(*rc));
        if (!rc)
                return -ENOMEM;
        atomic_init(&rc->refs, 1);
        rc->m = m;
        rc->w = w;
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
        struct manager *m;

        if (!rc)
                return;
        m = rc->m;
        ts = tenant_state_of(rc->tenant);
        pthread_mutex_lock(&ts->lock);
        if (rc->linked) {
                MB_LIST_REMOVE(ts->clients, rc);
                rc->linked = false;
        }
        pthread_mutex_unlock(&ts->lock);

        rc->conn = NULL;
        atomic_store(&rc->held, 0);
        atomic_store(&rc->gone, true);
        if (m->reclaimer)
                post_to_reclaimer(m->reclaimer, RMSG_GONE, rc, 0, 0, 0);
        rc_unref(rc);
}

void reclaim_charge_failed(struct reclaim_client *rc, uint32_t seq, uint32_t pages) {
        post_to_reclaimer(rc->m->reclaimer, RMSG_CHARGE_FAILED, rc, seq, pages, 0);
}

void reclaim_charge_over_high(struct reclaim_client *rc, uint32_t seq, uint32_t pages) {
        post_to_reclaimer(rc->m->reclaimer, RMSG_OVER_HIGH, rc, seq, pages, 0);
}

void reclaim_answered(struct reclaim_client *rc, uint32_t reply_to, uint64_t pages) {
        post_to_reclaimer(rc->m->reclaimer, RMSG_ANSWER, rc, reply_to, 0, pages);
}

/* ---- small arrays ---- */

static int ptr_push(void ***v, size_t *n, size_t *alloc, void *p) {
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
static bool ptr_remove(void **v, size_t *n, const void *p) {
        for (size_t i = 0; i < *n; i++)
                if (v[i] == p) {
                        v[i] = v[--*n];
                        return true;
                }
        return false;
}

static bool job_is_dry(const struct reclaim_job *j, uint64_t id) {
        for (size_t i = 0; i < j->ndry; i++)
                if (j->dry[i] == id)
                        return true;
        return false;
}

static void job_mark_dry(struct reclaim_job *j, uint64_t id) {
        if (job_is_dry(j, id))
                return;
        if (j->ndry == j->dry_alloc) {
                size_t a = MB_MAX(j->dry_alloc * 2, (size_t) 8);
                uint64_t *p = realloc(j->dry, a * sizeof(*p));

                if (!p)
                        return; /* it will be asked again: harmless */
                j->dry = p;
                j->dry_alloc = a;
        }
        j->dry[j->ndry++] = id;
}

/* ---- events counted by the reclaimer ---- */

/* memcg_memory_event() from the main thread: count, and queue the bus
 * signal (and the clients' Event) for every level whose count changed. */
static void reclaimer_memory_event(struct reclaimer *r, struct tenant *t, enum mb_event event) {
        tenant_memory_event(t, event);
        for (struct tenant *x = t; x && x->parent; x = x->parent)
                manager_queue_event(r->m, x, event);
}

/* ---- requests ---- */

static void job_kick(struct reclaim_job *j) {
        event_active(j->kick, EV_TIMEOUT, 0);
}

static void req_free(struct reclaim_req *req) {
        struct reclaimer *r = req->r;

        MB_LIST_REMOVE(r->reqs, req);
        if (req->rc->outstanding == req)
                req->rc->outstanding = NULL;
        rc_unref(req->rc);
        free(req->waiters);
        free(req);
}

/* The rounds waiting for @req stop waiting for it. */
static void req_release_waiters(struct reclaim_req *req) {
        for (size_t i = 0; i < req->nwaiters; i++) {
                struct reclaim_job *w = req->waiters[i];

                (void) ptr_remove((void **) w->subs, &w->nsubs, req);
                if (w->pending > 0 && --w->pending == 0)
                        job_kick(w);
        }
        req->nwaiters = 0;
}

/* @req got its answer (@pages were returned) or its client left. */
static void req_resolve(struct reclaim_req *req, uint64_t pages) {
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
                (void) ptr_remove((void **) j->owned, &j->nowned, req);
                j->round_got += pages;
                /* One that gave part of what was asked is asked again next
                 * round, as shrink_slab() calls every shrinker again on
                 * each pass of memory_reclaim()/try_charge_memcg(): what it
                 * freed may have freed more (an LRU emptying slabs).  One
                 * that gave nothing has nothing to give. */
                if (!req->drain && pages == 0)
                        job_mark_dry(j, req->rc->client_id);
                if (j->pending > 0 && --j->pending == 0)
                        job_kick(j);
        }
        req_release_waiters(req);
        req_free(req);
}

static int req_send(struct reclaim_job *j, struct reclaim_client *rc, uint32_t asked, bool drain) {
        struct reclaimer *r = j->r;
        struct reclaim_req *req;

        req = calloc(1, sizeof(*req));
        if (!req)
                return -ENOMEM;
        if (ptr_push((void ***) &j->owned, &j->nowned, &j->owned_alloc, req) < 0) {
                free(req);
                return -ENOMEM;
        }
        req->r = r;
        req->rc = rc_ref(rc);
        req->seq = ++rc->next_seq;
        if (req->seq == 0)
                req->seq = ++rc->next_seq;
        req->asked = asked;
        req->drain = drain;
        req->owner = j;
        MB_LIST_PREPEND(r->reqs, req);
        rc->outstanding = req;
        j->pending++;
        r->stats.requests++;
        post_to_worker(r, drain ? RMSG_SEND_DRAIN : RMSG_SEND_RECLAIM, rc, req->seq, asked, 0, 0, NULL, NULL);
        return 0;
}

/* @rc is busy with another request: wait for that answer in this round,
 * unless it already timed out (then the client is skipped).  True when
 * subscribed. */
static bool req_subscribe(struct reclaim_job *j, struct reclaim_req *req) {
        if (req->timed_out || req->owner == j)
                return false;
        for (size_t i = 0; i < j->nsubs; i++)
                if (j->subs[i] == req)
                        return false;
        if (ptr_push((void ***) &req->waiters, &req->nwaiters, &req->waiters_alloc, j) < 0)
                return false;
        if (ptr_push((void ***) &j->subs, &j->nsubs, &j->subs_alloc, req) < 0) {
                req->nwaiters--;
                return false;
        }
        j->pending++;
        return true;
}

/* ---- planning a round: shrink_node_memcgs() ---- */

struct target {
        struct reclaim_client *rc; /* referenced */
        struct tenant *t;
        uint64_t cap;   /* at most this many pages from this client */
        uint64_t ask;
        bool low;       /* reclaimed below its effective low */
};

struct plan {
        struct reclaimer *r;
        struct reclaim_job *j;
        struct tenant *root;
        bool drain;
        bool low_pass;
        bool low_skipped;
        struct target *targets;
        size_t ntargets, alloc;
        uint64_t total_cap;
        int error;
};

static void plan_done(struct plan *p) {
        for (size_t i = 0; i < p->ntargets; i++)
                rc_unref(p->targets[i].rc);
        free(p->targets);
        p->targets = NULL;
        p->ntargets = p->alloc = 0;
        p->total_cap = 0;
}

static int plan_add(struct plan *p, struct reclaim_client *rc, struct tenant *t, uint64_t cap, bool low) {
        if (p->ntargets == p->alloc) {
                size_t a = MB_MAX(p->alloc * 2, (size_t) 16);
                struct target *v = realloc(p->targets, a * sizeof(*v));

                if (!v)
                        return -ENOMEM;
                p->targets = v;
                p->alloc = a;
        }
        p->targets[p->ntargets++] = (struct target) { .rc = rc_ref(rc), .t = t, .cap = cap, .low = low };
        p->total_cap += cap;
        return 0;
}

/* Whether @rc can be asked in this round: it holds pages, it did not give
 * nothing earlier in this job, and it is not stalled on a request it let
 * time out.  Main thread (rc->outstanding). */
static bool plan_client_usable(const struct plan *p, const struct reclaim_client *rc) {
        if (atomic_load_explicit(&rc->held, memory_order_relaxed) == 0 || atomic_load(&rc->gone))
                return false;
        if (rc->outstanding && rc->outstanding->timed_out)
                return false;
        return !p->j || !job_is_dry(p->j, rc->client_id);
}

/* Split @cap pages of tenant @t among its clients in proportion to what
 * each holds (only the usable ones).  ts->lock held. */
static int plan_tenant_clients(struct plan *p, struct tenant *t, struct tenant_state *ts, uint64_t cap, bool low) {
        uint64_t sum = 0, given = 0;
        size_t first = p->ntargets;
        int r;

        for (struct reclaim_client *rc = ts->clients; rc; rc = rc->next)
                if (plan_client_usable(p, rc))
                        sum += atomic_load_explicit(&rc->held, memory_order_relaxed);
        if (sum == 0)
                return 0;
        cap = MB_MIN(cap, sum);
        for (struct reclaim_client *rc = ts->clients; rc; rc = rc->next) {
                uint64_t held = atomic_load_explicit(&rc->held, memory_order_relaxed), share;

                if (!plan_client_usable(p, rc))
                        continue;
                share = p->drain ? held : (uint64_t) ((unsigned __int128) cap * held / sum);
                r = plan_add(p, rc, t, share, low);
                if (r < 0)
                        return r;
                given += share;
        }
        /* The rounding remainder goes to the clients in list order, each up
         * to what it holds. */
        for (size_t i = first; !p->drain && given < cap && i < p->ntargets; i++) {
                uint64_t held = atomic_load_explicit(&p->targets[i].rc->held, memory_order_relaxed);
                uint64_t add = MB_MIN(cap - given, held > p->targets[i].cap ? held - p->targets[i].cap : 0);

                p->targets[i].cap += add;
                p->total_cap += add;
                given += add;
        }
        return 0;
}

static int plan_walk_cb(struct tenant *t, void *userdata) {
        struct plan *p = userdata;
        struct tenant_state *ts;
        unsigned long usage, emin, elow, protection;
        bool low = false;
        int r;

        /* mem_cgroup_calculate_protection() relative to the reclaim root,
         * parents before children: mem_cgroup_iter() is pre-order, so
         * every parent's emin/elow is fresh when its children use it. */
        if (!p->drain)
                page_counter_calculate_protection(&p->root->memory, &t->memory, p->r->m->tree->recursive_protection);
        if (t->nchildren > 0)
                return 0; /* pages live in leaves */
        ts = tenant_state_of(t);
        usage = page_counter_read(&t->memory);
        if (!ts || usage == 0)
                return 0;

        if (p->drain) {
                pthread_mutex_lock(&ts->lock);
                r = plan_tenant_clients(p, t, ts, usage, false);
                pthread_mutex_unlock(&ts->lock);
                return r < 0 ? (p->error = r, 1) : 0;
        }

        if (page_counter_below_min(&p->root->memory, &t->memory))
                return 0; /* hard protection: never reclaimed */
        if (page_counter_below_low(&p->root->memory, &t->memory)) {
                if (!p->low_pass) {
                        p->low_skipped = true; /* soft protection */
                        return 0;
                }
                low = true;
        }

        /* get_scan_count(): in proportion to the usage above protection;
         * in the pass below low only min protects. */
        page_counter_protection(&p->root->memory, &t->memory, &emin, &elow);
        protection = p->low_pass ? emin : MB_MAX(emin, elow);
        if (usage <= protection)
                return 0;

        pthread_mutex_lock(&ts->lock);
        r = plan_tenant_clients(p, t, ts, usage - protection, low);
        pthread_mutex_unlock(&ts->lock);
        if (r < 0) {
                p->error = r;
                return 1;
        }
        return 0;
}

static int plan_build(struct plan *p) {
        (void) tenant_walk(p->root, plan_walk_cb, p);
        return p->error;
}

/* Distribute @goal over the targets in proportion to their caps (the
 * kernel's proportional reclaim); the remainder goes to the largest first. */
static void plan_distribute(struct plan *p, uint64_t goal) {
        uint64_t given = 0;

        if (p->total_cap == 0)
                return;
        if (goal >= p->total_cap) {
                for (size_t i = 0; i < p->ntargets; i++)
                        p->targets[i].ask = p->targets[i].cap;
                return;
        }
        for (size_t i = 0; i < p->ntargets; i++) {
                p->targets[i].ask = (uint64_t) ((unsigned __int128) goal * p->targets[i].cap / p->total_cap);
                given += p->targets[i].ask;
        }
        while (given < goal) {
                size_t best = SIZE_MAX;

                for (size_t i = 0; i < p->ntargets; i++)
                        if (p->targets[i].ask < p->targets[i].cap &&
                            (best == SIZE_MAX || p->targets[i].cap - p->targets[i].ask >
                                                         p->targets[best].cap - p->targets[best].ask))
                                best = i;
                if (best == SIZE_MAX)
                        break;
                p->targets[best].ask++;
                given++;
        }
}

/* ---- rounds ---- */

static void round_arm_timer(struct reclaim_job *j) {
        unsigned ms = j->r->m->config ? j->r->m->config->broker.reclaim_timeout_msec : 250;
        struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

        j->state = JOB_ROUND;
        if (j->pending == 0)
                job_kick(j);
        else
                event_add(j->timer, &tv);
}

/* Send the requests of @p; true when the round waits for answers. */
static bool round_send(struct reclaim_job *j, struct plan *p) {
        struct tenant *low_counted = NULL;

        for (size_t i = 0; i < p->ntargets; i++) {
                struct target *tg = &p->targets[i];

                if (!p->drain && tg->ask == 0)
                        continue;
                if (tg->rc->outstanding) {
                        (void) req_subscribe(j, tg->rc->outstanding);
                        continue;
                }
                if (tg->low && tg->t != low_counted) {
                        /* shrink_node_memcgs(): reclaiming below low is an
                         * event of the tenant, once per round (a tenant's
                         * clients are next to each other in the plan). */
                        reclaimer_memory_event(j->r, tg->t, MB_EVENT_LOW);
                        low_counted = tg->t;
                }
                if (req_send(j, tg->rc, p->drain ? 0 : (uint32_t) MB_MIN(tg->ask, (uint64_t) UINT32_MAX), p->drain) < 0)
                        log_error("reclaim: out of memory, client %" PRIu64 " is not asked", tg->rc->client_id);
        }
        return j->pending > 0;
}

/* Start a round that drains the stocks of @root's subtree
 * (drain_all_stock()).  False when there is nobody to ask. */
static bool job_start_drain(struct reclaim_job *j, struct tenant *root) {
        struct plan p = { .r = j->r, .j = NULL, .root = root, .drain = true };
        bool wait;

        if (plan_build(&p) < 0) {
                plan_done(&p);
                return false;
        }
        j->round_drain = true;
        j->round_low = false;
        j->round_got = 0;
        wait = round_send(j, &p);
        plan_done(&p);
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
        struct plan p = { .r = j->r, .j = j, .root = root };
        bool wait;

        if (goal == 0)
                return false;
        p.low_pass = allow_low && j->use_low;
        if (plan_build(&p) < 0) {
                plan_done(&p);
                return false;
        }
        if (p.ntargets == 0 && p.low_skipped && allow_low && !p.low_pass) {
                plan_done(&p);
                p = (struct plan) { .r = j->r, .j = j, .root = root, .low_pass = true };
                if (plan_build(&p) < 0) {
                        plan_done(&p);
                        return false;
                }
        }
        plan_distribute(&p, goal);
        j->round_drain = false;
        j->round_low = p.low_pass;
        j->last_low_skipped = p.low_skipped;
        j->round_got = 0;
        wait = round_send(j, &p);
        plan_done(&p);
        if (!wait)
                return false;
        j->r->stats.rounds++;
        round_arm_timer(j);
        return true;
}

/* The round is over: every answer is in, or the timeout passed (then the
 * requests still unanswered are the clients skipped). */
static void round_finish(struct reclaim_job *j) {
        struct reclaimer *r = j->r;
        unsigned ms = r->m->config ? r->m->config->broker.reclaim_timeout_msec : 250;

        event_del(j->timer);
        /* Requests still unanswered: the clients are skipped this round. */
        while (j->nowned > 0) {
                struct reclaim_req *req = j->owned[--j->nowned];
                struct reclaim_client *rc = req->rc;

                req->owner = NULL;
                req->timed_out = true;
                r->stats.timeouts++;
                if (!rc->timeout_logged && !atomic_load(&rc->gone)) {
                        rc->timeout_logged = true;
                        log_notice("client %" PRIu64 " (%s, pid %d) of tenant %s did not answer a %s request "
                                   "within %u ms; skipped until it answers",
                                   rc->client_id, rc->name, (int) rc->pid, rc->tenant->path,
                                   req->drain ? "drain" : "reclaim", ms);
                }
                req_release_waiters(req);
        }
        while (j->nsubs > 0) {
                struct reclaim_req *req = j->subs[--j->nsubs];

                (void) ptr_remove((void **) req->waiters, &req->nwaiters, j);
        }
        j->pending = 0;
        j->state = JOB_IDLE;
        j->rounds++;

        if (!j->round_drain) {
                j->reclaimed += j->round_got;
                j->last_got = j->round_got;
                /* Nothing that way: the next round may go below low. */
                j->use_low = j->round_got == 0 && j->last_low_skipped && !j->round_low;
                if (j->round_got == 0 && !j->use_low)
                        j->fruitless++;
        }
        job_continue(j);
}

/* ---- OOM: mem_cgroup_out_of_memory() ---- */

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
                rc_unref(vw->best);
                vw->best = rc_ref(rc);
                vw->best_held = held;
        }
        pthread_mutex_unlock(&ts->lock);
        return 0;
}

int reclaim_client_kill(const struct reclaim_client *rc) {
#ifdef SYS_pidfd_send_signal
        if (rc->pidfd >= 0) {
                if (syscall(SYS_pidfd_send_signal, rc->pidfd, SIGKILL, NULL, 0) == 0)
                        return 0;
                if (errno != ENOSYS)
                        return -errno;
        }
#endif
        if (rc->pid <= 0)
                return -ESRCH;
        return kill(rc->pid, SIGKILL) < 0 ? -errno : 0;
}

/*
 * OOMPolicy=kill: SIGKILL the client holding the most pages in @oom's
 * subtree (oom_badness() without rss: pages held), count oom_kill on its
 * tenant, and wait for it to go.  False when there is no one to kill.
 */
static bool job_oom_kill(struct reclaim_job *j, struct tenant *oom) {
        struct reclaimer *r = j->r;
        struct victim_walk vw = {};
        struct timeval tv = { .tv_sec = RECLAIM_OOM_WAIT_USEC / 1000000,
                              .tv_usec = RECLAIM_OOM_WAIT_USEC % 1000000 };
        int k;

        (void) tenant_walk(oom, victim_cb, &vw);
        if (!vw.best) {
                log_warning("tenant %s: out of memory and no client holds pages to kill", oom->path);
                return false;
        }
        k = reclaim_client_kill(vw.best);
        vw.best->killed = true;
        if (k < 0) {
                log_error_errno(k, "tenant %s: out of memory; cannot kill client %" PRIu64 " (pid %d): %m", oom->path,
                                vw.best->client_id, (int) vw.best->pid);
                rc_unref(vw.best);
                return false;
        }
        log_warning("tenant %s: out of memory (usage %lu pages, max %lu pages); killed client %" PRIu64
                    " (%s, pid %d) of tenant %s holding %" PRIu64 " pages (OOMPolicy=kill)",
                    oom->path, page_counter_read(&oom->memory), page_counter_get_max(&oom->memory),
                    vw.best->client_id, vw.best->name, (int) vw.best->pid, vw.best->tenant->path, vw.best_held);
        /* The kernel counts MEMCG_OOM_KILL on the victim's memcg. */
        reclaimer_memory_event(r, vw.best->tenant, MB_EVENT_OOM_KILL);
        r->stats.oom_kills++;
        j->victim = vw.best;
        j->state = JOB_WAIT_VICTIM;
        if (atomic_load(&j->victim->gone))
                job_kick(j);
        else
                event_add(j->timer, &tv);
        return true;
}

/* ---- the steps of each kind of job ---- */

static bool job_charger_gone(const struct reclaim_job *j) {
        return !j->charger || atomic_load(&j->charger->gone);
}

/* try_charge_memcg() from its first failure on; false when done. */
static bool step_charge(struct reclaim_job *j) {
        struct reclaimer *r = j->r;
        struct reclaim_client *rc = j->charger;
        struct page_counter *fail = NULL;
        struct tenant *t, *over;
        unsigned long usage, max, margin;
        char *reason = NULL;

        if (job_charger_gone(j))
                return false; /* the client left; its parked charge went with it */
        t = rc->tenant;
        if (page_counter_try_charge(&t->memory, j->pages, &fail)) {
                post_to_worker(r, RMSG_CHARGE_DONE, rc, j->seq, j->pages, 0, 0, NULL, NULL);
                return false;
        }
        over = tenant_of_counter(fail);
        usage = page_counter_read(&over->memory);
        max = page_counter_get_max(&over->memory);
        margin = max > usage ? max - usage : 0;

        if (!j->drained) {
                j->drained = true;
                if (job_start_drain(j, over))
                        return true;
        }
        if (j->fruitless < MAX_RECLAIM_RETRIES && j->rounds < RECLAIM_MAX_ROUNDS &&
            job_start_reclaim(j, over, MB_MAX(j->pages > margin ? j->pages - margin : 1, (unsigned long) RECLAIM_CLUSTER_PAGES),
                              true))
                return true;

        /* Still short: the OOM path. */
        reclaimer_memory_event(r, over, MB_EVENT_OOM);
        if (over->oom_policy == MB_OOM_KILL && job_oom_kill(j, over))
                return true;
        if (asprintf(&reason,
                     "charge of %u pages to %s failed: %s at max (usage %lu pages, max %lu pages)",
                     j->pages, t->path, over->path, usage, max) < 0)
                reason = NULL;
        log_debug("client %" PRIu64 ": %s", rc->client_id, reason ? reason : "out of memory");
        post_to_worker(r, RMSG_CHARGE_DONE, rc, j->seq, j->pages, 0, ENOMEM,
                       reason ? reason : strdup("out of memory"), NULL);
        return false;
}

/* mem_cgroup_handle_over_high(): reclaim the overage of every level that
 * was over its high, then throttle each waiting charge. */
static bool step_high(struct reclaim_job *j) {
        struct reclaimer *r = j->r;

        while (j->level < j->nlevels) {
                struct tenant *x = tenant_lookup(r->m->tree, j->levels[j->level]);
                unsigned long usage, high;

                if (x) {
                        usage = page_counter_read(&x->memory);
                        high = page_counter_get_high(&x->memory);
                        if (usage > high && j->level_rounds < HIGH_MAX_ROUNDS_PER_LEVEL &&
                            (j->level_rounds == 0 || j->last_got > 0 || j->use_low)) {
                                j->level_rounds++;
                                if (job_start_reclaim(j, x, usage - high, true))
                                        return true;
                        }
                }
                j->level++;
                j->level_rounds = 0;
                j->use_low = false;
        }

        for (size_t i = 0; i < j->nwaiters; i++) {
                struct grant_waiter *gw = &j->waiters[i];
                uint64_t delay;

                if (atomic_load(&gw->rc->gone))
                        continue; /* its parked charge went with it */
                delay = high_delay_throttle_usec(&gw->rc->tenant->memory, gw->pages);
                post_to_worker(r, RMSG_GRANT_LATER, gw->rc, gw->seq, gw->pages, delay, 0, NULL, NULL);
        }
        return false;
}

static bool step_proactive(struct reclaim_job *j) {
        struct tenant *t = tenant_lookup(j->r->m->tree, j->path);

        if (!t || j->reclaimed >= j->goal || j->fruitless >= MAX_RECLAIM_RETRIES || j->rounds >= RECLAIM_MAX_ROUNDS)
                return false;
        return job_start_reclaim(j, t, j->goal - j->reclaimed, true);
}

static bool step_limit(struct reclaim_job *j) {
        struct reclaimer *r = j->r;
        struct tenant *t = tenant_lookup(r->m->tree, j->path);
        unsigned long usage, max, high;

        if (!t)
                return false;
        usage = page_counter_read(&t->memory);
        max = page_counter_get_max(&t->memory);
        high = page_counter_get_high(&t->memory);

        if (usage > max) {
                /* memory_max_write() */
                if (!j->drained) {
                        j->drained = true;
                        if (job_start_drain(j, t))
                                return true;
                }
                if (j->fruitless < MAX_RECLAIM_RETRIES && j->rounds < RECLAIM_MAX_ROUNDS &&
                    job_start_reclaim(j, t, usage - max, true))
                        return true;
                reclaimer_memory_event(r, t, MB_EVENT_OOM);
                if (t->oom_policy == MB_OOM_KILL && job_oom_kill(j, t))
                        return true;
                log_warning("tenant %s: usage %lu pages stays above its max of %lu pages: nothing more to reclaim",
                            t->path, usage, max);
                return false;
        }
        if (usage > high && j->fruitless < MAX_RECLAIM_RETRIES && j->rounds < RECLAIM_MAX_ROUNDS)
                /* memory_high_write() */
                return job_start_reclaim(j, t, usage - high, true);
        return false;
}

struct excess_walk {
        struct tenant *root;
        bool recursive;
        uint64_t excess;
};

static int excess_cb(struct tenant *t, void *userdata) {
        struct excess_walk *ew = userdata;
        unsigned long usage, emin, elow, protection;

        page_counter_calculate_protection(&ew->root->memory, &t->memory, ew->recursive);
        if (t->nchildren > 0)
                return 0;
        usage = page_counter_read(&t->memory);
        if (usage == 0)
                return 0;
        page_counter_protection(&ew->root->memory, &t->memory, &emin, &elow);
        protection = MB_MAX(emin, elow);
        if (usage > protection)
                ew->excess += usage - protection;
        return 0;
}

/* Host pressure: a share of every tenant's usage above its effective low,
 * never below it. */
static bool step_pressure(struct reclaim_job *j) {
        struct tenant *root = j->r->m->tree->root;

        if (j->rounds == 0) {
                struct excess_walk ew = { .root = root, .recursive = j->r->m->tree->recursive_protection };

                (void) tenant_walk(root, excess_cb, &ew);
                j->goal = ew.excess >> RECLAIM_PRESSURE_SHIFT;
                if (j->goal == 0 && ew.excess > 0)
                        j->goal = 1;
                log_debug("memory pressure: %" PRIu64 " pages above effective low, asking for %" PRIu64, ew.excess,
                          j->goal);
        }
        if (j->reclaimed >= j->goal || j->fruitless > 0 || j->rounds >= PRESSURE_MAX_ROUNDS)
                return false;
        return job_start_reclaim(j, root, j->goal - j->reclaimed, false);
}

/* Run the job's next step; free it when it is done. */
static void job_continue(struct reclaim_job *j) {
        bool more = false;

        if (j->r->shutting_down)
                return;
        switch (j->kind) {
        case JOB_CHARGE:
                more = step_charge(j);
                break;
        case JOB_HIGH:
                more = step_high(j);
                break;
        case JOB_PROACTIVE:
                more = step_proactive(j);
                break;
        case JOB_LIMIT:
                more = step_limit(j);
                break;
        case JOB_PRESSURE:
                more = step_pressure(j);
                break;
        }
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
                if (j->pending == 0)
                        round_finish(j);
                break;
        case JOB_WAIT_VICTIM:
                if (j->victim && atomic_load(&j->victim->gone)) {
                        event_del(j->timer);
                        rc_unref(TAKE_PTR(j->victim));
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
                log_warning("client %" PRIu64 " (pid %d) did not exit within %llu ms of SIGKILL",
                            j->victim->client_id, (int) j->victim->pid, RECLAIM_OOM_WAIT_USEC / 1000);
                rc_unref(TAKE_PTR(j->victim));
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
        j->timer = evtimer_new(r->m->base, job_timer_cb, j);
        j->kick = event_new(r->m->base, -1, 0, job_kick_cb, j);
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
        while (j->nowned > 0) {
                struct reclaim_req *req = j->owned[--j->nowned];

                req->owner = NULL;
                req_release_waiters(req);
        }
        while (j->nsubs > 0) {
                struct reclaim_req *req = j->subs[--j->nsubs];

                (void) ptr_remove((void **) req->waiters, &req->nwaiters, j);
        }
        if (j->kind == JOB_PROACTIVE && j->cb)
                j->cb(r->m, MB_MIN(j->reclaimed, j->goal) * r->m->page_size, j->userdata);
        if (j->kind == JOB_PRESSURE)
                r->pressure_running = false;

        event_free(j->timer);
        event_free(j->kick);
        rc_unref(j->charger);
        rc_unref(j->victim);
        for (size_t i = 0; i < j->nwaiters; i++)
                rc_unref(j->waiters[i].rc);
        free(j->waiters);
        for (size_t i = 0; i < j->nlevels; i++)
                free(j->levels[i]);
        free(j->levels);
        free(j->owned);
        free(j->subs);
        free(j->dry);
        free(j->path);
        free(j);
}

/* ---- the reclaimer's mailbox ---- */

static void start_charge_job(struct reclaimer *r, struct reclaim_client *rc, uint32_t seq, uint32_t pages) {
        struct reclaim_job *j;

        if (atomic_load(&rc->gone))
                return;
        j = job_new(r, JOB_CHARGE);
        if (!j) {
                post_to_worker(r, RMSG_CHARGE_DONE, rc, seq, pages, 0, ENOMEM,
                               strdup("out of memory in membrokerd while reclaiming"), NULL);
                return;
        }
        j->charger = rc_ref(rc);
        j->seq = seq;
        j->pages = pages;
        job_kick(j);
}

static void start_high_job(struct reclaimer *r, struct reclaim_client *rc, uint32_t seq, uint32_t pages) {
        struct reclaim_job *j = NULL;
        struct grant_waiter *gw;

        if (atomic_load(&rc->gone))
                return;
        /* Charges of one tenant that go over high together wait for one
         * reclaim of the overage. */
        for (struct reclaim_job *x = r->jobs; x; x = x->next)
                if (x->kind == JOB_HIGH && x->leaf == rc->tenant) {
                        j = x;
                        break;
                }
        if (!j) {
                j = job_new(r, JOB_HIGH);
                if (!j)
                        goto grant_now;
                j->leaf = rc->tenant;
                for (struct tenant *x = rc->tenant; x; x = x->parent) {
                        char **v;

                        if (page_counter_read(&x->memory) <= page_counter_get_high(&x->memory))
                                continue;
                        v = realloc(j->levels, (j->nlevels + 1) * sizeof(char *));
                        if (!v)
                                break;
                        j->levels = v;
                        j->levels[j->nlevels] = strdup(x->path);
                        if (j->levels[j->nlevels])
                                j->nlevels++;
                }
                job_kick(j);
        }
        if (j->nwaiters == j->waiters_alloc) {
                size_t a = MB_MAX(j->waiters_alloc * 2, (size_t) 4);
                struct grant_waiter *v = realloc(j->waiters, a * sizeof(*v));

                if (!v)
                        goto grant_now;
                j->waiters = v;
                j->waiters_alloc = a;
        }
        gw = &j->waiters[j->nwaiters++];
        *gw = (struct grant_waiter) { .rc = rc_ref(rc), .seq = seq, .pages = pages };
        return;

grant_now:
        post_to_worker(r, RMSG_GRANT_LATER, rc, seq, pages, high_delay_throttle_usec(&rc->tenant->memory, pages), 0,
                       NULL, NULL);
}

static void handle_answer(struct reclaimer *r, struct reclaim_client *rc, uint32_t seq, uint64_t pages) {
        struct reclaim_req *req = rc->outstanding;

        if (!req || req->seq != seq) {
                log_debug("client %" PRIu64 ": answer to reclaim request %u, which is not outstanding (%" PRIu64
                          " pages)",
                          rc->client_id, seq, pages);
                return;
        }
        req_resolve(req, pages);
}

static void handle_gone(struct reclaimer *r, struct reclaim_client *rc) {
        if (rc->outstanding)
                req_resolve(rc->outstanding, 0);
        for (struct reclaim_job *j = r->jobs; j; j = j->next)
                if ((j->state == JOB_WAIT_VICTIM && j->victim == rc) || (j->charger == rc && j->state == JOB_IDLE))
                        job_kick(j);
}

static void reclaimer_box_handle(void *owner, struct rmsg *msg) {
        struct reclaimer *r = owner;

        if (r->shutting_down)
                return;
        switch (msg->type) {
        case RMSG_CHARGE_FAILED:
                start_charge_job(r, msg->rc, msg->seq, msg->pages);
                break;
        case RMSG_OVER_HIGH:
                start_high_job(r, msg->rc, msg->seq, msg->pages);
                break;
        case RMSG_ANSWER:
                handle_answer(r, msg->rc, msg->seq, msg->value);
                break;
        case RMSG_GONE:
                handle_gone(r, msg->rc);
                break;
        default:
                log_error("reclaim: message %d sent to the reclaimer", (int) msg->type);
        }
}

/* ---- main thread API ---- */

int reclaim_proactive(struct reclaimer *r, struct tenant *t, uint64_t pages, manager_reclaim_cb cb,
                      void *userdata) {
        struct reclaim_job *j;

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
        job_kick(j); /* the callback runs after we return */
        return 0;
}

void reclaim_enforce_limits(struct reclaimer *r, struct tenant *t) {
        struct reclaim_job *j;

        if (!r || r->shutting_down)
                return;
        if (page_counter_read(&t->memory) <= MB_MIN(page_counter_get_max(&t->memory),
                                                    page_counter_get_high(&t->memory)))
                return;
        for (j = r->jobs; j; j = j->next)
                if (j->kind == JOB_LIMIT && strcmp(j->path, t->path) == 0) {
                        /* It reads the limits anew at every step; a new
                         * limit gets a full set of retries. */
                        j->fruitless = 0;
                        j->drained = false;
                        return;
                }
        j = job_new(r, JOB_LIMIT);
        if (!j)
                return;
        j->path = strdup(t->path);
        if (!j->path) {
                job_free(j);
                return;
        }
        job_kick(j);
}

void reclaim_pressure(struct reclaimer *r) {
        struct reclaim_job *j;

        if (!r || r->shutting_down)
                return;
        r->stats.pressure_events++;
        if (r->pressure_running)
                return;
        j = job_new(r, JOB_PRESSURE);
        if (!j)
                return;
        r->pressure_running = true;
        job_kick(j);
}

struct event_walk {
        struct reclaimer *r;
        const char *event;
        uint64_t count;
        const char *path;
};

static int event_cb(struct tenant *t, void *userdata) {
        struct event_walk *ew = userdata;
        struct tenant_state *ts = tenant_state_of(t);

        if (!ts || t->nchildren > 0 || atomic_load(&t->nclients) == 0)
                return 0;
        pthread_mutex_lock(&ts->lock);
        for (struct reclaim_client *rc = ts->clients; rc; rc = rc->next) {
                char *name = strdup(ew->event), *path = strdup(ew->path);

                if (!name || !path) {
                        free(name);
                        free(path);
                        break;
                }
                post_to_worker(ew->r, RMSG_EVENT, rc, 0, 0, ew->count, 0, name, path);
        }
        pthread_mutex_unlock(&ts->lock);
        return 0;
}

void reclaim_deliver_event(struct reclaimer *r, struct tenant *t, enum mb_event event, uint64_t count) {
        struct event_walk ew = { .r = r, .event = mb_event_to_string(event), .count = count, .path = t->path };

        if (!r || r->shutting_down || !ew.event)
                return;
        (void) tenant_walk(t, event_cb, &ew);
}

void reclaim_get_stats(const struct reclaimer *r, struct reclaim_stats *ret) {
        if (!r) {
                *ret = (struct reclaim_stats) {};
                return;
        }
        *ret = r->stats;
}

/* ---- life cycle ---- */

int reclaimer_new(struct manager *m, struct reclaimer **ret) {
        struct reclaimer *r;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->m = m;
        r->inbox = mailbox_new(m->base, reclaimer_box_handle, r);
        r->boxes = calloc(MB_MAX(m->nworkers, 1u), sizeof(struct mailbox *));
        if (!r->inbox || !r->boxes) {
                reclaimer_free(r);
                return -ENOMEM;
        }
        r->nboxes = m->nworkers;
        for (unsigned i = 0; i < m->nworkers; i++) {
                r->boxes[i] = mailbox_new(m->workers[i]->base, worker_box_handle, m->workers[i]);
                if (!r->boxes[i]) {
                        reclaimer_free(r);
                        return -ENOMEM;
                }
        }
        *ret = r;
        return 0;
}

void reclaimer_shutdown(struct reclaimer *r) {
        if (!r || r->shutting_down)
                return;
        /* Jobs end now: proactive requests answer with what they got. */
        while (r->jobs) {
                struct reclaim_job *j = r->jobs;

                event_del(j->timer);
                job_free(j);
        }
        r->shutting_down = true;
        while (r->reqs)
                req_free(r->reqs);
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
