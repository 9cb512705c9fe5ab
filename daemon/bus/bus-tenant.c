/* SPDX-License-Identifier: MIT */
/*
 * bus-tenant.c - org.membroker1.Tenant: one object per tenant under
 * /org/membroker1/tenant/, served by a single fallback vtable plus a node
 * enumerator (nothing is registered per tenant), and the tenant operations
 * the Manager's path-taking methods share.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus-internal.h"
#include "bus.h"
#include "manager-service.h"
#include "rightsizer.h"

/* ---- names ---- */

int bus_tenant_object_path(const char *tenant_path, char **ret) {
        return sd_bus_path_encode(BUS_TENANT_PREFIX, tenant_path, ret);
}

int bus_tenant_lookup(struct manager *m, const char *path, struct tenant **ret, sd_bus_error *error) {
        _cleanup_(freep) char *norm = NULL;
        struct tenant *t;
        int r;

        r = tenant_path_normalize(path, &norm);
        if (r == -ENOMEM)
                return -ENOMEM;
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Invalid tenant path '%s': components of [A-Za-z0-9_.-] separated "
                                         "by '/', at most %d deep; the root is '/'",
                                         path, TENANT_MAX_DEPTH);
        {
                BUS_TREE_RDLOCK(m);
                t = tenant_lookup(m->b.tree, norm);
        }
        if (!t)
                return sd_bus_error_setf(error, BUS_ERROR_NO_SUCH_TENANT, "No tenant '%s'", norm);
        *ret = t;
        return 0;
}

struct tenant *bus_tenant_from_object_path(struct manager *m, const char *object_path) {
        _cleanup_(freep) char *external = NULL;
        struct tenant *t;

        if (!object_path || sd_bus_path_decode(object_path, BUS_TENANT_PREFIX, &external) <= 0)
                return NULL;
        BUS_TREE_RDLOCK(m);
        t = tenant_lookup(m->b.tree, external);
        /* Only the canonical spelling names an object. */
        if (t && strcmp(t->path, external) != 0)
                t = NULL;
        return t;
}

int bus_tenant_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **ret_found,
                    sd_bus_error *error) {
        struct manager *m = userdata;

        (void) bus;
        (void) interface;
        (void) error;
        if (!bus_tenant_from_object_path(m, path))
                return 0;
        /* Handlers find the tenant again from the object path: a tenant
         * pointer must not outlive the lookup's lock. */
        *ret_found = m;
        return 1;
}

struct enum_ctx {
        char **nodes;
        size_t n;
};

static int enum_one(struct tenant *t, void *userdata) {
        struct enum_ctx *c = userdata;

        if (bus_tenant_object_path(t->path, &c->nodes[c->n]) < 0)
                return -ENOMEM;
        c->n++;
        return 0;
}

/* True when @path is BUS_TENANT_PREFIX or one of its ancestors. */
static bool path_covers_tenants(const char *path) {
        size_t n = strlen(path);

        if (strcmp(path, "/") == 0)
                return true;
        return strncmp(BUS_TENANT_PREFIX, path, n) == 0 &&
               (BUS_TENANT_PREFIX[n] == '\0' || BUS_TENANT_PREFIX[n] == '/');
}

int bus_tenant_enumerate(sd_bus *bus, const char *prefix, void *userdata, char ***ret_nodes,
                         sd_bus_error *error) {
        struct manager *m = userdata;
        struct enum_ctx c = {};
        int r;

        (void) bus;
        (void) error;
        /* sd-bus asks with the path being introspected.  Tenant objects are
         * leaves of the object tree (the encoded path has no '/'), so only a
         * path at or above the prefix has them below it: answering the
         * others with nothing keeps `busctl tree` (one Introspect per
         * object) linear in the number of tenants. */
        if (!path_covers_tenants(prefix)) {
                *ret_nodes = NULL;
                return 0;
        }
        BUS_TREE_RDLOCK(m);
        c.nodes = calloc((size_t) m->b.tree->ntenants + 1, sizeof(char *));
        if (!c.nodes)
                return -ENOMEM;
        r = tenant_walk(m->b.tree->root, enum_one, &c);
        if (r < 0) {
                for (size_t i = 0; i < c.n; i++)
                        free(c.nodes[i]);
                free(c.nodes);
                return r;
        }
        *ret_nodes = c.nodes;
        return 1;
}

/* ---- errors and arguments ---- */

int bus_error_from_errno(sd_bus_error *error, int r, const char *what, const char *tenant_path) {
        switch (r) {
        case -ENOENT:
                return sd_bus_error_setf(error, BUS_ERROR_NO_SUCH_TENANT, "%s: no tenant '%s'", what, tenant_path);
        case -EEXIST:
                return sd_bus_error_setf(error, BUS_ERROR_TENANT_EXISTS, "%s: tenant '%s' exists already", what,
                                         tenant_path);
        case -EBUSY:
                return sd_bus_error_setf(error, BUS_ERROR_BUSY, "%s: tenant '%s' is busy", what, tenant_path);
        case -EINVAL:
        case -ERANGE:
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s '%s': invalid or out-of-range value",
                                         what, tenant_path);
        case -EPERM:
        case -EACCES:
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "%s '%s': not permitted", what,
                                         tenant_path);
        case -ENOMEM:
                return sd_bus_error_set(error, SD_BUS_ERROR_NO_MEMORY, "Out of memory");
        default:
                return sd_bus_error_set_errnof(error, r, "%s '%s': %s", what, tenant_path, strerror(-r));
        }
}

/* MemoryPressureTarget (a string, "no" or "" for off) of SetLimits:
 * into @l, and out of its dict entry. */
static int read_pressure_target(sd_bus_message *msg, struct mb_limits *l, sd_bus_error *error) {
        struct rightsize_target rt;
        const char *contents, *value, *why = NULL;
        char type;
        int r;

        r = sd_bus_message_peek_type(msg, &type, &contents);
        if (r < 0)
                return r;
        if (type != 'v' || strcmp(contents, "s") != 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "MemoryPressureTarget must be a string of type 's' (\"some avg10 0.1%%\", or "
                                         "\"no\"), got type '%s'",
                                         contents);
        r = sd_bus_message_read(msg, "v", "s", &value);
        if (r < 0)
                return r;
        if (l->pressure_target != MB_LIMIT_UNSET)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "MemoryPressureTarget given twice");
        if (rightsize_target_parse(value, &rt, &why) < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "MemoryPressureTarget=%s: %s", value, why);
        l->pressure_target = rightsize_target_pack(&rt);
        return sd_bus_message_exit_container(msg);
}

int bus_read_limits(sd_bus_message *msg, struct mb_limits *ret, sd_bus_error *error) {
        struct mb_limits l = {
                .max = MB_LIMIT_UNSET, .high = MB_LIMIT_UNSET, .low = MB_LIMIT_UNSET, .min = MB_LIMIT_UNSET,
                .charge_batch = MB_LIMIT_UNSET, .pressure_target = MB_LIMIT_UNSET,
        };
        int r;

        r = sd_bus_message_enter_container(msg, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(msg, 'e', "sv")) > 0) {
                const char *key, *contents;
                uint64_t *field, value;
                bool is_bytes = true;
                char type;

                r = sd_bus_message_read(msg, "s", &key);
                if (r < 0)
                        return r;
                if (strcmp(key, "MemoryPressureTarget") == 0) {
                        r = read_pressure_target(msg, &l, error);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (strcmp(key, "MemoryMax") == 0)
                        field = &l.max;
                else if (strcmp(key, "MemoryHigh") == 0)
                        field = &l.high;
                else if (strcmp(key, "MemoryLow") == 0)
                        field = &l.low;
                else if (strcmp(key, "MemoryMin") == 0)
                        field = &l.min;
                else if (strcmp(key, "ChargeBatch") == 0) {
                        field = &l.charge_batch;
                        is_bytes = false;
                } else
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Unknown setting '%s' (known: MemoryMax, MemoryHigh, MemoryLow, "
                                                 "MemoryMin, ChargeBatch, MemoryPressureTarget)",
                                                 key);

                r = sd_bus_message_peek_type(msg, &type, &contents);
                if (r < 0)
                        return r;
                if (type != 'v' || strcmp(contents, "t") != 0)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "%s must be a number of type 't' (%s), got type '%s'", key,
                                                 is_bytes ? "bytes, 18446744073709551615 for no limit" : "pages",
                                                 contents);
                r = sd_bus_message_read(msg, "v", "t", &value);
                if (r < 0)
                        return r;
                if (*field != MB_LIMIT_UNSET)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s given twice", key);
                /* The range of each key: bus_check_limits(), which knows
                 * the page size for the figures in bytes. */
                if (value == MB_LIMIT_UNSET && !is_bytes)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "ChargeBatch=%llu is out of range: 1 to %u pages",
                                                 (unsigned long long) value, MB_CHARGE_MAX_PAGES);
                if (value == MB_LIMIT_UNSET)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "%s=%llu is out of range: a number of bytes, or "
                                                 "18446744073709551615 for no limit (RevertTenantLimits resets it)",
                                                 key, (unsigned long long) value);
                *field = value;

                r = sd_bus_message_exit_container(msg);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(msg);
        if (r < 0)
                return r;
        *ret = l;
        return 0;
}

int bus_check_limits(struct manager *m, const struct mb_limits *l, sd_bus_error *error) {
        static const char *const names[] = { "MemoryMax", "MemoryHigh", "MemoryLow", "MemoryMin" };
        const uint64_t values[] = { l->max, l->high, l->low, l->min };
        uint64_t most_pages = (uint64_t) PAGE_COUNTER_MAX;

        for (size_t i = 0; i < ELEMENTSOF(values); i++) {
                if (values[i] == MB_LIMIT_UNSET || values[i] == MB_LIMIT_MAX)
                        continue;
                /* page_counter_memparse(): bytes round down to pages, at
                 * most PAGE_COUNTER_MAX of them. */
                if (values[i] / m->b.page_size > most_pages)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "%s=%llu bytes is out of range: 0 to %llu bytes (%llu pages of %llu "
                                                 "bytes), or 18446744073709551615 for no limit",
                                                 names[i], (unsigned long long) values[i],
                                                 (unsigned long long) (most_pages * m->b.page_size + m->b.page_size - 1),
                                                 (unsigned long long) most_pages, (unsigned long long) m->b.page_size);
        }
        if (l->charge_batch != MB_LIMIT_UNSET && (l->charge_batch == 0 || l->charge_batch > MB_CHARGE_MAX_PAGES))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "ChargeBatch=%llu is out of range: 1 to %u pages (%llu to %llu bytes)",
                                         (unsigned long long) l->charge_batch, MB_CHARGE_MAX_PAGES,
                                         (unsigned long long) m->b.page_size,
                                         (unsigned long long) MB_CHARGE_MAX_PAGES * m->b.page_size);
        return 0;
}

/* Which fields an "as" of setting names marks (an empty array: all of them). */
static int read_limit_keys(sd_bus_message *msg, struct mb_limits *ret, sd_bus_error *error) {
        struct mb_limits l = {
                .max = MB_LIMIT_UNSET, .high = MB_LIMIT_UNSET, .low = MB_LIMIT_UNSET, .min = MB_LIMIT_UNSET,
                .charge_batch = MB_LIMIT_UNSET, .pressure_target = MB_LIMIT_UNSET,
        };
        const char *key;
        bool any = false;
        int r;

        r = sd_bus_message_enter_container(msg, 'a', "s");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(msg, "s", &key)) > 0) {
                if (strcmp(key, "MemoryMax") == 0)
                        l.max = 0;
                else if (strcmp(key, "MemoryHigh") == 0)
                        l.high = 0;
                else if (strcmp(key, "MemoryLow") == 0)
                        l.low = 0;
                else if (strcmp(key, "MemoryMin") == 0)
                        l.min = 0;
                else if (strcmp(key, "ChargeBatch") == 0)
                        l.charge_batch = 0;
                else if (strcmp(key, "MemoryPressureTarget") == 0)
                        l.pressure_target = 0;
                else
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Unknown setting '%s' (known: MemoryMax, MemoryHigh, MemoryLow, "
                                                 "MemoryMin, ChargeBatch, MemoryPressureTarget)",
                                                 key);
                any = true;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(msg);
        if (r < 0)
                return r;
        if (!any)
                l = (struct mb_limits) { 0, 0, 0, 0, 0, 0 };
        *ret = l;
        return 0;
}

/* ---- operations shared with the Manager ---- */

int bus_tenant_method_revert_limits(sd_bus_message *msg, struct manager *m, struct tenant *t,
                                    sd_bus_error *error) {
        struct mb_limits fields;
        int runtime, r;

        r = bus_verify_tenant(msg, m, t, true, t->path, "Reverting tenant limits", error);
        if (r < 0)
                return r;
        r = read_limit_keys(msg, &fields, error);
        if (r < 0)
                return r;
        /* runtime=true drops the runtime layer's values only; false drops
         * the persisted ones as well (daemon/service/state.h). */
        r = sd_bus_message_read(msg, "b", &runtime);
        if (r < 0)
                return r;

        r = manager_tenant_revert_limits(m, t, &fields, runtime);
        if (r == -EROFS)
                return sd_bus_error_setf(error, SD_BUS_ERROR_NOT_SUPPORTED,
                                         "Cannot revert the limits of '%s': the broker runs without a state "
                                         "directory",
                                         t->path);
        if (r < 0)
                return bus_error_from_errno(error, r, "Cannot revert the limits of", t->path);
        if (r > 0 && fields.charge_batch != MB_LIMIT_UNSET)
                bus_emit_charge_batch_changed(m, t);
        return sd_bus_reply_method_return(msg, NULL);
}

int bus_tenant_method_get_stat(sd_bus_message *msg, struct manager *m, struct tenant *t, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(bus_stat_done) struct bus_stat s = {};
        int r;

        (void) error;
        r = bus_stat_collect(m, t, false, &s);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = bus_stat_append(reply, &s);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

int bus_tenant_method_get_stat_text(sd_bus_message *msg, struct manager *m, struct tenant *t,
                                    sd_bus_error *error) {
        _cleanup_(freep) char *text = NULL;
        _cleanup_(bus_stat_done) struct bus_stat s = {};
        size_t size = 0;
        FILE *f;
        int r;

        (void) error;
        r = bus_stat_collect(m, t, false, &s);
        if (r < 0)
                return r;
        f = open_memstream(&text, &size);
        if (!f)
                return -ENOMEM;
        for (size_t i = 0; i < s.n; i++)
                fprintf(f, "%s %llu\n", s.e[i].key, (unsigned long long) s.e[i].value);
        if (fclose(f) != 0)
                return -ENOMEM;
        return sd_bus_reply_method_return(msg, "s", text);
}

int bus_tenant_method_get_events(sd_bus_message *msg, struct manager *m, struct tenant *t,
                                 sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct bus_events ev;
        int r;

        (void) m;
        (void) error;
        bus_events_collect(t, &ev);
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(st)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < ev.n; i++) {
                r = sd_bus_message_append(reply, "(st)", ev.e[i].key, ev.e[i].value);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

struct set_limits_request {
        struct manager *m;
        sd_bus_message *msg;
};

static void set_limits_done(const struct reclaim_limits_outcome *o, void *userdata) {
        struct set_limits_request *req = userdata;
        struct manager *m = req->m;
        int r;

        if (o->fits || o->gone)
                r = sd_bus_reply_method_return(req->msg, NULL);
        else {
                bool max = o->usage > o->max;

                r = sd_bus_reply_method_errorf(
                        req->msg, BUS_ERROR_AGAIN,
                        "The limits apply, but the usage stays at %" PRIu64 " bytes, above the new %s of %" PRIu64
                        " bytes, after reclaiming %" PRIu64 " bytes: nothing more could be reclaimed",
                        o->usage * m->b.page_size, max ? "MemoryMax" : "MemoryHigh",
                        (max ? o->max : o->high) * m->b.page_size, o->reclaimed * m->b.page_size);
        }
        if (r < 0 && r != -ENOTCONN)
                log_warning("cannot reply to SetLimits: %s", strerror(-r));
        sd_bus_message_unref(req->msg);
        free(req);
        bus_kick(m);
}

int bus_tenant_method_set_limits(sd_bus_message *msg, struct manager *m, struct tenant *t, sd_bus_error *error) {
        struct set_limits_request *req;
        struct mb_limits l;
        int runtime, r;

        r = bus_verify_tenant(msg, m, t, true, t->path, "Changing tenant limits", error);
        if (r < 0)
                return r;
        r = bus_read_limits(msg, &l, error);
        if (r < 0)
                return r;
        r = bus_check_limits(m, &l, error);
        if (r < 0)
                return r;
        /* runtime=false persists the change under the state directory,
         * runtime=true keeps it until the service stops (daemon/service/state.h). */
        r = sd_bus_message_read(msg, "b", &runtime);
        if (r < 0)
                return r;

        r = manager_tenant_set_limits_layer(m, t, &l, runtime);
        if (r < 0 && !runtime && r != -EINVAL && r != -ERANGE && r != -ENOMEM)
                /* The limits apply; only writing them down failed. */
                return sd_bus_error_set_errnof(error, r,
                                               "The limits of '%s' apply, but could not be persisted "
                                               "(they hold until the next reload or restart): %s",
                                               t->path, strerror(-r));
        if (r < 0)
                return bus_error_from_errno(error, r, "Cannot set the limits of", t->path);

        /* manager_tenant_set_limits() emitted PropertiesChanged for @t;
         * descendants that inherit ChargeBatch changed as well. */
        if (l.charge_batch != MB_LIMIT_UNSET)
                bus_emit_charge_batch_changed(m, t);

        /* memory_max_write(), memory_high_write(): the write returns once
         * the usage fits under the new limits, or when reclaim (and the
         * OOM policy) could do no more. */
        req = calloc(1, sizeof(*req));
        if (!req)
                return -ENOMEM;
        req->m = m;
        req->msg = sd_bus_message_ref(msg);
        r = manager_tenant_limits_wait(m, t, set_limits_done, req);
        if (r != 0) {
                sd_bus_message_unref(req->msg);
                free(req);
                if (r < 0 && r != -ESHUTDOWN)
                        return bus_error_from_errno(error, r, "Cannot reclaim the excess of", t->path);
                return sd_bus_reply_method_return(msg, NULL);
        }
        return 1;
}

struct reclaim_request {
        sd_bus_message *msg;
        uint64_t goal_bytes; /* what was asked, rounded down to pages */
        char *path;
};

static void reclaim_done(struct manager *m, uint64_t reclaimed_bytes, void *userdata) {
        struct reclaim_request *req = userdata;
        int r;

        /* memory_reclaim() fails with -EAGAIN when it could not reclaim
         * all it was asked for. */
        if (reclaimed_bytes < req->goal_bytes)
                r = sd_bus_reply_method_errorf(req->msg, BUS_ERROR_AGAIN,
                                               "Reclaimed %" PRIu64 " of %" PRIu64
                                               " bytes from '%s': nothing more could be reclaimed",
                                               reclaimed_bytes, req->goal_bytes, req->path);
        else
                r = sd_bus_reply_method_return(req->msg, "t", reclaimed_bytes);
        if (r < 0 && r != -ENOTCONN)
                log_warning("cannot reply to Reclaim: %s", strerror(-r));
        sd_bus_message_unref(req->msg);
        free(req->path);
        free(req);
        bus_kick(m);
}

int bus_tenant_method_reclaim(sd_bus_message *msg, struct manager *m, struct tenant *t, sd_bus_error *error) {
        struct reclaim_request *req;
        uint64_t bytes;
        int r;

        r = sd_bus_message_read(msg, "t", &bytes);
        if (r < 0)
                return r;
        r = bus_verify_tenant(msg, m, t, true, t->path, "Reclaim", error);
        if (r < 0)
                return r;

        req = calloc(1, sizeof *req);
        if (!req)
                return -ENOMEM;
        req->path = strdup(t->path);
        if (!req->path) {
                free(req);
                return -ENOMEM;
        }
        req->msg = sd_bus_message_ref(msg);
        req->goal_bytes = bytes / m->b.page_size * m->b.page_size;
        /* memory.reclaim: the reply goes out when reclaim completes (the
         * callback may run before manager_reclaim() returns). */
        r = manager_reclaim(m, t, bytes, reclaim_done, req);
        if (r < 0) {
                sd_bus_message_unref(req->msg);
                free(req->path);
                free(req);
                return bus_error_from_errno(error, r, "Cannot reclaim from", t->path);
        }
        return 1;
}

int bus_tenant_method_reset_peak(sd_bus_message *msg, struct manager *m, struct tenant *t, sd_bus_error *error) {
        int r;

        r = bus_verify_tenant(msg, m, t, true, t->path, "Resetting the peak", error);
        if (r < 0)
                return r;
        /* memory.peak written: the high-water mark starts over at the
         * current usage (page_counter_reset_watermark()). */
        page_counter_reset_watermark(&t->memory);
        log_info("tenant %s: MemoryPeak reset to the usage, %lu pages", t->path, page_counter_read(&t->memory));
        return sd_bus_reply_method_return(msg, NULL);
}

/* ---- the Tenant interface ---- */

static struct tenant *tenant_of(struct manager *m, const char *path, sd_bus_error *error) {
        struct tenant *t = bus_tenant_from_object_path(m, path);

        if (!t)
                sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_OBJECT, "No tenant at %s", path);
        return t;
}

#define TENANT_OR_RETURN(t, m, path, error)                    \
        struct tenant *t = tenant_of((m), (path), (error));    \
        if (!t)                                                \
                return -ENOENT

static int property_get_path(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, path, error);
        return sd_bus_message_append(reply, "s", t->path);
}

static int property_get_memory_current(sd_bus *bus, const char *path, const char *interface,
                                       const char *property, sd_bus_message *reply, void *userdata,
                                       sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, path, error);
        return sd_bus_message_append(reply, "t", bus_pages_to_bytes(userdata, page_counter_read(&t->memory)));
}

static int property_get_memory_peak(sd_bus *bus, const char *path, const char *interface, const char *property,
                                    sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, path, error);
        return sd_bus_message_append(reply, "t",
                                     bus_pages_to_bytes(userdata, atomic_load(&t->memory.watermark)));
}

static int property_get_limit(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        struct manager *m = userdata;
        unsigned long pages;

        TENANT_OR_RETURN(t, m, path, error);
        if (strcmp(property, "MemoryMax") == 0)
                pages = page_counter_get_max(&t->memory);
        else if (strcmp(property, "MemoryHigh") == 0)
                pages = page_counter_get_high_setting(&t->memory);
        else if (strcmp(property, "MemoryLow") == 0)
                pages = page_counter_get_low(&t->memory);
        else
                pages = page_counter_get_min(&t->memory);
        return sd_bus_message_append(reply, "t", bus_limit_to_bytes(m, pages));
}

static int property_get_effective(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        uint64_t emin, elow;

        TENANT_OR_RETURN(t, userdata, path, error);
        bus_effective_protection(userdata, t, &emin, &elow);
        return sd_bus_message_append(reply, "t", strcmp(property, "EffectiveMemoryMin") == 0 ? emin : elow);
}

/* The batch a client attaching now is told (manager_tenant_charge_batch()):
 * 4 x ChargeBatch for a tenant with nothing limited while the broker is far
 * from its capacity. */
static int property_get_effective_charge_batch(sd_bus *bus, const char *path, const char *interface,
                                               const char *property, sd_bus_message *reply, void *userdata,
                                               sd_bus_error *error) {
        struct manager *m = userdata;

        TENANT_OR_RETURN(t, m, path, error);
        BUS_TREE_RDLOCK(m);
        return sd_bus_message_append(reply, "u", (uint32_t) manager_tenant_charge_batch(m, t));
}

static int property_get_charge_batch(sd_bus *bus, const char *path, const char *interface,
                                     const char *property, sd_bus_message *reply, void *userdata,
                                     sd_bus_error *error) {
        struct manager *m = userdata;
        unsigned dflt = m->b.config ? m->b.config->broker.charge_batch : 64;

        TENANT_OR_RETURN(t, m, path, error);
        BUS_TREE_RDLOCK(m);
        return sd_bus_message_append(reply, "u", (uint32_t) tenant_charge_batch(t, dflt));
}

static int property_get_draining(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, path, error);
        return sd_bus_message_append(reply, "b", (int) atomic_load(&t->draining));
}

static int property_get_nclients(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, path, error);
        return sd_bus_message_append(reply, "u", (uint32_t) atomic_load(&t->nclients));
}

/* MemoryPressureTarget= and the state of its loop (daemon/reclaim/rightsizer.h). */
static int property_get_rightsize(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        struct manager *m = userdata;
        struct rightsizer_status st;

        TENANT_OR_RETURN(t, m, path, error);
        rightsizer_tenant_status(&m->b, t, &st);
        if (strcmp(property, "MemoryPressureTarget") == 0)
                return sd_bus_message_append(reply, "s", st.target);
        if (strcmp(property, "RightSizeState") == 0)
                return sd_bus_message_append(reply, "s", st.state);
        if (strcmp(property, "MemoryWorkingSetEstimate") == 0)
                return sd_bus_message_append(reply, "t", st.working_set_bytes);
        if (strcmp(property, "RightSizeStep") == 0)
                return sd_bus_message_append(reply, "t", st.step_bytes);
        if (strcmp(property, "RightSizeHigh") == 0)
                return sd_bus_message_append(reply, "t", st.high_bytes);
        if (strcmp(property, "RightSizePressure") == 0)
                return sd_bus_message_append(reply, "u", st.pressure_ppm);
        return sd_bus_message_append(reply, "t", st.reclaimed_bytes);
}

/* Delegate=: users as their uid ("1000"), groups as '@' and their gid
 * ("@50"), the file's syntax with numbers only (no NSS lookup in the
 * loop). */
static int property_get_delegate(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        struct manager *m = userdata;
        char word[16];
        int r;

        TENANT_OR_RETURN(t, m, path, error);
        r = sd_bus_message_open_container(reply, 'a', "s");
        if (r < 0)
                return r;
        {
                BUS_TREE_RDLOCK(m);
                for (size_t i = 0; r >= 0 && i < t->delegate.n_users; i++) {
                        snprintf(word, sizeof(word), "%u", (unsigned) t->delegate.users[i]);
                        r = sd_bus_message_append(reply, "s", word);
                }
                for (size_t i = 0; r >= 0 && i < t->delegate.n_groups; i++) {
                        snprintf(word, sizeof(word), "@%u", (unsigned) t->delegate.groups[i]);
                        r = sd_bus_message_append(reply, "s", word);
                }
        }
        if (r < 0)
                return r;
        return sd_bus_message_close_container(reply);
}

static int method_get_stat(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, sd_bus_message_get_path(msg), error);
        return bus_tenant_method_get_stat(msg, userdata, t, error);
}

static int method_get_stat_text(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, sd_bus_message_get_path(msg), error);
        return bus_tenant_method_get_stat_text(msg, userdata, t, error);
}

static int method_get_events(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, sd_bus_message_get_path(msg), error);
        return bus_tenant_method_get_events(msg, userdata, t, error);
}

static int method_get_pressure(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, sd_bus_message_get_path(msg), error);
        return bus_tenant_method_get_pressure(msg, userdata, t, error);
}

static int method_get_pressure_text(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, sd_bus_message_get_path(msg), error);
        return bus_tenant_method_get_pressure_text(msg, userdata, t, error);
}

static int method_set_limits(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, sd_bus_message_get_path(msg), error);
        return bus_tenant_method_set_limits(msg, userdata, t, error);
}

static int method_revert_limits(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, sd_bus_message_get_path(msg), error);
        return bus_tenant_method_revert_limits(msg, userdata, t, error);
}

static int method_reclaim(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, sd_bus_message_get_path(msg), error);
        return bus_tenant_method_reclaim(msg, userdata, t, error);
}

static int method_reset_peak(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        TENANT_OR_RETURN(t, userdata, sd_bus_message_get_path(msg), error);
        return bus_tenant_method_reset_peak(msg, userdata, t, error);
}

const sd_bus_vtable bus_tenant_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Path", "s", property_get_path, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("MemoryCurrent", "t", property_get_memory_current, 0, 0),
        SD_BUS_PROPERTY("MemoryPeak", "t", property_get_memory_peak, 0, 0),
        SD_BUS_PROPERTY("MemoryMax", "t", property_get_limit, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("MemoryHigh", "t", property_get_limit, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("MemoryLow", "t", property_get_limit, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("MemoryMin", "t", property_get_limit, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("EffectiveMemoryLow", "t", property_get_effective, 0, 0),
        SD_BUS_PROPERTY("EffectiveMemoryMin", "t", property_get_effective, 0, 0),
        SD_BUS_PROPERTY("ChargeBatch", "u", property_get_charge_batch, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("EffectiveChargeBatch", "u", property_get_effective_charge_batch, 0, 0),
        SD_BUS_PROPERTY("NClients", "u", property_get_nclients, 0, 0),
        SD_BUS_PROPERTY("Draining", "b", property_get_draining, 0, 0),
        SD_BUS_PROPERTY("MemoryPressureTarget", "s", property_get_rightsize, 0, 0),
        SD_BUS_PROPERTY("MemoryWorkingSetEstimate", "t", property_get_rightsize, 0, 0),
        SD_BUS_PROPERTY("RightSizeState", "s", property_get_rightsize, 0, 0),
        SD_BUS_PROPERTY("RightSizeStep", "t", property_get_rightsize, 0, 0),
        SD_BUS_PROPERTY("RightSizeHigh", "t", property_get_rightsize, 0, 0),
        SD_BUS_PROPERTY("RightSizeReclaimed", "t", property_get_rightsize, 0, 0),
        SD_BUS_PROPERTY("RightSizePressure", "u", property_get_rightsize, 0, 0),
        SD_BUS_PROPERTY("PressureSomeTotalUSec", "t", bus_tenant_property_get_pressure, 0, 0),
        SD_BUS_PROPERTY("PressureSomeAvg10", "u", bus_tenant_property_get_pressure, 0, 0),
        SD_BUS_PROPERTY("PressureSomeAvg60", "u", bus_tenant_property_get_pressure, 0, 0),
        SD_BUS_PROPERTY("PressureSomeAvg300", "u", bus_tenant_property_get_pressure, 0, 0),
        SD_BUS_PROPERTY("PressureFullTotalUSec", "t", bus_tenant_property_get_pressure, 0, 0),
        SD_BUS_PROPERTY("PressureFullAvg10", "u", bus_tenant_property_get_pressure, 0, 0),
        SD_BUS_PROPERTY("PressureFullAvg60", "u", bus_tenant_property_get_pressure, 0, 0),
        SD_BUS_PROPERTY("PressureFullAvg300", "u", bus_tenant_property_get_pressure, 0, 0),
        SD_BUS_PROPERTY("Delegate", "as", property_get_delegate, 0, 0),
        SD_BUS_METHOD_WITH_ARGS("GetStat", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(st)", stat), method_get_stat,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetStatText", SD_BUS_NO_ARGS, SD_BUS_RESULT("s", text), method_get_stat_text,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetEvents", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(st)", events), method_get_events,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetPressure", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(sdddt)", pressure),
                                method_get_pressure, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetPressureText", SD_BUS_NO_ARGS, SD_BUS_RESULT("s", text),
                                method_get_pressure_text, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetLimits", SD_BUS_ARGS("a{sv}", limits, "b", runtime), SD_BUS_NO_RESULT,
                                method_set_limits, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RevertLimits", SD_BUS_ARGS("as", keys, "b", runtime), SD_BUS_NO_RESULT,
                                method_revert_limits, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Reclaim", SD_BUS_ARGS("t", bytes), SD_BUS_RESULT("t", reclaimed), method_reclaim,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ResetPeak", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_reset_peak,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("MemoryEvent", SD_BUS_ARGS("s", event, "t", count), 0),
        SD_BUS_VTABLE_END,
};
