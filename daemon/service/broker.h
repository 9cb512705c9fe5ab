/* SPDX-License-Identifier: MIT */
/*
 * broker.h - what the modules below the manager share: the tenant tree and
 * its locks, the fixed geometry of the broker (page size, stats slots,
 * workers), the client counters, and the hooks through which they reach
 * the manager.
 *
 * The manager (daemon/manager/manager.h) embeds one and hands a pointer to every
 * module it creates (connections, workers, the reclaimer, the audit, the
 * clients' events).  Those modules never see the manager itself: when they
 * must report upward (a tenant's event count moved, a client left) or use
 * what the manager owns (the fd store of daemon/service/restart.h), they call the
 * hooks of struct broker_ops, which the manager sets before any of them
 * runs, the way kernel/cgroup/rstat.c reaches a controller only through
 * css_rstat_flush.
 *
 * Locking (in this order, see docs/architecture.md):
 *   tree_lock  (rwlock)  written by the main thread for tenant creation,
 *                        removal and settings changes; read by workers to
 *                        resolve a Hello.  Charging never takes it.
 *   stats_lock (mutex)   every rstat operation (attach/detach of a client's
 *                        stats source, poll, flush) and the active list.
 *
 * Debug builds (MB_DEBUG, or the sanitizer build) check the threading and
 * locking rules with broker_assert_main_thread() and friends; elsewhere
 * they compile to nothing.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h" /* not the autoconf config.h */
#include "macros.h"
#include "tenant.h"

struct arena;
struct arena_extent;
struct broker;
struct guard;
struct reclaimer;
struct tenant_state;
struct worker;

/*
 * The hooks the manager provides.  Every one is set (none is NULL) before a
 * worker, the reclaimer or the audit runs.
 */
struct broker_ops {
        /* A tenant's memory.events count moved (@t, not the root): the bus
         * signal and the clients' Event frames follow on the main thread
         * (cgroup_file_notify()).  Any thread. */
        void (*queue_event)(struct broker *b, struct tenant *t, enum mb_event event);
        /* A client of @t is counted out: the last thing a leaving client
         * does (@t may be removed as soon as this returns).  Worker
         * threads. */
        void (*client_detached)(struct broker *b, struct tenant *t);

        /* The fd store, on the connections' side (restart_arena_new(),
         * restart_client_attach(), restart_client_detach(), restart_claim(),
         * restart_preserving() in daemon/service/restart.h, with the same
         * contracts). */
        int (*arena_new)(struct broker *b, struct tenant_state *ts, uint64_t npages, struct arena **ret);
        uint64_t (*client_attach)(struct broker *b, struct arena *a, uint32_t owner, uint64_t token);
        void (*client_detach)(struct broker *b, struct arena *a, uint32_t owner);
        int (*claim)(struct broker *b, struct tenant_state *ts, uint64_t token, uint32_t owner,
                     const struct arena_extent *extents, size_t n, bool more, uint64_t *ret_pages,
                     uint64_t *ret_bad_page);
        bool (*preserving)(struct broker *b);
};

struct broker {
        const struct broker_ops *ops;
        /* The thread that runs the main event base (recorded by
         * manager_new()); broker_assert_main_thread() compares with it. */
        pthread_t main_thread;

        /* The running configuration: replaced by a reload on the main
         * thread, read there only. */
        struct mb_config *config;
        /* config->broker.charge_batch, readable from any thread without
         * tree_lock (the Grant path). */
        _Atomic unsigned charge_batch;

        /* Fixed for the daemon's life once started. */
        uint64_t page_size;   /* bytes */
        unsigned stats_slots; /* CPU slots in a client's stats region */
        bool arena_tmpfs;     /* new arenas on a tmpfs instance each (daemon/reclaim/audit.h) */
        bool arena_hugetlb_bounded; /* HugePages=hugetlbfs: a bounded hugetlbfs instance per arena */

        struct tenant_tree *tree;
        pthread_rwlock_t tree_lock;
        pthread_mutex_t stats_lock;
        struct tenant_state *active; /* tenants with stats sources (stats_lock) */

        /* The worker threads, by index (set before any client connects). */
        struct worker **workers;
        unsigned nworkers;

        _Atomic unsigned nclients;
        _Atomic uint64_t next_client_id;
        /* Sessions that attached to a tenant, and that detached, since the
         * start (the state dump's "connections" line). */
        _Atomic uint64_t nattached, ndetached;

        /* The daemon stops (set by the main thread before the workers'
         * connections are freed): conn_free() leaves the pages in the
         * clients' mappings instead of hole-punching them. */
        _Atomic bool stopping;

        struct guard *guard;         /* caps, timeouts, the fd reserve (daemon/service/guard.h) */
        struct reclaimer *reclaimer; /* where the connections post reclaim (daemon/reclaim/reclaim.h) */
};

/* Set up the locks and the client ids, with @ops (static storage), and
 * record the calling thread as the main thread (manager_new()). */
static inline void broker_init(struct broker *b, const struct broker_ops *ops) {
        *b = (struct broker) { .ops = ops, .main_thread = pthread_self(), .next_client_id = 1 };
        pthread_rwlock_init(&b->tree_lock, NULL);
        pthread_mutex_init(&b->stats_lock, NULL);
}

/* Destroy the locks (the tree and the rest belong to the manager). */
static inline void broker_done(struct broker *b) {
        pthread_mutex_destroy(&b->stats_lock);
        pthread_rwlock_destroy(&b->tree_lock);
}

/* memcg_memory_event(): count @event on @t (locally) and its ancestors
 * (hierarchically), and report every tenant whose memory.events changed,
 * the root excepted, like cgroup_file_notify().  Any thread. */
static inline void broker_memory_event(struct broker *b, struct tenant *t, enum mb_event event) {
        tenant_memory_event(t, event);
        for (struct tenant *x = t; x && x->parent; x = x->parent)
                b->ops->queue_event(b, x, event);
}

/* ---- debug-build assertions (compiled out elsewhere) ---- */

/* "Main thread only": the caller runs the main event base. */
#define broker_assert_main_thread(b) mb_assert_debug(pthread_equal(pthread_self(), (b)->main_thread))
/* "Caller holds tree_lock" (for reading or writing), and "for writing". */
#define broker_assert_tree_locked(b) mb_assert_rwlock_held(&(b)->tree_lock)
#define broker_assert_tree_wrlocked(b) mb_assert_rwlock_wrheld(&(b)->tree_lock)
/* "Caller holds stats_lock". */
#define broker_assert_stats_locked(b) mb_assert_mutex_held(&(b)->stats_lock)
