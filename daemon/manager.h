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

#include "config.h"
#include "tenant.h"

struct event_base;
struct event;
struct evconnlistener;
struct worker;
struct bus_state;

enum manager_bus_kind {
        MANAGER_BUS_NONE = 0, /* --no-bus: tests of the broker alone */
        MANAGER_BUS_SYSTEM,
        MANAGER_BUS_USER,
        MANAGER_BUS_ADDRESS,
};

struct manager {
        struct event_base *base;
        struct mb_config *config;
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
        struct event *event_wakeup; /* worker -> main: tenant events queued */

        enum manager_bus_kind bus_kind;
        char *bus_address;
        struct bus_state *bus; /* daemon/bus.c */
};

/* Limits as the bus and the configuration express them (bytes, UINT64_MAX =
 * "max"); a field left at MB_LIMIT_UNSET is not changed. */
#define MB_LIMIT_UNSET (UINT64_MAX - 1)
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
/* Reclaim(path, bytes) -> bytes reclaimed (issue 6; until then 0).  The
 * callback runs on the main thread when reclaim completes. */
typedef void (*manager_reclaim_cb)(struct manager *m, uint64_t reclaimed_bytes, void *userdata);
int manager_reclaim(struct manager *m, struct tenant *t, uint64_t bytes, manager_reclaim_cb cb, void *userdata);
/* Reload(): re-read the configuration; on error *ret_error = "file:line: ..." */
int manager_reload(struct manager *m, char **ret_error);

/* Called by workers when a tenant event counter moved; delivered on the main
 * thread to bus_emit_memory_event() (daemon/bus.h). Thread-safe. */
void manager_queue_event(struct manager *m, struct tenant *t, enum mb_event event);

unsigned manager_nclients(struct manager *m);
