/* SPDX-License-Identifier: MIT */
/*
 * ctl-bus.c - membrokerctl's calls to the org.membroker1 API (see
 * ctl-bus.h): properties through a small offset map, tenants through one
 * GetManagedObjects, statistics through DumpStats or GetStat.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-bus.h"
#include "ctl.h"

/* Report a failed call: the daemon's message when there is one. */
int ctl_bus_log_error(const char *what, const sd_bus_error *error, int r) {
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_SERVICE_UNKNOWN) ||
            sd_bus_error_has_name(error, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                ctl_log_error("%s: membrokerd is not running on this bus (%s is not owned)", what, CTL_BUS_NAME);
        else if (error && error->message)
                ctl_log_error("%s: %s", what, error->message);
        else
                ctl_log_error("%s: %s", what, strerror(-r));
        return r;
}

/* ---- bus access ---- */

const char *ctl_bus_description(void) {
        switch (ctl_arg.bus_kind) {
        case CTL_BUS_USER:
                return "the user bus";
        case CTL_BUS_ADDRESS:
                return ctl_arg.address;
        default:
                return "the system bus";
        }
}

int ctl_bus_open(sd_bus **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        switch (ctl_arg.bus_kind) {
        case CTL_BUS_SYSTEM:
                r = sd_bus_open_system(&bus);
                break;
        case CTL_BUS_USER:
                r = sd_bus_open_user(&bus);
                break;
        default:
                r = sd_bus_new(&bus);
                if (r < 0)
                        break;
                r = sd_bus_set_address(bus, ctl_arg.address);
                if (r < 0)
                        break;
                r = sd_bus_set_bus_client(bus, true);
                if (r < 0)
                        break;
                r = sd_bus_start(bus);
        }
        if (r < 0 && ctl_arg.bus_kind == CTL_BUS_USER && (r == -ENOMEDIUM || r == -ENOENT || r == -ECONNREFUSED)) {
                /* sd_bus_open_user() finds no session bus: say where it
                 * looked and what else there is, not "No medium found". */
                const char *addr = getenv("DBUS_SESSION_BUS_ADDRESS"), *rt = getenv("XDG_RUNTIME_DIR");

                if (addr && *addr)
                        ctl_log_error("cannot connect to the user bus at $DBUS_SESSION_BUS_ADDRESS (%s): %s", addr,
                                      strerror(-r));
                else if (rt && *rt)
                        ctl_log_error("cannot connect to the user bus: no session bus listens on %s/bus (%s)", rt,
                                      strerror(-r));
                else
                        ctl_log_error("cannot connect to the user bus: this is not a login session (neither "
                                      "$DBUS_SESSION_BUS_ADDRESS nor $XDG_RUNTIME_DIR is set)");
                ctl_log_error("membrokerd serves the system bus unless started with --user: drop --user, or "
                              "name the bus with --address=ADDRESS");
                return r;
        }
        if (r < 0) {
                ctl_log_error("cannot connect to %s: %s", ctl_bus_description(), strerror(-r));
                return r;
        }
        *ret = TAKE_PTR(bus);
        return 0;
}

int ctl_bus_call_manager(sd_bus *bus, const char *member, sd_bus_error *error, sd_bus_message **reply,
                        const char *types, ...) {
        va_list ap;
        int r;

        va_start(ap, types);
        r = sd_bus_call_methodv(bus, CTL_BUS_NAME, CTL_MANAGER_PATH, CTL_MANAGER_IFACE, member, error, reply, types, ap);
        va_end(ap);
        return r;
}

/* ---- dictionaries and property maps ---- */

/* Walk the dictionary a{@entry_sig} at @m, calling @entry inside each entry
 * to read its key and value.  0 or the first negative errno. */
static int read_dict(sd_bus_message *m, const char *entry_sig, int (*entry)(sd_bus_message *m, void *userdata),
                     void *userdata) {
        char array_sig[32];
        int r;

        snprintf(array_sig, sizeof array_sig, "{%s}", entry_sig);
        r = sd_bus_message_enter_container(m, 'a', array_sig);
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', entry_sig)) > 0) {
                r = entry(m, userdata);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

struct prop_map {
        const char *name;
        char type; /* 's', 't' or 'u' */
        size_t offset;
};

struct props_ctx {
        const struct prop_map *map;
        size_t n;
        void *obj;
};

/* One property "sv": into the field the map names, when its type matches. */
static int read_prop(sd_bus_message *m, void *userdata) {
        const struct props_ctx *ctx = userdata;
        const struct prop_map *p = NULL;
        const char *name, *contents;
        char type, *where;
        int r;

        r = sd_bus_message_read(m, "s", &name);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ctx->n; i++)
                if (strcmp(ctx->map[i].name, name) == 0)
                        p = &ctx->map[i];
        r = sd_bus_message_peek_type(m, &type, &contents);
        if (r < 0)
                return r;
        if (!p || contents[0] != p->type || contents[1] != '\0')
                return sd_bus_message_skip(m, "v");
        where = (char *) ctx->obj + p->offset;
        if (p->type != 's')
                return sd_bus_message_read(m, "v", contents, where);

        const char *str;
        r = sd_bus_message_read(m, "v", "s", &str);
        if (r < 0)
                return r;
        free(*(char **) where);
        *(char **) where = strdup(str);
        return *(char **) where ? 0 : -ENOMEM;
}

/* Properties a{sv} into the fields of @obj that @map names. */
static int read_props(sd_bus_message *m, const struct prop_map *map, size_t n, void *obj) {
        struct props_ctx ctx = { map, n, obj };

        return read_dict(m, "sv", read_prop, &ctx);
}

static const struct prop_map manager_props[] = {
        { "Version", 's', offsetof(struct ctl_manager_info, version) },
        { "PageSize", 't', offsetof(struct ctl_manager_info, page_size) },
        { "Capacity", 't', offsetof(struct ctl_manager_info, capacity) },
        { "MemoryCurrent", 't', offsetof(struct ctl_manager_info, current) },
        { "StatsFlushes", 't', offsetof(struct ctl_manager_info, flushes) },
        { "StatsFlushedNodes", 't', offsetof(struct ctl_manager_info, flushed_nodes) },
        { "ChargeBatch", 'u', offsetof(struct ctl_manager_info, charge_batch) },
        { "NTenants", 'u', offsetof(struct ctl_manager_info, ntenants) },
        { "NClients", 'u', offsetof(struct ctl_manager_info, nclients) },
};

int ctl_bus_get_manager_info(sd_bus *bus, struct ctl_manager_info *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_call_method(bus, CTL_BUS_NAME, CTL_MANAGER_PATH, "org.freedesktop.DBus.Properties", "GetAll", &error,
                               &reply, "s", CTL_MANAGER_IFACE);
        if (r < 0)
                return ctl_bus_log_error("cannot read the broker's properties", &error, r);
        *ret = (struct ctl_manager_info) {};
        r = read_props(reply, manager_props, ELEMENTSOF(manager_props), ret);
        if (r < 0) {
                ctl_log_error("cannot parse the broker's properties: %s", strerror(-r));
                return r;
        }
        return 0;
}

void ctl_manager_info_done(struct ctl_manager_info *mi) {
        free(mi->version);
        mi->version = NULL;
}

/* ---- tenants ---- */

void ctl_kvlist_done(struct ctl_kvlist *l) {
        for (size_t i = 0; i < l->n && !l->shared_keys; i++)
                free(l->v[i].key);
        free(l->v);
        *l = (struct ctl_kvlist) {};
}

const struct ctl_kv *ctl_kvlist_find(const struct ctl_kvlist *l, const char *key) {
        for (size_t i = 0; l->shared_keys && i < l->n; i++)
                if (l->v[i].key == key) /* the same shared name: no strcmp() */
                        return &l->v[i];
        for (size_t i = 0; i < l->n; i++)
                if (strcmp(l->v[i].key, key) == 0)
                        return &l->v[i];
        return NULL;
}

/* Read an a(st). */
static int read_kvlist(sd_bus_message *m, struct ctl_kvlist *ret) {
        struct ctl_kvlist l = {};
        size_t alloc = 0;
        const char *key;
        uint64_t value;
        int r;

        r = sd_bus_message_enter_container(m, 'a', "(st)");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(m, "(st)", &key, &value)) > 0) {
                if (l.n == alloc) {
                        size_t na = alloc ? 2 * alloc : 32;
                        struct ctl_kv *nv = realloc(l.v, na * sizeof *nv);
                        if (!nv) {
                                ctl_kvlist_done(&l);
                                return -ENOMEM;
                        }
                        l.v = nv;
                        alloc = na;
                }
                l.v[l.n].key = strdup(key);
                if (!l.v[l.n].key) {
                        ctl_kvlist_done(&l);
                        return -ENOMEM;
                }
                l.v[l.n++].value = value;
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r < 0) {
                ctl_kvlist_done(&l);
                return r;
        }
        *ret = l;
        return 0;
}

static const struct prop_map tenant_props[] = {
        { "Path", 's', offsetof(struct ctl_tenant, path) },
        { "MemoryCurrent", 't', offsetof(struct ctl_tenant, current) },
        { "MemoryPeak", 't', offsetof(struct ctl_tenant, peak) },
        { "MemoryMax", 't', offsetof(struct ctl_tenant, max) },
        { "MemoryHigh", 't', offsetof(struct ctl_tenant, high) },
        { "MemoryLow", 't', offsetof(struct ctl_tenant, low) },
        { "MemoryMin", 't', offsetof(struct ctl_tenant, min) },
        { "EffectiveMemoryMin", 't', offsetof(struct ctl_tenant, emin) },
        { "EffectiveMemoryLow", 't', offsetof(struct ctl_tenant, elow) },
        { "ChargeBatch", 'u', offsetof(struct ctl_tenant, charge_batch) },
        { "NClients", 'u', offsetof(struct ctl_tenant, nclients) },
        { "PressureSomeTotalUSec", 't', offsetof(struct ctl_tenant, pressure_total[0]) },
        { "PressureSomeAvg10", 'u', offsetof(struct ctl_tenant, pressure_avg[0][0]) },
        { "PressureSomeAvg60", 'u', offsetof(struct ctl_tenant, pressure_avg[0][1]) },
        { "PressureSomeAvg300", 'u', offsetof(struct ctl_tenant, pressure_avg[0][2]) },
        { "PressureFullTotalUSec", 't', offsetof(struct ctl_tenant, pressure_total[1]) },
        { "PressureFullAvg10", 'u', offsetof(struct ctl_tenant, pressure_avg[1][0]) },
        { "PressureFullAvg60", 'u', offsetof(struct ctl_tenant, pressure_avg[1][1]) },
        { "PressureFullAvg300", 'u', offsetof(struct ctl_tenant, pressure_avg[1][2]) },
};

void ctl_tenant_set_done(struct ctl_tenant_set *s) {
        for (size_t i = 0; i < s->n; i++) {
                free(s->t[i].path);
                ctl_kvlist_done(&s->t[i].stat);
                ctl_kvlist_done(&s->t[i].events);
        }
        free(s->t);
        for (size_t i = 0; s->keys && s->keys[i]; i++)
                free(s->keys[i]);
        free(s->keys);
        *s = (struct ctl_tenant_set) {};
}

static int tenant_info_compare(const void *a, const void *b) {
        const struct ctl_tenant *x = a, *y = b;
        return ctl_path_compare(x->path, y->path);
}

struct ctl_tenant *ctl_tenant_set_find(struct ctl_tenant_set *s, const char *path) {
        struct ctl_tenant key = { .path = (char *) path };
        return bsearch(&key, s->t, s->n, sizeof key, tenant_info_compare);
}

/* A new zeroed tenant at the end of @s (*@alloc slots allocated), or NULL. */
static struct ctl_tenant *tenant_set_add(struct ctl_tenant_set *s, size_t *alloc) {
        if (s->n == *alloc) {
                size_t na = *alloc ? 2 * *alloc : 16;
                struct ctl_tenant *nt = realloc(s->t, na * sizeof *nt);
                if (!nt)
                        return NULL;
                s->t = nt;
                *alloc = na;
        }
        s->t[s->n] = (struct ctl_tenant) {};
        return &s->t[s->n++];
}

struct tenants_ctx {
        struct ctl_tenant_set *s;
        size_t alloc;
};

/* One interface "sa{sv}" of a managed object: a tenant into the set when it
 * is the Tenant interface. */
static int read_interface(sd_bus_message *m, void *userdata) {
        struct tenants_ctx *ctx = userdata;
        struct ctl_tenant *t;
        const char *iface;
        int r;

        r = sd_bus_message_read(m, "s", &iface);
        if (r < 0)
                return r;
        if (strcmp(iface, CTL_TENANT_IFACE) != 0)
                return sd_bus_message_skip(m, "a{sv}");
        t = tenant_set_add(ctx->s, &ctx->alloc);
        if (!t)
                return -ENOMEM;
        r = read_props(m, tenant_props, ELEMENTSOF(tenant_props), t);
        if (r >= 0 && !t->path)
                r = -EBADMSG;
        return r;
}

/* One managed object "oa{sa{sv}}". */
static int read_object(sd_bus_message *m, void *userdata) {
        const char *object;
        int r;

        r = sd_bus_message_read(m, "o", &object);
        if (r < 0)
                return r;
        return read_dict(m, "sa{sv}", read_interface, userdata);
}

/* Every tenant with its properties, in tree order: one GetManagedObjects. */
int ctl_bus_get_tenants(sd_bus *bus, struct ctl_tenant_set *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct ctl_tenant_set s = {};
        int r;

        r = sd_bus_call_method(bus, CTL_BUS_NAME, CTL_MANAGER_PATH, "org.freedesktop.DBus.ObjectManager",
                               "GetManagedObjects", &error, &reply, NULL);
        if (r < 0)
                return ctl_bus_log_error("cannot list the tenants", &error, r);

        r = read_dict(reply, "oa{sa{sv}}", read_object, &(struct tenants_ctx) { .s = &s });
        if (r < 0) {
                ctl_tenant_set_done(&s);
                ctl_log_error("cannot parse the tenant list: %s", strerror(-r));
                return r;
        }
        qsort(s.t, s.n, sizeof *s.t, tenant_info_compare);
        *ret = s;
        return 0;
}

/* Stats of every tenant of @s: one DumpStats. */
int ctl_bus_get_all_stats(sd_bus *bus, struct ctl_tenant_set *s) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = ctl_bus_call_manager(bus, "DumpStats", &error, &reply, NULL);
        if (r < 0)
                return ctl_bus_log_error("cannot read the statistics", &error, r);
        r = sd_bus_message_enter_container(reply, 'a', "(sa(st))");
        if (r < 0)
                goto fail;
        while ((r = sd_bus_message_enter_container(reply, 'r', "sa(st)")) > 0) {
                struct ctl_tenant *t;
                struct ctl_kvlist l;
                const char *path;

                r = sd_bus_message_read(reply, "s", &path);
                if (r < 0)
                        goto fail;
                r = read_kvlist(reply, &l);
                if (r < 0)
                        goto fail;
                t = ctl_tenant_set_find(s, path);
                if (t) {
                        ctl_kvlist_done(&t->stat);
                        t->stat = l;
                } else
                        ctl_kvlist_done(&l); /* created since the listing */
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        goto fail;
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                return 0;
fail:
        ctl_log_error("cannot parse the statistics: %s", strerror(-r));
        return r;
}

/* ---- everything in one call: DumpStatsCompact ---- */

/* For each name of @names, the index of its entry in tenant_props (a
 * number), or -1: looked up once per reply, not once per tenant. */
static void compact_prop_map(char **names, size_t n, int *ret) {
        for (size_t i = 0; i < n; i++) {
                ret[i] = -1;
                for (size_t k = 0; k < ELEMENTSOF(tenant_props); k++)
                        if (strcmp(tenant_props[k].name, names[i]) == 0 && tenant_props[k].type != 's')
                                ret[i] = (int) k;
        }
}

/* The properties of @t from @vals (an array of t of DumpStatsCompact()),
 * through @map (compact_prop_map()). */
static void compact_props(struct ctl_tenant *t, const int *map, const uint64_t *vals, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const struct prop_map *p;
                char *where;

                if (map[i] < 0)
                        continue;
                p = &tenant_props[map[i]];
                where = (char *) t + p->offset;
                if (p->type == 't')
                        *(uint64_t *) where = vals[i];
                else
                        *(uint32_t *) where = (uint32_t) vals[i];
        }
}

/* A kvlist of @n values from @vals under the shared @keys. */
static int compact_kvlist(char **keys, size_t nkeys, const uint64_t *vals, size_t n, struct ctl_kvlist *ret) {
        if (n > nkeys)
                return -EBADMSG;
        *ret = (struct ctl_kvlist) { .shared_keys = true };
        if (n == 0)
                return 0;
        ret->v = malloc(n * sizeof(*ret->v));
        if (!ret->v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                ret->v[i] = (struct ctl_kv) { .key = keys[i], .value = vals[i] };
        ret->n = n;
        return 0;
}

static void strv_freep(char ***v) {
        for (size_t i = 0; *v && (*v)[i]; i++)
                free((*v)[i]);
        free(*v);
        *v = NULL;
}

static size_t strv_length(char **v) {
        size_t n = 0;

        while (v && v[n])
                n++;
        return n;
}

/* The three name lists, then the tenants, of a DumpStatsCompact() reply. */
static int read_compact(sd_bus_message *reply, struct ctl_tenant_set *s) {
        _cleanup_(strv_freep) char **props = NULL;
        _cleanup_(freep) int *pmap = NULL;
        char **stat_keys = NULL, **event_keys = NULL;
        size_t nprops, nstat, nevents, alloc = 0;
        int r;

        r = sd_bus_message_read_strv(reply, &props);
        if (r < 0)
                return r;
        r = sd_bus_message_read_strv(reply, &stat_keys);
        if (r < 0)
                return r;
        r = sd_bus_message_read_strv(reply, &event_keys);
        if (r < 0) {
                strv_freep(&stat_keys);
                return r;
        }
        nprops = strv_length(props);
        nstat = strv_length(stat_keys);
        nevents = strv_length(event_keys);
        /* One list owned by the set: the stat keys, then the event keys. */
        s->keys = realloc(stat_keys, (nstat + nevents + 1) * sizeof(char *));
        if (!s->keys) {
                s->keys = stat_keys;
                strv_freep(&event_keys);
                return -ENOMEM;
        }
        if (event_keys)
                memcpy(s->keys + nstat, event_keys, (nevents + 1) * sizeof(char *));
        else
                s->keys[nstat] = NULL;
        free(event_keys); /* the strings moved into s->keys */
        event_keys = s->keys + nstat;
        stat_keys = s->keys;
        pmap = calloc(nprops ? nprops : 1, sizeof(*pmap));
        if (!pmap)
                return -ENOMEM;
        compact_prop_map(props, nprops, pmap);

        r = sd_bus_message_enter_container(reply, 'a', "(satatat)");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(reply, 'r', "satatat")) > 0) {
                const uint64_t *pv, *sv, *ev;
                size_t pn, sn, en;
                struct ctl_tenant *t;
                const char *path;

                r = sd_bus_message_read_basic(reply, 's', &path);
                if (r < 0)
                        return r;
                r = sd_bus_message_read_array(reply, 't', (const void **) &pv, &pn);
                if (r < 0)
                        return r;
                r = sd_bus_message_read_array(reply, 't', (const void **) &sv, &sn);
                if (r < 0)
                        return r;
                r = sd_bus_message_read_array(reply, 't', (const void **) &ev, &en);
                if (r < 0)
                        return r;
                pn /= sizeof(uint64_t), sn /= sizeof(uint64_t), en /= sizeof(uint64_t);
                if (pn > nprops)
                        return -EBADMSG;
                t = tenant_set_add(s, &alloc);
                if (!t)
                        return -ENOMEM;
                t->path = strdup(path);
                if (!t->path)
                        return -ENOMEM;
                compact_props(t, pmap, pv, pn);
                r = compact_kvlist(stat_keys, nstat, sv, sn, &t->stat);
                if (r < 0)
                        return r;
                r = compact_kvlist(event_keys, nevents, ev, en, &t->events);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(reply);
}

int ctl_bus_get_all_compact(sd_bus *bus, struct ctl_tenant_set *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct ctl_tenant_set s = {};
        int r;

        r = ctl_bus_call_manager(bus, "DumpStatsCompact", &error, &reply, NULL);
        if (r < 0 && sd_bus_error_has_name(&error, SD_BUS_ERROR_UNKNOWN_METHOD))
                return -EOPNOTSUPP;
        if (r < 0)
                return ctl_bus_log_error("cannot read the statistics", &error, r);
        r = read_compact(reply, &s);
        if (r < 0) {
                ctl_tenant_set_done(&s);
                ctl_log_error("cannot parse the statistics: %s", strerror(-r));
                return r;
        }
        qsort(s.t, s.n, sizeof *s.t, tenant_info_compare);
        *ret = s;
        return 0;
}

int ctl_bus_get_kvlist(sd_bus *bus, const char *member, const char *path, struct ctl_kvlist *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = ctl_bus_call_manager(bus, member, &error, &reply, "s", path);
        if (r < 0) {
                char what[256];
                snprintf(what, sizeof what, "%s of '%s'", strcmp(member, "GetEvents") == 0 ? "events" : "stat",
                         path);
                return ctl_bus_log_error(what, &error, r);
        }
        r = read_kvlist(reply, ret);
        if (r < 0)
                ctl_log_error("cannot parse the reply of %s: %s", member, strerror(-r));
        return r;
}

/* Resolve @path with the daemon (GetTenant: it normalises and says what is
 * wrong) into @t: the canonical path, and with @props the properties. */
int ctl_bus_tenant_object(sd_bus *bus, const char *path, char **ret_object, char **ret_path) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *object;
        char what[256];
        int r;

        snprintf(what, sizeof what, "tenant '%s'", path);
        r = ctl_bus_call_manager(bus, "GetTenant", &error, &reply, "s", path);
        if (r < 0)
                return ctl_bus_log_error(what, &error, r);
        r = sd_bus_message_read(reply, "o", &object);
        if (r < 0)
                return r;
        r = sd_bus_path_decode(object, CTL_MANAGER_PATH "/tenant", ret_path);
        if (r <= 0) {
                ctl_log_error("%s: unexpected object path %s", what, object);
                return -EBADMSG;
        }
        *ret_object = strdup(object);
        if (!*ret_object) {
                free(*ret_path);
                *ret_path = NULL;
                return -ENOMEM;
        }
        return 0;
}

int ctl_bus_get_one_tenant(sd_bus *bus, const char *path, bool props, struct ctl_tenant *t) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *all = NULL;
        _cleanup_(freep) char *canonical = NULL, *object = NULL;
        char what[256];
        int r;

        r = ctl_bus_tenant_object(bus, path, &object, &canonical);
        if (r < 0)
                return r;
        snprintf(what, sizeof what, "tenant '%s'", path);
        *t = (struct ctl_tenant) {};
        if (props) {
                r = sd_bus_call_method(bus, CTL_BUS_NAME, object, "org.freedesktop.DBus.Properties", "GetAll", &error,
                                       &all, "s", CTL_TENANT_IFACE);
                if (r < 0)
                        return ctl_bus_log_error(what, &error, r);
                r = read_props(all, tenant_props, ELEMENTSOF(tenant_props), t);
                if (r < 0) {
                        free(t->path);
                        ctl_log_error("%s: cannot parse the properties: %s", what, strerror(-r));
                        return r;
                }
        }
        free(t->path);
        t->path = TAKE_PTR(canonical);
        return 0;
}

