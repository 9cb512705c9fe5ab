/* SPDX-License-Identifier: MIT */
/*
 * bus-manager.c - org.membroker1.Manager at /org/membroker1: broker-wide
 * properties and the path-taking methods (docs/design.md).
 *
 * Reads are open to every caller.  CreateTenant, RemoveTenant,
 * SetTenantLimits, RevertTenantLimits, Reclaim and ResetPeak need uid 0 or
 * a Delegate= above the tenant naming the caller (bus_verify_tenant());
 * Reload needs uid 0 (bus_verify_root()).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bus-internal.h"
#include "bus.h"
#include "delegate.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

/* ---- properties ---- */

static int property_get_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", PACKAGE_VERSION);
}

static int property_get_page_size(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "t", bus_page_size(userdata));
}

static int property_get_capacity(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        struct manager *m = userdata;
        uint64_t bytes;

        {
                BUS_TREE_RDLOCK(m);
                bytes = bus_limit_to_bytes(m, page_counter_get_max(&m->b.tree->root->memory));
        }
        return sd_bus_message_append(reply, "t", bytes);
}

static int property_get_memory_current(sd_bus *bus, const char *path, const char *interface,
                                       const char *property, sd_bus_message *reply, void *userdata,
                                       sd_bus_error *error) {
        struct manager *m = userdata;
        uint64_t bytes;

        {
                BUS_TREE_RDLOCK(m);
                bytes = bus_pages_to_bytes(m, page_counter_read(&m->b.tree->root->memory));
        }
        return sd_bus_message_append(reply, "t", bytes);
}

static int property_get_charge_batch(sd_bus *bus, const char *path, const char *interface,
                                     const char *property, sd_bus_message *reply, void *userdata,
                                     sd_bus_error *error) {
        struct manager *m = userdata;

        return sd_bus_message_append(reply, "u", (uint32_t) (m->b.config ? m->b.config->broker.charge_batch : 0));
}

static int property_get_ntenants(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        struct manager *m = userdata;
        unsigned n;

        {
                BUS_TREE_RDLOCK(m);
                n = m->b.tree->ntenants;
        }
        return sd_bus_message_append(reply, "u", (uint32_t) n);
}

static int property_get_nclients(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "u", (uint32_t) manager_nclients(userdata));
}

static int property_get_stats_flushes(sd_bus *bus, const char *path, const char *interface,
                                      const char *property, sd_bus_message *reply, void *userdata,
                                      sd_bus_error *error) {
        struct manager *m = userdata;
        uint64_t v;

        {
                BUS_STATS_LOCK(m);
                v = strcmp(property, "StatsFlushes") == 0 ? m->b.tree->rstat.flushes : m->b.tree->rstat.flushed_nodes;
        }
        return sd_bus_message_append(reply, "t", v);
}

/* ---- methods ---- */

static int list_one(struct tenant *t, void *userdata) {
        sd_bus_message *reply = userdata;
        _cleanup_(freep) char *object = NULL;
        int r;

        r = bus_tenant_object_path(t->path, &object);
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "(so)", t->path, object);
        /* tenant_walk() stops at a non-zero return. */
        return r < 0 ? r : 0;
}

static int method_list_tenants(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct manager *m = userdata;
        int r;

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(so)");
        if (r < 0)
                return r;
        {
                BUS_TREE_RDLOCK(m);
                r = tenant_walk(m->b.tree->root, list_one, reply);
        }
        if (r < 0)
                return r;
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* Read the leading path argument and resolve it. */
static int read_tenant(sd_bus_message *msg, struct manager *m, struct tenant **ret, sd_bus_error *error) {
        const char *path;
        int r;

        r = sd_bus_message_read(msg, "s", &path);
        if (r < 0)
                return r;
        return bus_tenant_lookup(m, path, ret, error);
}

static int method_get_tenant(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(freep) char *object = NULL;
        struct tenant *t;
        int r;

        r = read_tenant(msg, userdata, &t, error);
        if (r < 0)
                return r;
        r = bus_tenant_object_path(t->path, &object);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(msg, "o", object);
}

static int method_create_tenant(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        struct manager *m = userdata;
        _cleanup_(freep) char *norm = NULL, *object = NULL;
        struct mb_limits limits;
        struct tenant *t;
        const char *path;
        int r;

        r = sd_bus_message_read(msg, "s", &path);
        if (r < 0)
                return r;
        r = tenant_path_normalize(path, &norm);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || strcmp(norm, "/") == 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Invalid tenant path '%s': components of [A-Za-z0-9_.-] separated "
                                         "by '/', at most %d deep",
                                         path, TENANT_MAX_DEPTH);
        /* Creating a tenant is acting on it: its would-be parent must be
         * a delegated tenant or below one. */
        {
                BUS_TREE_RDLOCK(m);
                t = mb_delegate_anchor(m->b.tree, norm);
        }
        r = bus_verify_tenant(msg, m, t, false, norm, "Creating a tenant", error);
        if (r < 0)
                return r;
        r = bus_read_limits(msg, &limits, error);
        if (r < 0)
                return r;
        r = bus_check_limits(m, &limits, error);
        if (r < 0)
                return r;

        r = manager_tenant_create(m, norm, &limits, &t);
        if (r == -EBUSY)
                return sd_bus_error_setf(error, BUS_ERROR_BUSY,
                                         "Cannot create '%s': an ancestor has clients attached (clients attach "
                                         "to leaves only)",
                                         norm);
        if (r < 0)
                return bus_error_from_errno(error, r, "Cannot create tenant", norm);

        r = bus_tenant_object_path(t->path, &object);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(msg, "o", object);
}

static int method_remove_tenant(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        struct manager *m = userdata;
        _cleanup_(freep) char *path = NULL;
        unsigned nclients, nchildren;
        struct tenant *t;
        int r;

        r = read_tenant(msg, m, &t, error);
        if (r < 0)
                return r;
        r = bus_verify_tenant(msg, m, t, true, t->path, "Removing a tenant", error);
        if (r < 0)
                return r;
        if (!t->parent)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "The root tenant cannot be removed");
        {
                BUS_TREE_RDLOCK(m);
                nclients = atomic_load(&t->nclients);
                nchildren = t->nchildren;
        }
        if (nchildren > 0)
                return sd_bus_error_setf(error, BUS_ERROR_BUSY, "Tenant '%s' has %u child tenant%s; remove them first",
                                         t->path, nchildren, nchildren == 1 ? "" : "s");
        if (nclients > 0)
                return sd_bus_error_setf(error, BUS_ERROR_BUSY, "Tenant '%s' has %u client%s attached", t->path,
                                         nclients, nclients == 1 ? "" : "s");

        path = strdup(t->path);
        if (!path)
                return -ENOMEM;
        r = manager_tenant_remove(m, t);
        if (r == -EBUSY)
                return sd_bus_error_setf(error, BUS_ERROR_BUSY, "Tenant '%s' has clients or children", path);
        if (r < 0)
                return bus_error_from_errno(error, r, "Cannot remove tenant", path);
        return sd_bus_reply_method_return(msg, NULL);
}

/* Manager methods that name a tenant first: resolve it, then do what the
 * tenant object's method does (bus-tenant.c). */
#define DEFINE_TENANT_METHOD(name, impl)                                                           \
        static int method_##name(sd_bus_message *msg, void *userdata, sd_bus_error *error) {     \
                struct tenant *t;                                                                \
                int r = read_tenant(msg, userdata, &t, error);                                  \
                                                                                                 \
                return r < 0 ? r : bus_tenant_method_##impl(msg, userdata, t, error);           \
        }

DEFINE_TENANT_METHOD(set_tenant_limits, set_limits)
DEFINE_TENANT_METHOD(get_stat, get_stat)
DEFINE_TENANT_METHOD(get_stat_text, get_stat_text)
DEFINE_TENANT_METHOD(get_events, get_events)
DEFINE_TENANT_METHOD(get_pressure, get_pressure)
DEFINE_TENANT_METHOD(get_pressure_text, get_pressure_text)

static int method_add_pressure_trigger(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return bus_manager_method_add_pressure_trigger(msg, userdata, error);
}

static int method_remove_pressure_trigger(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return bus_manager_method_remove_pressure_trigger(msg, userdata, error);
}
DEFINE_TENANT_METHOD(reclaim, reclaim)
DEFINE_TENANT_METHOD(reset_peak, reset_peak)
DEFINE_TENANT_METHOD(revert_tenant_limits, revert_limits)

/* The reply to Reload(), once the files were read (off the main loop) and
 * applied. */
static void reload_done(struct manager *m, int r, const char *reason, void *userdata) {
        sd_bus_message *msg = userdata;

        if (r < 0)
                (void) sd_bus_reply_method_errorf(msg, BUS_ERROR_BAD_CONFIG,
                                                  "Reload failed, the running configuration is kept: %s",
                                                  reason ? reason : strerror(-r));
        else
                (void) sd_bus_reply_method_return(msg, NULL);
        sd_bus_message_unref(msg);
}

static int method_reload(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        int r;

        r = bus_verify_root(msg, "Reload", error);
        if (r < 0)
                return r;
        r = manager_reload_async(userdata, reload_done, sd_bus_message_ref(msg));
        if (r < 0) {
                sd_bus_message_unref(msg);
                return r;
        }
        return 1; /* answered by reload_done() */
}

const sd_bus_vtable bus_manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", property_get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("PageSize", "t", property_get_page_size, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Capacity", "t", property_get_capacity, 0, 0),
        SD_BUS_PROPERTY("MemoryCurrent", "t", property_get_memory_current, 0, 0),
        SD_BUS_PROPERTY("ChargeBatch", "u", property_get_charge_batch, 0, 0),
        SD_BUS_PROPERTY("NTenants", "u", property_get_ntenants, 0, 0),
        SD_BUS_PROPERTY("NClients", "u", property_get_nclients, 0, 0),
        SD_BUS_PROPERTY("StatsFlushes", "t", property_get_stats_flushes, 0, 0),
        SD_BUS_PROPERTY("StatsFlushedNodes", "t", property_get_stats_flushes, 0, 0),
        SD_BUS_METHOD_WITH_ARGS("ListTenants", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(so)", tenants),
                                method_list_tenants, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetTenant", SD_BUS_ARGS("s", path), SD_BUS_RESULT("o", object), method_get_tenant,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("CreateTenant", SD_BUS_ARGS("s", path, "a{sv}", settings),
                                SD_BUS_RESULT("o", object), method_create_tenant, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RemoveTenant", SD_BUS_ARGS("s", path), SD_BUS_NO_RESULT, method_remove_tenant,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetTenantLimits", SD_BUS_ARGS("s", path, "a{sv}", limits, "b", runtime),
                                SD_BUS_NO_RESULT, method_set_tenant_limits, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RevertTenantLimits", SD_BUS_ARGS("s", path, "as", keys, "b", runtime),
                                SD_BUS_NO_RESULT, method_revert_tenant_limits, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetStat", SD_BUS_ARGS("s", path), SD_BUS_RESULT("a(st)", stat), method_get_stat,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetStatText", SD_BUS_ARGS("s", path), SD_BUS_RESULT("s", text),
                                method_get_stat_text, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetEvents", SD_BUS_ARGS("s", path), SD_BUS_RESULT("a(st)", events),
                                method_get_events, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetPressure", SD_BUS_ARGS("s", path), SD_BUS_RESULT("a(sdddt)", pressure),
                                method_get_pressure, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetPressureText", SD_BUS_ARGS("s", path), SD_BUS_RESULT("s", text),
                                method_get_pressure_text, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("AddPressureTrigger", SD_BUS_ARGS("s", path, "s", trigger), SD_BUS_RESULT("t", id),
                                method_add_pressure_trigger, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RemovePressureTrigger", SD_BUS_ARGS("t", id), SD_BUS_NO_RESULT,
                                method_remove_pressure_trigger, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("PressureTriggered", SD_BUS_ARGS("t", id, "s", path, "s", trigger), 0),
        SD_BUS_METHOD_WITH_ARGS("DumpStats", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(sa(st))", stats),
                                bus_manager_method_dump_stats, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("DumpStatsCompact", SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("as", properties, "as", stat_keys, "as", event_keys, "a(satatat)",
                                              tenants),
                                bus_manager_method_dump_stats_compact, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Reclaim", SD_BUS_ARGS("s", path, "t", bytes), SD_BUS_RESULT("t", reclaimed),
                                method_reclaim, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ResetPeak", SD_BUS_ARGS("s", path), SD_BUS_NO_RESULT, method_reset_peak,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Reload", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_reload,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};
