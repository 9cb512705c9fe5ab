/* SPDX-License-Identifier: MIT */
/*
 * reclaim-internal.h - what the reclaimer's files share, nobody else:
 *
 *   reclaim.c       transport: client handles, the mailboxes between the
 *                   reclaimer and the workers, the calls into the
 *                   connections through struct reclaim_client_ops, life
 *                   cycle;
 *   reclaim-job.c   the job state machine: requests, rounds, the steps of
 *                   each kind of job (planning through
 *                   daemon/core/reclaim_plan.h, charge retries through
 *                   daemon/core/charge.h);
 *   reclaim-oom.c   mem_cgroup_out_of_memory(): victim choice and the kill.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reclaim.h"

struct event;
struct mailbox;

/* ---- messages ---- */

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
};

struct rmsg {
        enum rmsg_type type;
        struct reclaim_client *rc; /* a reference travels with the message */
        uint32_t seq;
        uint32_t pages;
        uint64_t value; /* pages answered, delay in usec, charge flags */
        int error;
        char *text;  /* error reason */
};

/* ---- jobs and requests ---- */

enum job_kind {
        JOB_CHARGE,     /* try_charge_memcg() at max */
        JOB_HIGH,       /* mem_cgroup_handle_over_high() */
        JOB_PROACTIVE,  /* memory_reclaim() */
        JOB_LIMIT,      /* memory_max_write() / memory_high_write() */
        JOB_PRESSURE,   /* PSI */
        JOB_RIGHTSIZE,  /* a step of MemoryPressureTarget= (daemon/reclaim/rightsizer.h) */
};

enum job_state {
        JOB_IDLE,        /* between rounds: the next step is due */
        JOB_ROUND,       /* requests in flight */
        JOB_WAIT_VICTIM, /* an OOM kill was sent, waiting for the client to go */
};

struct limit_waiter {
        reclaim_limits_cb cb;
        void *userdata;
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
        uint64_t serial;       /* unique (r->job_serial); what rc->empty_job names */
        struct event *timer, *kick;
        char *path;            /* PROACTIVE, LIMIT: the target */

        uint64_t goal, reclaimed; /* pages */
        unsigned rounds, fruitless;
        unsigned fruitless_streak; /* fruitless rounds since the last progress */
        bool drained;
        bool use_low;          /* the next round starts with the pass below low */
        bool last_low_skipped; /* the last round skipped tenants below low */
        uint64_t last_got;

        /* The round in flight: requests pending, pages they got, whether
         * it drains or passes below low, the requests it owns and those of
         * other jobs it waits on. */
        struct {
                unsigned pending;
                uint64_t got;
                bool drain, low;
                struct reclaim_req **owned;
                size_t nowned, owned_alloc;
                struct reclaim_req **subs;
                size_t nsubs, subs_alloc;
        } round;

        uint64_t start_usec;   /* CLOCK_MONOTONIC when the job began */

        /* CHARGE */
        struct reclaim_client *charger;
        uint32_t seq, pages;
        bool noretry;             /* __GFP_NORETRY (WIRE_CHARGE_FLAG_NORETRY) */
        unsigned reclaim_rounds;  /* reclaim rounds run (drains not counted) */

        /* HIGH: the charging clients' tenant (its path in @path), the
         * charges waiting, and where the current reclaim_high() pass is:
         * the level (0 = the leaf, 1 its parent ...), whether a round at it
         * just ended, what the pass got, whether it is a retry, and the
         * fruitless passes left (MAX_RECLAIM_RETRIES). */
        struct {
                struct tenant *leaf;
                struct grant_waiter *waiters;
                size_t nwaiters, waiters_alloc;
                size_t level;
                bool level_round, in_retry;
                uint64_t pass_got;
                unsigned retries;
        } high;

        /* PROACTIVE, RIGHTSIZE */
        reclaim_done_cb cb;
        reclaim_step_cb step_cb;
        void *userdata;
        uint64_t floor;        /* RIGHTSIZE: the target's usage stays at least this */
        unsigned unanswered;   /* requests that timed out, clients skipped for one */

        /* LIMIT: the writers waiting for the outcome */
        struct limit_waiter *lwaiters;
        size_t nlwaiters;

        /* OOM */
        struct reclaim_client *victim;
};

struct reclaimer {
        struct broker *b;
        struct event_base *base; /* the main thread's */
        const struct reclaim_client_ops *ops;
        struct mailbox *inbox;
        struct mailbox **boxes; /* one per worker, by worker index */
        unsigned nboxes;
        struct reclaim_job *jobs;
        struct reclaim_req *reqs;
        uint64_t job_serial;     /* the last job's serial */
        bool pressure_running;
        bool shutting_down;
        struct reclaim_stats stats;
};

#define PRESSURE_MAX_ROUNDS 4u
/* DEF_PRIORITY: a round after n fruitless ones asks 2^n times the goal, at
 * most 2^12 times. */
#define RECLAIM_PRIORITY_SHIFT_MAX 12u

/* Jobs, requests and rc->outstanding belong to the main thread: say so
 * where it matters (debug builds, daemon/service/broker.h). */
#define reclaim_assert_main_thread(r) broker_assert_main_thread((r)->b)

/* ---- reclaim.c ---- */

/* Main thread: a message for the worker serving @rc (a reference to @rc is
 * taken); takes @text.  Dropped while shutting down. */
void reclaim_post_to_worker(struct reclaimer *r, enum rmsg_type type, struct reclaim_client *rc, uint32_t seq,
                            uint32_t pages, uint64_t value, int error, char *text);

/* memcg_memory_event() from the main thread: count, and queue the bus
 * signal (and the clients' Event) for every level whose count changed. */
void reclaim_memory_event(struct reclaimer *r, struct tenant *t, enum mb_event event);

/* ---- reclaim-job.c (main thread) ---- */

void reclaim_job_charge_failed(struct reclaimer *r, struct reclaim_client *rc, uint32_t seq, uint32_t pages,
                               uint32_t flags);
void reclaim_job_over_high(struct reclaimer *r, struct reclaim_client *rc, uint32_t seq, uint32_t pages);
void reclaim_job_answer(struct reclaimer *r, struct reclaim_client *rc, uint32_t seq, uint64_t pages);
void reclaim_job_client_gone(struct reclaimer *r, struct reclaim_client *rc);
/* End every job and drop every request (shutdown). */
void reclaim_jobs_stop(struct reclaimer *r);
/* Run @j's next step from its loop (not from inside a step). */
void reclaim_job_kick(struct reclaim_job *j);

/* ---- reclaim-oom.c (main thread) ---- */

/*
 * OOMPolicy=kill: kill the client holding the most pages in @oom's subtree
 * (oom_badness() without rss: pages held) through the ops table, count
 * oom_kill on its tenant, and make @j wait for it to go
 * (JOB_WAIT_VICTIM).  False when there is no one to kill.
 */
bool reclaim_job_oom_kill(struct reclaim_job *j, struct tenant *oom);

/* ---- requests (reclaim-req.c) ---- */

/* Small pointer arrays: append (-ENOMEM) and remove (false when absent). */
int reclaim_ptr_push(void ***v, size_t *n, size_t *alloc, void *p);
bool reclaim_ptr_remove(void **v, size_t *n, const void *p);
/* CLOCK_MONOTONIC in µs, and how long @j has run. */
uint64_t reclaim_now_usec(void);
uint64_t reclaim_job_elapsed_usec(const struct reclaim_job *j);
/* Send Reclaim (@drain false) or Drain to @rc for @j, asking @asked pages:
 * one more pending answer in @j's round.  0 or -ENOMEM. */
int reclaim_req_send(struct reclaim_job *j, struct reclaim_client *rc, uint32_t asked, bool drain);
/* @rc is busy with @req of another job: @j's round waits for that answer
 * too, unless it timed out.  True when subscribed. */
bool reclaim_req_subscribe(struct reclaim_job *j, struct reclaim_req *req);
/* @req was answered with @pages (or its client left): tell its job and
 * the rounds waiting for it, then free it. */
void reclaim_req_resolve(struct reclaim_req *req, uint64_t pages);
void reclaim_req_release_waiters(struct reclaim_req *req);
void reclaim_req_free(struct reclaim_req *req);
