/* SPDX-License-Identifier: MIT */
/*
 * reclaim.h - cooperative reclaim: the daemon asks clients to give pages
 * back.
 *
 * The kernel reclaims by scanning LRU lists; the broker cannot see into its
 * clients, so it asks them: Reclaim{seq, pages} ("give back up to this
 * many"), Drain{seq} ("give back every stocked page"), and the library
 * answers with Uncharge{reply_to = seq} after returning unused stocked
 * pages and calling the application's shrinkers.  Around that, this module
 * mirrors the kernel's reclaim decisions:
 *
 *   try_charge_memcg()          a charge that fails at `max` (the tenant's,
 *                               an ancestor's or the capacity) drains the
 *                               stocks of the failing level's subtree, then
 *                               reclaims what is missing there, retrying up
 *                               to MAX_RECLAIM_RETRIES fruitless rounds
 *                               (every client asked again each round) and
 *                               at most RECLAIM_MAX_USEC;
 *                               still short: `oom`, and ENOMEM or (OOMPolicy=
 *                               kill) mem_cgroup_out_of_memory();
 *   mem_cgroup_handle_over_high()  a charge that leaves a level above
 *                               `high` waits for passes of reclaim_high()
 *                               while they free something and the penalty
 *                               is above 10 ms, then for
 *                               calculate_high_delay();
 *   memory_reclaim()            proactive Reclaim(path, bytes);
 *   memory_max_write(),
 *   memory_high_write()         a lowered limit reclaims the excess;
 *   shrink_node_memcgs()        target selection with
 *                               page_counter_calculate_protection() relative
 *                               to the reclaim root, a second pass below
 *                               `low` when the first found nothing, amounts
 *                               proportional to usage above protection
 *                               (get_scan_count());
 *   PSI                         under host pressure (daemon/reclaim/pressure.c),
 *                               tenants above their effective low give part
 *                               of the excess back.
 *
 * Threads.  Everything is coordinated by the main thread (the "reclaimer"):
 * it plans rounds, keeps the requests in flight and their timers, and
 * charges on behalf of a client whose charge waits.  Workers own the
 * connections: they send the requests, receive the answers (uncharging the
 * pages at once), and reply to the clients.  The two sides talk through
 * mailboxes (daemon/base/mailbox.h), so a worker never waits for the main
 * thread nor for a client: a charge that needs reclaim is parked on its
 * connection and completed by a later message.  A client that does not answer within ReclaimTimeoutMSec=
 * is skipped for that round, counted and logged; as long as that request is
 * unanswered, later rounds skip it at once, so a stopped client stalls
 * nobody.
 *
 * A struct reclaim_client stands for one attached connection; it is
 * reference-counted so that messages about it stay valid after the
 * connection is gone.  The tenant's list of them (tenant_state->clients,
 * under tenant_state->lock) is how the reclaimer finds whom to ask.  The
 * reclaimer reaches the connections only through the struct
 * reclaim_client_ops it is given at creation, on their worker's thread.
 *
 * The decisions are the accounting core's: whether a charge fits and what
 * it does after a failure (daemon/core/charge.h), whom to ask for how much
 * (daemon/core/reclaim_plan.h).
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "broker.h"
#include "charge.h"
#include "tenant.h"

struct conn;
struct event_base;
struct reclaimer;
struct reclaim_req;

/* How long a charge waits for the client an OOM kill chose to go away. */
#define RECLAIM_OOM_WAIT_USEC (5ULL * 1000 * 1000)
/* Under host pressure each PSI event asks for this fraction (1 / 2^shift)
 * of every tenant's usage above its effective low. */
#define RECLAIM_PRESSURE_SHIFT 2u
/* Events are not queued to a client whose unread output passes this. */
#define RECLAIM_EVENT_OUTPUT_MAX_BYTES (64u * 1024u)

struct reclaim_client {
        _Atomic unsigned refs;
        struct reclaimer *r;    /* where its messages go (outlives it) */
        unsigned worker;        /* index of the worker serving the connection */
        struct conn *conn;      /* worker thread only; NULL once detached */
        struct tenant *tenant;
        uint64_t client_id;
        char name[64];
        pid_t pid;
        int pidfd;              /* -1 without one */
        _Atomic uint64_t held;  /* pages the client holds (written by the worker) */
        /* Pages charged for its own mappings (Charge.flags OUTSIDE): not
         * reclaimable (anon without swap), but its size for the OOM
         * killer, as oom_badness() counts a task's anon RSS. */
        _Atomic uint64_t outside;
        _Atomic bool gone;      /* detached */
        /* The seq of its last answer that said it has nothing left to give
         * (Uncharge.nothing_left); 0 after any other answer, and after each
         * Charge or Grant: pages it may give again (written by the worker,
         * read by the main thread). */
        _Atomic uint32_t nothing_left_seq;

        /* tenant_state->clients, under tenant_state->lock */
        struct reclaim_client *prev, *next;

        /* Main thread only. */
        struct reclaim_req *outstanding; /* the request it has not answered */
        uint32_t next_seq;
        bool timeout_logged;
        bool killed;
        /* An OOM victim that did not go within RECLAIM_OOM_WAIT_USEC of its
         * SIGKILL: no longer waited for (the kernel's MMF_OOM_SKIP). */
        bool oom_skip;
        uint64_t killed_usec;   /* CLOCK_MONOTONIC of the kill */
        bool linked;
        /* It answered request @empty_seq of the job with serial @empty_job
         * "nothing left": that job skips it while nothing_left_seq still
         * says @empty_seq. */
        uint64_t empty_job;
        uint32_t empty_seq;
};

/*
 * What the reclaimer needs from a connection.  Every call but kill runs on
 * the connection's worker thread, with @c owned by that thread.
 */
struct reclaim_client_ops {
        /* Send Reclaim{seq, pages} (counts pgscan) / Drain{seq}. */
        void (*reclaim_request)(struct conn *c, uint32_t seq, uint32_t pages);
        void (*drain_request)(struct conn *c, uint32_t seq);
        /* The parked charge @seq of @pages: @error 0 = the reclaimer
         * charged it (go on as a successful charge), else reply
         * Error{@error, @reason}.  May end the connection: the caller must
         * not use @c afterwards. */
        void (*charge_resume)(struct conn *c, uint32_t seq, uint32_t pages, int error, const char *reason);
        /* The parked, charged, over-high charge @seq may be granted after
         * @delay_usec (the throttle).  May end the connection (see above). */
        void (*charge_grant_later)(struct conn *c, uint32_t seq, uint64_t delay_usec);
        /* Send Event{event, count, tenant} unless the client's output is
         * backed up. */
        void (*send_event)(struct conn *c, const char *event, uint64_t count, const char *tenant);
        /* Main thread: SIGKILL the client's process (OOMPolicy=kill).
         * 0 or a negative errno. */
        int (*kill)(struct reclaim_client *rc);
};

/* ---- life cycle (manager.c) ---- */

/* The reclaimer on @base, the main thread's loop, reaching the connections
 * through @ops (static storage) on their workers (b->workers, which exist)
 * and reporting events through b->ops.  Main thread.  -ENOMEM. */
int reclaimer_new(struct broker *b, struct event_base *base, const struct reclaim_client_ops *ops,
                  struct reclaimer **ret);
/* Stop: every job ends (proactive callbacks get what was reclaimed so far),
 * nothing more is sent to workers.  Call before the workers are freed. */
void reclaimer_shutdown(struct reclaimer *r);
/* Free (after the workers are gone); NULL is a no-op. */
void reclaimer_free(struct reclaimer *r);

/* ---- connections (worker thread of the connection) ---- */

/**
 * reclaim_client_attach - a client of worker @worker was admitted to @t:
 * create its handle for @r and put it on the tenant's list.  @pidfd is
 * duplicated (may be -1).  Returns 0 or -ENOMEM.
 */
int reclaim_client_attach(struct reclaimer *r, unsigned worker, struct conn *c, struct tenant *t,
                          uint64_t client_id, const char *name, pid_t pid, int pidfd,
                          struct reclaim_client **ret);
/* The connection is going (all its pages were returned): take it off the
 * tenant's list, tell the reclaimer, drop the connection's reference. */
void reclaim_client_detach(struct reclaim_client *rc);

/* References: a message about @rc holds one.  Any thread. */
struct reclaim_client *reclaim_client_ref(struct reclaim_client *rc);
void reclaim_client_unref(struct reclaim_client *rc);

/* SIGKILL @rc's process through the connection's ops (its pidfd): the one
 * way a client is killed, for OOMPolicy= and OverrunPolicy=.  Main thread.
 * 0 or a negative errno. */
int reclaimer_kill_client(struct reclaimer *r, struct reclaim_client *rc);

static inline void reclaim_client_set_held(struct reclaim_client *rc, uint64_t held) {
        atomic_store_explicit(&rc->held, held, memory_order_relaxed);
}

static inline void reclaim_client_set_outside(struct reclaim_client *rc, uint64_t outside) {
        atomic_store_explicit(&rc->outside, outside, memory_order_relaxed);
}

/* A Charge of @pages (seq @seq, WIRE_CHARGE_FLAG_* @flags) failed at a
 * max: reclaim and retry asynchronously; the result comes back as
 * ops->charge_resume(). */
void reclaim_charge_failed(struct reclaim_client *rc, uint32_t seq, uint32_t pages, uint32_t flags);
/* A Charge of @pages, already charged, left some level above its high:
 * reclaim the overage; ops->charge_grant_later() says when to grant. */
void reclaim_charge_over_high(struct reclaim_client *rc, uint32_t seq, uint32_t pages);
/* The client answered Reclaim/Drain @reply_to; @pages were uncharged;
 * @nothing_left: it says it has nothing left to give (Uncharge.nothing_left).
 * Worker thread. */
void reclaim_answered(struct reclaim_client *rc, uint32_t reply_to, uint64_t pages, bool nothing_left);

/* The client sent a Charge or got a Grant: whatever "nothing left" it said
 * no longer holds (the kernel's set_shrinker_bit() when objects are added).
 * Worker thread; one relaxed load when there is nothing to clear. */
static inline void reclaim_client_charged(struct reclaim_client *rc) {
        if (atomic_load_explicit(&rc->nothing_left_seq, memory_order_relaxed) != 0)
                atomic_store_explicit(&rc->nothing_left_seq, 0, memory_order_relaxed);
}

/* ---- main thread ---- */

/**
 * reclaim_proactive - memory_reclaim(): reclaim @pages from @t's subtree
 * (the target's own protection does not shield it, its descendants' does);
 * @cb gets the bytes reclaimed (never more than asked), on the main thread,
 * after this returns (at the latest when the reclaimer shuts down).  -ENOMEM
 * (then @cb is not called).
 */
typedef void (*reclaim_done_cb)(uint64_t reclaimed_bytes, void *userdata);
int reclaim_proactive(struct reclaimer *r, struct tenant *t, uint64_t pages, reclaim_done_cb cb, void *userdata);

/* What a right-sizing step came to: pages reclaimed, and requests not
 * answered within ReclaimTimeoutMSec= (clients skipped because an earlier
 * request of theirs timed out included). */
struct reclaim_step_outcome {
        uint64_t reclaimed;
        unsigned unanswered;
};
typedef void (*reclaim_step_cb)(const struct reclaim_step_outcome *o, void *userdata);

/**
 * reclaim_rightsize_step - one step of MemoryPressureTarget=: reclaim up to
 * @pages from @t's subtree, as reclaim_proactive() does, except that @t's
 * usage is never taken below @floor_pages (read anew every round) and that
 * nothing is reclaimed below low anywhere in the subtree; at most
 * PRESSURE_MAX_ROUNDS rounds, none after a fruitless one.  @cb gets the
 * outcome on the main thread after this returns (at the latest when the
 * reclaimer shuts down).  Main thread.  -ENOMEM or -ESHUTDOWN (then @cb is
 * not called).
 */
int reclaim_rightsize_step(struct reclaimer *r, struct tenant *t, uint64_t pages, uint64_t floor_pages,
                           reclaim_step_cb cb, void *userdata);

/* memory_max_write()/memory_high_write(): when @t's usage is above its max
 * or high, drain the stocks once and reclaim the excess (above max, then
 * `oom` and OOMPolicy=kill); the outcome is logged.  Asynchronous. */
void reclaim_enforce_limits(struct reclaimer *r, struct tenant *t);
/* reclaim_enforce_limits(), and when there is an excess to reclaim, @cb
 * with the outcome once that reclaim ends (after this returns): 0.  1 when
 * the usage fits (@cb is not called); -ENOMEM; -ESHUTDOWN. */
/* What a limit write came to (memory_max_write() and memory_high_write()
 * return once the usage fits, or when reclaim and OOM could do no more).
 * Pages. */
struct reclaim_limits_outcome {
        bool fits;     /* usage at most max and high */
        bool gone;     /* the tenant was removed meanwhile */
        uint64_t usage, max, high, reclaimed;
};
typedef void (*reclaim_limits_cb)(const struct reclaim_limits_outcome *o, void *userdata);
int reclaim_enforce_limits_wait(struct reclaimer *r, struct tenant *t, reclaim_limits_cb cb, void *userdata);

/* Host memory pressure (daemon/reclaim/pressure.c): one reclaim pass over the whole
 * tree, never below effective low.  Ignored while one is running. */
void reclaim_pressure(struct reclaimer *r);

/* Counters for the state dump and tests. */
struct reclaim_stats {
        uint64_t jobs;          /* reclaim jobs started */
        uint64_t rounds;        /* rounds run */
        uint64_t requests;      /* Reclaim/Drain requests sent */
        uint64_t skipped;       /* requests not sent: the client had nothing left */
        uint64_t timeouts;      /* requests a client did not answer in time */
        uint64_t late_answers;  /* answers after their timeout */
        uint64_t pressure_events;
        uint64_t oom_kills;
};
void reclaim_get_stats(const struct reclaimer *r, struct reclaim_stats *ret);
