/* SPDX-License-Identifier: MIT */
/*
 * ctl-bus.h - membrokerctl's side of the org.membroker1 API: connecting,
 * calling the Manager, and reading the broker's and the tenants'
 * properties, memory.stat and memory.events into plain structures.  Every
 * function logs its own failure (once, with the daemon's message).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-bus.h>

#define CTL_BUS_NAME "org.membroker1"
#define CTL_MANAGER_PATH "/org/membroker1"
#define CTL_MANAGER_IFACE "org.membroker1.Manager"
#define CTL_TENANT_IFACE "org.membroker1.Tenant"
/* memory.reclaim-like EAGAIN: not all of a reclaim or limit write could be
 * done. */
#define CTL_ERROR_AGAIN "org.membroker1.Error.Again"

/* The Manager's properties (GetAll). */
struct ctl_manager_info {
        char *version;
        uint64_t page_size, capacity, current, flushes, flushed_nodes;
        uint32_t charge_batch, ntenants, nclients;
};

struct ctl_kv {
        char *key;
        uint64_t value;
};

/* An a(st) as GetStat and GetEvents return it, in its order.  With
 * @shared_keys the keys belong to the ctl_tenant_set (DumpStatsCompact()
 * names them once for every tenant) and ctl_kvlist_done() leaves them. */
struct ctl_kvlist {
        struct ctl_kv *v;
        size_t n;
        bool shared_keys;
};

/* One tenant: its properties, and its stat and events once read. */
struct ctl_tenant {
        char *path;
        uint64_t current, peak, max, high, low, min, emin, elow;
        uint32_t charge_batch, nclients;
        /* memory.pressure ([0] some, [1] full): totals in microseconds,
         * avg10/avg60/avg300 in hundredths of a percent; all 0 from a
         * daemon without the Pressure* properties. */
        uint64_t pressure_total[2];
        uint32_t pressure_avg[2][3];
        struct ctl_kvlist stat;
        struct ctl_kvlist events;
        /* tree drawing */
        size_t parent;
        bool last_child;
};

/* Tenants in tree order (ctl_path_compare()). */
struct ctl_tenant_set {
        struct ctl_tenant *t;
        size_t n;
        char **keys; /* the shared keys of the tenants' kvlists, NULL-terminated */
};

/* Log a failed call of @what: the daemon's message when there is one.
 * Returns @r. */
int ctl_bus_log_error(const char *what, const sd_bus_error *error, int r);

/* "the system bus", "the user bus" or the --address given. */
const char *ctl_bus_description(void);

/* Connect to the bus ctl_arg names.  0 or a negative errno (logged). */
int ctl_bus_open(sd_bus **ret);

/* Call @member of the Manager with @types and the arguments after it;
 * sd_bus_call_method()'s contract.  Not logged. */
int ctl_bus_call_manager(sd_bus *bus, const char *member, sd_bus_error *error, sd_bus_message **reply,
                         const char *types, ...);

/* The Manager's properties into *@ret (release with
 * ctl_manager_info_done()).  0 or a negative errno (logged). */
int ctl_bus_get_manager_info(sd_bus *bus, struct ctl_manager_info *ret);
void ctl_manager_info_done(struct ctl_manager_info *mi);

void ctl_kvlist_done(struct ctl_kvlist *l);
/* The entry of @key in @l, or NULL. */
const struct ctl_kv *ctl_kvlist_find(const struct ctl_kvlist *l, const char *key);

void ctl_tenant_set_done(struct ctl_tenant_set *s);
/* The tenant of canonical @path in @s (binary search), or NULL. */
struct ctl_tenant *ctl_tenant_set_find(struct ctl_tenant_set *s, const char *path);

/* Every tenant with its properties, in tree order: one GetManagedObjects.
 * 0 or a negative errno (logged). */
int ctl_bus_get_tenants(sd_bus *bus, struct ctl_tenant_set *ret);

/* memory.stat of every tenant of @s: one DumpStats (tenants created since
 * the listing are left out).  0 or a negative errno (logged). */
int ctl_bus_get_all_stats(sd_bus *bus, struct ctl_tenant_set *s);

/*
 * Every tenant with its properties, memory.stat and memory.events, in tree
 * order: one DumpStatsCompact() (key names once, values as arrays of t).
 * Returns 0, -EOPNOTSUPP when the daemon has no such method (an older one;
 * not logged: the caller falls back to GetManagedObjects, DumpStats and
 * GetEvents), or another negative errno (logged).
 */
int ctl_bus_get_all_compact(sd_bus *bus, struct ctl_tenant_set *ret);

/* The a(st) that @member ("GetStat" or "GetEvents") returns for @path.
 * 0 or a negative errno (logged). */
int ctl_bus_get_kvlist(sd_bus *bus, const char *member, const char *path, struct ctl_kvlist *ret);

/* Resolve @path with the daemon (GetTenant: it normalises and says what is
 * wrong) into @t: the canonical path, and with @props the properties.
 * 0 or a negative errno (logged). */
int ctl_bus_get_one_tenant(sd_bus *bus, const char *path, bool props, struct ctl_tenant *t);

/* The object of tenant @path (GetTenant: the daemon normalises the path
 * and says what is wrong; the error is printed), its canonical path in
 * *@ret_path.  0 or a negative errno. */
int ctl_bus_tenant_object(sd_bus *bus, const char *path, char **ret_object, char **ret_path);
