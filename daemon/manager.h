/* SPDX-License-Identifier: MIT */
/*
 * manager.h - the daemon's top-level object (systemd-oomd's Manager).
 *
 * Owns the configuration, the tenant tree, the listening socket, the worker
 * threads and the bus connection.  The main thread runs `base`; workers each
 * run their own event base and serve client connections.
 *
 * Locking:
 *   tree_lock  (rwlock)  tenant create/remove/settings changes take it for
 *                        writing (main thread only); workers take it for
 *                        reading when they resolve a Hello.  Charging never
 *                        takes it (page_counter is lock-free).
 *   stats_lock (mutex)   every rstat operation (attach/detach of a client's
 *                        stats source, poll, flush) -- workers take it only
 *                        at connect/disconnect.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/config.h" /* not the autoconf config.h */
#include "tenant.h"

struct event_base;
struct event;
struct evconnlistener;
struct worker;
struct bus_state;
struct tenant_state;
struct mailbox;
struct client_events;
struct reclaimer;
struct pressure;
struct state;
struct restart;

enum manager_bus_kind {
        MANAGER_BUS_NONE = 0, /* --no-bus: tests of the broker alone */
        MANAGER_BUS_SYSTEM,
        MANAGER_BUS_USER,
        MANAGER_BUS_ADDRESS,
};

struct manager {
        struct event_base *base;
        struct mb_config *config;
        /* config->broker.charge_batch, readable without tree_lock (the
         * Grant path, daemon/conn.c) */
        _Atomic unsigned broker_charge_batch;
        char *config_dir;
        char *socket_path;
        char *state_dir;
        unsigned ncpus;

        struct tenant_tree *tree;
        pthread_rwlock_t tree_lock;
        pthread_mutex_t stats_lock;

        struct worker **workers;
        unsigned nworkers;
        _Atomic unsigned nclients;
        _Atomic uint64_t next_client_id;
        struct evconnlistener *listener;
        struct event *sigint, *sigterm, *sighup;
        struct event *flush_timer;
        struct mailbox *event_box;  /* worker -> main: tenant events (daemon/mailbox.h) */

        enum manager_bus_kind bus_kind;
        char *bus_address;
        struct bus_state *bus; /* daemon/bus.c */

        /* Added by the broker work (daemon/manager.c). */
        uint64_t page_size;        /* bytes, fixed for the daemon's life */
        unsigned stats_slots;      /* CPU slots in a client's stats region */
        unsigned next_worker;      /* round robin (main thread) */
        bool listening;
        struct event *sigusr1;     /* log the tenant tree (for admins, tests) */
        uint64_t state_dumps;
        struct tenant_state *active; /* tenants with stats sources (stats_lock) */

        /* Added by the pressure work (daemon/reclaim.c, daemon/pressure.c). */
        struct reclaimer *reclaimer; /* cooperative reclaim (main thread) */
        struct pressure *pressure;   /* PSI trigger, with PressureReclaim=yes */
        char *pressure_path;         /* --pressure-file */
        char *pressure_trigger;      /* --pressure-trigger */

        struct client_events *client_events; /* events told to clients */

        /* Added by the service work (daemon/service.c, state.c, restart.c). */
        struct state *state;       /* limits layered over the files (main thread) */
        struct restart *restart;   /* the fd-store restart */
        struct event *watchdog;    /* WATCHDOG=1 timer, NULL without a watchdog */
        unsigned status_tenants, status_clients; /* last STATUS= sent */

        /* Added by the configuration work (daemon/manager-reload.c). */
        struct manager_reload *reload; /* the files read off the main thread */
        _Atomic unsigned ndraining;    /* tenants marked draining */
        struct event *drain_wakeup;    /* worker -> main: a client of some tenant left */

        /* Per-uid connection caps, timeouts, the fd reserve (daemon/guard.h). */
        struct guard *guard;

        /* Added by the arena work (daemon/audit.c). */
        bool arena_tmpfs;          /* new arenas on a tmpfs instance each */
        struct event *audit_timer; /* the arena audit, 10 times a second */
};

/* Limits as the bus and the configuration express them (bytes, UINT64_MAX =
 * "max"); a field left at MB_LIMIT_UNSET is not changed. */
struct mb_limits {
        uint64_t max, high, low, min;
        uint64_t charge_batch; /* pages; MB_LIMIT_UNSET = unchanged */
};

/* Refresh statistics of @t's subtree before a read: poll the stats sources of
 * the clients attached in that subtree, then rstat_flush_if_needed() (or
 * rstat_flush() with @force).  Main thread. */
void manager_stats_refresh(struct manager *m, struct tenant *t, bool force);

/* Create a tenant at run time (CreateTenant); -EEXIST, -EINVAL, -EBUSY. */
int manager_tenant_create(struct manager *m, const char *path, const struct mb_limits *limits,
                          struct tenant **ret);
/* RemoveTenant: -EBUSY when it has clients or children, -EPERM for "/". */
int manager_tenant_remove(struct manager *m, struct tenant *t);
/* SetTenantLimits: applies at once to charging; -EINVAL on a bad value. */
int manager_tenant_set_limits(struct manager *m, struct tenant *t, const struct mb_limits *limits);
/* SetTenantLimits(..., runtime): apply as manager_tenant_set_limits(), then
 * record the change in the runtime layer (@runtime) or the persisted layer
 * (written to STATE_DIR/limits.conf) of daemon/state.h.  A failure to
 * write is returned (the change stays applied until the next reload). */
int manager_tenant_set_limits_layer(struct manager *m, struct tenant *t, const struct mb_limits *limits,
                                    bool runtime);
/* What a limit write came to (memory_max_write() and memory_high_write()
 * return once the usage fits, or when reclaim and OOM could do no more).
 * Pages. */
struct manager_limits_outcome {
        bool fits;     /* usage at most max and high */
        bool gone;     /* the tenant was removed meanwhile */
        uint64_t usage, max, high, reclaimed;
};
typedef void (*manager_limits_cb)(struct manager *m, const struct manager_limits_outcome *o, void *userdata);
/**
 * manager_tenant_limits_wait - after a limit write to @t: when its usage is
 * above its max or high, the reclaim of the excess (started by the write)
 * calls @cb on the main thread when it ends, after this returns; returns
 * 0.  Returns 1 (and @cb is not called) when the usage fits already,
 * -ENOMEM.  Main thread.
 */
int manager_tenant_limits_wait(struct manager *m, struct tenant *t, manager_limits_cb cb, void *userdata);
/* Reclaim(path, bytes) -> bytes reclaimed, never more than asked
 * (memory_reclaim(): @t's own protection does not shield it, its
 * descendants' does; see daemon/reclaim.h).  The callback runs on the main
 * thread when reclaim completes, after this returns.  -ENOMEM. */
typedef void (*manager_reclaim_cb)(struct manager *m, uint64_t reclaimed_bytes, void *userdata);
int manager_reclaim(struct manager *m, struct tenant *t, uint64_t bytes, manager_reclaim_cb cb, void *userdata);
/* Reload(): re-read the configuration (on this thread) and apply it; on
 * error *ret_error = "file:line: ..." and the running configuration stays.
 * Main thread. */
int manager_reload(struct manager *m, char **ret_error);

/**
 * manager_reload_async - Reload() that keeps the main loop serving: the
 * files are read and parsed by a thread of their own, then applied on the
 * main thread under the tree lock in one short critical section.  @cb runs
 * on the main thread when done, with 0 or a negative errno and then the
 * "file:line: reason" (NULL when none).  A request made while a reload runs
 * is served by the next one (the files are read again).  Main thread.
 * 0, or -ENOMEM / the pthread_create() error (then @cb is not called).
 */
typedef void (*manager_reload_cb)(struct manager *m, int r, const char *error, void *userdata);
int manager_reload_async(struct manager *m, manager_reload_cb cb, void *userdata);
/* Wait for a reload thread still running and free its state (shutdown). */
void manager_reload_free(struct manager *m);

/**
 * manager_client_detached - count a client of @t out (worker threads, the
 * last thing a leaving client does: @t may be removed as soon as this
 * returns).  When some tenant drains, the main thread is woken to remove the
 * draining tenants whose last client has left.
 */
void manager_client_detached(struct manager *m, struct tenant *t);

/* Remove the draining tenants that have no client, no child and no page
 * left, deepest first (and their bus objects).  Main thread. */
void manager_drain(struct manager *m);

/* Internals shared with daemon/manager-reload.c (main thread, tree lock
 * held for writing): a tenant's state; remove a leaf without clients or
 * pages (-EBUSY, -EPERM for the root). */
struct tenant_state *manager_tenant_state_new(struct tenant *t);
int manager_tenant_remove_locked(struct manager *m, struct tenant *t);

/* Called by workers when a tenant event counter moved; delivered on the main
 * thread to bus_emit_memory_event() (daemon/bus.h). Thread-safe. */
void manager_queue_event(struct manager *m, struct tenant *t, enum mb_event event);

unsigned manager_nclients(struct manager *m);

/* ---- Added by the broker work ---- */

/* One line of a tenant's memory.stat-like report (design.md §4). */
struct mb_stat_kv {
        const char *key; /* static string */
        uint64_t value;  /* bytes, or a count for pgalloc, pgfree, *_requests, pgscan, pgsteal */
};

/**
 * manager_tenant_stat - fill *@ret (malloc'ed array, free() it) with @t's
 * statistics as ordered key/value pairs: pages, stock, slab,
 * slab_reclaimable, slab_unreclaimable, pgalloc, pgfree, charge_requests,
 * uncharge_requests, pgscan, pgsteal, throttle_usec, unaccounted, then the
 * same keys with a "_local" suffix (this tenant only, not its subtree;
 * unaccounted has no local form: it is always the tenant's own arena).
 * pages/stock are in bytes (pages * PageSize).  The figures are as of the
 * last flush: call manager_stats_refresh(m, t, false) first (once for many
 * tenants of one subtree).  Main thread.  0 or -ENOMEM.
 */
int manager_tenant_stat(struct manager *m, struct tenant *t, struct mb_stat_kv **ret, size_t *ret_n);

/* Bytes backing @t's arena beyond what is charged, as of the last audit
 * (daemon/audit.c), 0 when none or when the tenant has no arena.  Main
 * thread. */
uint64_t manager_tenant_unaccounted(struct manager *m, struct tenant *t);

/* Life cycle (main.c).  manager_new() sets defaults; the caller fills
 * config_dir, socket_path (NULL: from the configuration), state_dir,
 * bus_kind and bus_address (strdup'ed), then manager_start() loads the
 * configuration ("file:line: ..." in *ret_error on a bad file), listens,
 * starts the workers and the bus.  manager_run() runs the main loop until
 * SIGINT/SIGTERM. */
int manager_new(struct manager **ret);
int manager_start(struct manager *m, char **ret_error);
int manager_run(struct manager *m);
void manager_free(struct manager *m);

/* Log the tenant tree with usage, limits, events and stats (SIGUSR1).
 * Main thread. */
void manager_log_state(struct manager *m);
