/* SPDX-License-Identifier: MIT */
/*
 * bus-internal.h - what the modules of membrokerd's D-Bus API share
 * (daemon/bus/bus.c, bus-manager.c, bus-tenant.c, bus-stat.c).  Not used
 * outside daemon/bus*.c.
 *
 * Threading: everything here runs on the manager's main thread, the only
 * thread that touches the sd_bus connection.
 *
 * Object paths: the Manager is /org/membroker1; tenant "db/cache" is
 * /org/membroker1/tenant/db_2fcache, i.e. sd_bus_path_encode() of the tenant
 * path under BUS_TENANT_PREFIX.  The root tenant, whose path is "/", is
 * /org/membroker1/tenant/_2f by the same rule.
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>
#include <systemd/sd-bus.h>

#include "macros.h"

#include "log.h"
#include "manager.h"

#define BUS_NAME "org.membroker1"
#define BUS_MANAGER_PATH "/org/membroker1"
#define BUS_TENANT_PREFIX "/org/membroker1/tenant"
#define BUS_MANAGER_INTERFACE "org.membroker1.Manager"
#define BUS_TENANT_INTERFACE "org.membroker1.Tenant"

/* Typed errors of the API (besides org.freedesktop.DBus.Error.*). */
#define BUS_ERROR_NO_SUCH_TENANT "org.membroker1.Error.NoSuchTenant"
#define BUS_ERROR_TENANT_EXISTS "org.membroker1.Error.TenantExists"
#define BUS_ERROR_BUSY "org.membroker1.Error.Busy"
#define BUS_ERROR_BAD_CONFIG "org.membroker1.Error.BadConfig"
/* Not all of it could be done, as EAGAIN from memory.reclaim. */
#define BUS_ERROR_AGAIN "org.membroker1.Error.Again"

struct event;

struct bus_state {
        struct manager *manager;
        sd_bus *bus;
        struct event *io;    /* the bus fd, events from sd_bus_get_events() */
        struct event *timer; /* sd_bus_get_timeout() */
        short io_events;     /* EV_READ/EV_WRITE currently armed */
        bool io_added;
        struct event *retry; /* reconnection after the connection was lost */
        uint64_t retry_usec; /* the next interval (doubles) */
        unsigned retries;    /* failed attempts since the loss */
        uint64_t losses;     /* connections lost since the start (the state dump) */
        uint64_t reconnects; /* and made again */

        /* The bus callers' pressure triggers (bus-pressure.c). */
        struct bus_pressure_trigger *pressure_triggers;
        unsigned npressure_triggers;
        uint64_t pressure_last_id; /* ids are never reused */
};

/* Re-arm the libevent events after messages were queued outside
 * sd_bus_process() (signals, asynchronous replies). */
void bus_kick(struct manager *m);

/* Close the connection (flushing queued messages) and unhook it from the
 * loop.  Safe without a bus and twice.  (The observer's stop().) */
void bus_free(struct manager *m);

/* Signals (bus.c); main thread only.  No-ops without a bus.  The manager
 * reaches the first four through its observer (manager_observer_ops). */

/* MemoryEvent(event, count) on the tenant's object. */
void bus_emit_memory_event(struct manager *m, const char *tenant_path, enum mb_event event, uint64_t count);
/* PropertiesChanged for MemoryMax/High/Low/Min and ChargeBatch of @t. */
void bus_emit_limits_changed(struct manager *m, struct tenant *t);
/* InterfacesAdded / InterfacesRemoved through the object manager. */
void bus_emit_tenant_added(struct manager *m, struct tenant *t);
void bus_emit_tenant_removed(struct manager *m, const char *tenant_path);
/* PropertiesChanged(ChargeBatch) for the descendants of @t that inherit
 * their ChargeBatch from it (not for @t itself).  Takes the tree lock for
 * reading. */
void bus_emit_charge_batch_changed(struct manager *m, struct tenant *t);

/* ---- tenants (bus-tenant.c) ---- */

/* The object path of @tenant_path ("/" or "a/b").  -ENOMEM. */
int bus_tenant_object_path(const char *tenant_path, char **ret);

/**
 * bus_tenant_lookup - resolve a tenant path given by a caller.  Sets @error
 * (InvalidArgs for a malformed path, NoSuchTenant for an unknown one) and
 * returns a negative errno on failure.  Takes m->b.tree_lock for reading.
 */
int bus_tenant_lookup(struct manager *m, const char *path, struct tenant **ret, sd_bus_error *error);

/* The tenant an object path of ours names, or NULL. */
struct tenant *bus_tenant_from_object_path(struct manager *m, const char *object_path);

/* Shared by Manager.X(path, ...) and Tenant.X(...): the message is positioned
 * after the path argument (if any).  Return as sd-bus method handlers do. */
int bus_tenant_method_get_stat(sd_bus_message *msg, struct manager *m, struct tenant *t, sd_bus_error *error);
int bus_tenant_method_get_stat_text(sd_bus_message *msg, struct manager *m, struct tenant *t,
                                    sd_bus_error *error);
int bus_tenant_method_get_events(sd_bus_message *msg, struct manager *m, struct tenant *t,
                                 sd_bus_error *error);
int bus_tenant_method_set_limits(sd_bus_message *msg, struct manager *m, struct tenant *t, sd_bus_error *error);
int bus_tenant_method_reclaim(sd_bus_message *msg, struct manager *m, struct tenant *t, sd_bus_error *error);
/* ResetPeak(): MemoryPeak starts over from the current usage (a write to
 * memory.peak; page_counter_reset_watermark()).  uid 0 or a delegate
 * (bus_verify_tenant()). */
int bus_tenant_method_reset_peak(sd_bus_message *msg, struct manager *m, struct tenant *t, sd_bus_error *error);
int bus_tenant_method_revert_limits(sd_bus_message *msg, struct manager *m, struct tenant *t,
                                    sd_bus_error *error);

/**
 * bus_check_limits - refuse, with InvalidArgs naming the key, the accepted
 * range and the figures in bytes, a limit of @l (from bus_read_limits())
 * that the tree cannot take: more pages than a page counter holds, a
 * ChargeBatch outside 1..MB_CHARGE_MAX_PAGES.  0 or a negative errno.
 */
int bus_check_limits(struct manager *m, const struct mb_limits *l, sd_bus_error *error);

/**
 * bus_read_limits - read an a{sv} of MemoryMax/MemoryHigh/MemoryLow/
 * MemoryMin (t, bytes, UINT64_MAX = "max") and ChargeBatch (t, pages) into
 * @ret (unset fields MB_LIMIT_UNSET).  InvalidArgs on an unknown or repeated
 * key, a wrong type or MB_LIMIT_UNSET; the ranges are bus_check_limits()'s.
 */
int bus_read_limits(sd_bus_message *msg, struct mb_limits *ret, sd_bus_error *error);

/* Map a negative errno from a manager_tenant_*() call to a typed error. */
int bus_error_from_errno(sd_bus_error *error, int r, const char *what, const char *tenant_path);

/**
 * bus_verify_root - Authorization of a changing call: the sender's effective
 * uid, read from the bus (sd_bus_query_sender_creds()), must be 0.  Returns 1
 * when allowed, else a negative errno with @error set to AccessDenied naming
 * @action and the caller's uid.
 */
int bus_verify_root(sd_bus_message *msg, const char *action, sd_bus_error *error);

/* ---- memory.pressure (bus-pressure.c) ---- */

/* GetPressure(): a(sdddt), one (kind, avg10, avg60, avg300, total_usec) for
 * "some" and "full", averages in percent; GetPressureText(): s, the text
 * of memory.pressure in the kernel's layout.  Main thread; @t valid. */
int bus_tenant_method_get_pressure(sd_bus_message *msg, struct manager *m, struct tenant *t, sd_bus_error *error);
int bus_tenant_method_get_pressure_text(sd_bus_message *msg, struct manager *m, struct tenant *t,
                                        sd_bus_error *error);
/**
 * bus_manager_method_add_pressure_trigger - AddPressureTrigger(s path,
 * s trigger) -> t id: the kernel's psi_trigger ("some|full THRESHOLD_USEC
 * WINDOW_USEC") on the tenant, owned by the caller, who receives
 * PressureTriggered(id, path, trigger) while it stays on the bus.
 * InvalidArgs for a bad trigger or path, NoSuchTenant, LimitsExceeded.
 */
int bus_manager_method_add_pressure_trigger(sd_bus_message *msg, struct manager *m, sd_bus_error *error);
/* RemovePressureTrigger(t id): only the caller's own. */
int bus_manager_method_remove_pressure_trigger(sd_bus_message *msg, struct manager *m, sd_bus_error *error);
/* The Pressure{Some,Full}{TotalUSec,Avg10,Avg60,Avg300} properties of a
 * Tenant: totals in microseconds (t), averages in hundredths of a percent
 * (u). */
int bus_tenant_property_get_pressure(sd_bus *bus, const char *path, const char *interface, const char *property,
                                     sd_bus_message *reply, void *userdata, sd_bus_error *error);
/* @property's kind and figure (0: the total; 10, 60, 300: an average);
 * -EINVAL for a name that is not one of them. */
int bus_pressure_property_parse(const char *property, enum psi_kind *ret_kind, unsigned *ret_which);
/* The figure @which (as above) of @r. */
uint64_t bus_pressure_figure(const struct psi_reading *r, unsigned which);
/* Drop every trigger (the bus connection is lost or closed). */
void bus_pressure_triggers_free(struct manager *m);
/**
 * bus_verify_tenant - Authorization of a call that changes a tenant: uid 0,
 * or a caller that a Delegate= on a STRICT ancestor names, by its uid or
 * one of the supplementary groups the bus reported (mb_delegate_check()).
 * @t is the tenant acted on when @t_is_target, else the deepest existing
 * ancestor of the tenant @target_path that is to be created.  Takes
 * m->b.tree_lock for reading.  Returns 1 when allowed, else a negative errno
 * with @error set to AccessDenied naming @action, @target_path and the rule.
 */
int bus_verify_tenant(sd_bus_message *msg, struct manager *m, struct tenant *t, bool t_is_target,
                      const char *target_path, const char *action, sd_bus_error *error);

extern const sd_bus_vtable bus_tenant_vtable[];
int bus_tenant_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **ret_found,
                    sd_bus_error *error);
int bus_tenant_enumerate(sd_bus *bus, const char *prefix, void *userdata, char ***ret_nodes,
                         sd_bus_error *error);

/* ---- the Manager object (bus-manager.c) ---- */
extern const sd_bus_vtable bus_manager_vtable[];

/* ---- statistics (bus-stat.c) ---- */

/* One tenant's memory.stat-style figures, in the order GetStat returns
 * (manager_tenant_stat()'s list).  Release with bus_stat_done(). */
struct bus_stat {
        struct mb_stat_kv *e;
        size_t n;
};
void bus_stat_done(struct bus_stat *s);

/**
 * bus_stat_collect - refresh @t's subtree (manager_stats_refresh(), which
 * flushes only when enough updates are pending) unless @refreshed, then read
 * its figures (manager_tenant_stat(), under m->b.stats_lock).  0 or -ENOMEM.
 */
int bus_stat_collect(struct manager *m, struct tenant *t, bool refreshed, struct bus_stat *ret);

/* memory.events and memory.events.local of @t: "low" ... "overrun", then
 * "low.local" ... "overrun.local". */
#define BUS_EVENTS_MAX (2 * _MB_EVENT_NR)
struct bus_events {
        size_t n;
        struct {
                const char *key;
                uint64_t value;
        } e[BUS_EVENTS_MAX];
};
void bus_events_collect(struct tenant *t, struct bus_events *ret);

/*
 * Manager.DumpStats() -> a(sa(st)): every tenant's memory.stat, the pairs of
 * GetStat; and Manager.DumpStatsCompact() -> (as properties, as stat_keys,
 * as event_keys, a(satatat) tenants): the names once, then per tenant its
 * path and three arrays of values in the order of those names (the
 * properties as numbers, memory.stat, memory.events).  One refresh of the
 * whole tree, then every tenant read as is (bus-dump.c).
 */
int bus_manager_method_dump_stats(sd_bus_message *msg, void *userdata, sd_bus_error *error);
int bus_manager_method_dump_stats_compact(sd_bus_message *msg, void *userdata, sd_bus_error *error);

/* Append @s as a(st) to @reply. */
int bus_stat_append(sd_bus_message *reply, const struct bus_stat *s);

/* Page size in bytes, and pages -> bytes with PAGE_COUNTER_MAX (no limit)
 * mapped to UINT64_MAX. */
uint64_t bus_page_size(struct manager *m);
uint64_t bus_pages_to_bytes(struct manager *m, unsigned long pages);
uint64_t bus_limit_to_bytes(struct manager *m, unsigned long pages);

/* Effective memory.min / memory.low of @t relative to the root, computed
 * without writing the counters (the reclaim code keeps its own). */
void bus_effective_protection(struct manager *m, struct tenant *t, uint64_t *ret_emin_bytes,
                              uint64_t *ret_elow_bytes);

/* Cleanup helpers for the locks (pthread_* return 0; errors are bugs). */
void bus_tree_unlockp(struct manager **m);
void bus_stats_unlockp(struct manager **m);
#define BUS_TREE_RDLOCK(m) \
        _cleanup_(bus_tree_unlockp) _unused_ struct manager *_tree_locked_ = (pthread_rwlock_rdlock(&(m)->b.tree_lock), (m))
#define BUS_STATS_LOCK(m) \
        _cleanup_(bus_stats_unlockp) _unused_ struct manager *_stats_locked_ = (pthread_mutex_lock(&(m)->b.stats_lock), (m))
