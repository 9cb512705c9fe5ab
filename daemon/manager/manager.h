/* SPDX-License-Identifier: MIT */
/*
 * manager.h - the daemon's top-level object (systemd-oomd's Manager).
 *
 * Owns the configuration, the tenant tree, the listening socket and the
 * worker threads.  The main thread runs `base`; workers each run their own
 * event base and serve client connections.  The layer above (the D-Bus
 * adapter, daemon/bus/bus.c) calls down into the manager and hears from it only
 * through the observer it registers (struct manager_observer_ops): the
 * manager includes no header of that layer.
 *
 * The tree, its locks (tree_lock, stats_lock) and what else the modules
 * below the manager share live in the embedded struct broker
 * (daemon/service/broker.h, m->b), which is all those modules see: they reach the
 * manager through the hooks of struct broker_ops set by manager_new().
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "broker.h"
#include "core/config.h" /* not the autoconf config.h */
#include "state.h"           /* struct mb_limits */
#include "reclaim.h" /* reclaim_limits_cb */
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
struct audit;
struct rightsizer;
struct manager_observer_ops;

enum manager_bus_kind {
        MANAGER_BUS_NONE = 0, /* --no-bus: tests of the broker alone */
        MANAGER_BUS_SYSTEM,
        MANAGER_BUS_USER,
        MANAGER_BUS_ADDRESS,
};

struct manager {
        /* What the modules below share: the tree and its locks, the
         * configuration, the workers, the client counters (daemon/service/broker.h). */
        struct broker b;

        /* How it was started (main.c), fixed for the daemon's life. */
        char *config_dir;
        char *socket_path;
        char *state_dir;
        char *pressure_path;       /* --pressure-file */
        char *pressure_trigger;    /* --pressure-trigger */
        char *dump_path;           /* --dump-file: where SIGUSR1 also writes the state dump */
        enum manager_bus_kind bus_kind;
        char *bus_address;
        unsigned ncpus;

        /* The main loop and its event sources (main thread). */
        struct event_base *base;
        struct evconnlistener *listener;
        bool listening;
        unsigned next_worker;      /* accepted sockets go round robin */
        unsigned accepted_this_turn; /* the listener yields a loop turn after ACCEPT_BATCH */
        struct event *sigint, *sigterm, *sighup;
        struct event *sigusr1;     /* log the tenant tree (for admins, tests) */
        uint64_t state_dumps;
        struct {
                uint64_t ok, failed; /* reloads since the start (the state dump) */
                char *last_error;    /* why the last failed reload failed, or NULL */
        } reloads;
        struct event *flush_timer; /* the periodic rstat flush */
        struct event *watchdog;    /* WATCHDOG=1 timer, NULL without a watchdog */
        unsigned status_tenants, status_clients; /* last STATUS= sent */

        /* Cross-thread hand-offs to the main thread (daemon/base/mailbox.h). */
        struct mailbox *event_box; /* worker -> main: tenant memory events */
        struct mailbox *drain_box; /* worker -> main: the last client of some tenant left */
        _Atomic bool drain_queued; /* a message is in drain_box, not handled yet */

        /* The modules the manager owns, below it. */
        struct client_events *client_events; /* events told to clients */
        struct pressure *pressure; /* PSI trigger, with PressureReclaim=yes */
        int pressure_error;        /* why it could not be watched (negative errno), or 0 */
        struct audit *audit;       /* the arena audit, 10 times a second */
        struct rightsizer *rightsizer; /* MemoryPressureTarget= */
        struct state *state;       /* limits layered over the files */
        struct restart *restart;   /* the fd-store restart */

        /* Configuration changes (daemon/manager/manager-reload.c). */
        struct manager_reload *reload; /* the files read off the main thread */
        _Atomic unsigned ndraining;    /* tenants marked draining */

        /* The layer above, told of changes (manager_set_observer()): the
         * bus adapter (daemon/bus/bus.c), whose state is opaque here. */
        const struct manager_observer_ops *observer;
        void *observer_userdata;
        struct bus_state *bus;
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
 * (written to STATE_DIR/limits.conf) of daemon/service/state.h.  A failure to
 * write is returned (the change stays applied until the next reload). */
int manager_tenant_set_limits_layer(struct manager *m, struct tenant *t, const struct mb_limits *limits,
                                    bool runtime);
/**
 * manager_tenant_limits_wait - after a limit write to @t: when its usage is
 * above its max or high, the reclaim of the excess (started by the write)
 * calls @cb on the main thread when it ends, after this returns; returns
 * 0.  Returns 1 (and @cb is not called) when the usage fits already,
 * -ENOMEM.  Main thread.
 */
int manager_tenant_limits_wait(struct manager *m, struct tenant *t, reclaim_limits_cb cb, void *userdata);
/* Reclaim(path, bytes) -> bytes reclaimed, never more than asked
 * (memory_reclaim(): @t's own protection does not shield it, its
 * descendants' does; see daemon/reclaim/reclaim.h).  The callback runs on the main
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
 * left, deepest first (the observer hears of each).  Main thread. */
void manager_drain(struct manager *m);

/* The manager that embeds @b. */
static inline struct manager *manager_of_broker(struct broker *b) {
        return (struct manager *) ((char *) b - offsetof(struct manager, b));
}

/* The hooks of m->b (daemon/manager/manager-broker.c). */
extern const struct broker_ops manager_broker_ops;
/* The charge batch a client of @t attaching now is told
 * (tenant_effective_charge_batch() with the broker's ChargeBatch=).  Any
 * thread, no lock. */
unsigned manager_tenant_charge_batch(struct manager *m, const struct tenant *t);

/* Internals shared with daemon/manager/manager-reload.c (main thread, tree lock
 * held for writing): a tenant's state; remove a leaf without clients or
 * pages (-EBUSY, -EPERM for the root). */
struct tenant_state *manager_tenant_state_new(struct tenant *t);
int manager_tenant_remove_locked(struct manager *m, struct tenant *t);

/**
 * struct manager_observer_ops - what the manager reports to the layer above
 * it (the D-Bus adapter), which registers these at start-up with
 * manager_set_observer().  The manager thus names no module above it, the
 * way kernel/cgroup/rstat.c reaches the memory controller only through
 * css_rstat_flush.  Every call is made on the main thread, with no lock of
 * the manager held; @userdata is the registration's.  A member may be NULL.
 */
struct manager_observer_ops {
        /* @t was made at run time (CreateTenant, a restart), called for each
         * ancestor made with it first. */
        void (*tenant_added)(void *userdata, struct tenant *t);
        /* The tenant at @tenant_path is gone (RemoveTenant, a reload, the
         * end of a drain); it no longer exists in the tree. */
        void (*tenant_removed)(void *userdata, const char *tenant_path);
        /* @t's max, high, low, min or charge batch may have changed. */
        void (*limits_changed)(void *userdata, struct tenant *t);
        /* A memory event counter of the tenant at @tenant_path moved to
         * @count (hierarchical, memory.events); the tenant may be gone. */
        void (*memory_event)(void *userdata, const char *tenant_path, enum mb_event event, uint64_t count);
        /* The manager stops: nothing is reported after this.  Called once,
         * from manager_free(), once no reclaim or client remains and before
         * the event base goes; the observer releases what it holds. */
        void (*stop)(void *userdata);
        /* The state dump (SIGUSR1) is being written: append the observer's
         * own "state: ..." lines to @f. */
        void (*dump)(void *userdata, FILE *f);
};

/* Register @ops (static storage) with @userdata as the manager's observer,
 * replacing any (NULL: none).  Main thread, after manager_start(). */
void manager_set_observer(struct manager *m, const struct manager_observer_ops *ops, void *userdata);

/* Observer reports shared with daemon/manager/manager-reload.c.  Main thread. */
void manager_report_tenant_removed(struct manager *m, const char *tenant_path);
void manager_report_limits_changed(struct manager *m, struct tenant *t);

/* Called by workers when a tenant event counter moved; delivered on the main
 * thread to the observer's memory_event() and to the clients that asked for
 * events. Thread-safe. */
void manager_queue_event(struct manager *m, struct tenant *t, enum mb_event event);

unsigned manager_nclients(struct manager *m);

/* ---- Added by the broker work ---- */

/* One line of a tenant's memory.stat-like report (docs/design.md). */
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

/* The number of pairs manager_tenant_stat() reports: 12 keys, their 12
 * _local forms and unaccounted. */
#define MANAGER_STAT_NKEYS 27

/**
 * manager_tenant_stat_fill - manager_tenant_stat() into @kv, the caller's
 * array of MANAGER_STAT_NKEYS pairs, without allocating (DumpStats reads
 * every tenant this way).  Same order, same freshness rule, main thread.
 * Returns the number of pairs written (MANAGER_STAT_NKEYS).
 */
size_t manager_tenant_stat_fill(struct manager *m, struct tenant *t, struct mb_stat_kv kv[MANAGER_STAT_NKEYS]);

/* Life cycle (main.c).  manager_new() sets defaults; the caller fills
 * config_dir, socket_path (NULL: from the configuration), state_dir,
 * bus_kind and bus_address (strdup'ed), then manager_start() loads the
 * configuration ("file:line: ..." in *ret_error on a bad file), listens and
 * starts the workers; the caller then starts the bus (bus_setup(), which
 * registers the observer).  manager_run() runs the main loop until
 * SIGINT/SIGTERM.  All on the thread that called manager_new(). */
int manager_new(struct manager **ret);
int manager_start(struct manager *m, char **ret_error);
int manager_run(struct manager *m);
void manager_free(struct manager *m);

/* Log the tenant tree with usage, limits, events and stats (SIGUSR1).
 * Main thread. */
void manager_log_state(struct manager *m);
