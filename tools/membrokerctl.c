/* SPDX-License-Identifier: MIT */
/*
 * membrokerctl - command-line front end of membrokerd over D-Bus, in the
 * manner of oomctl, systemd-cgls and systemd-cgtop.  Every figure comes from
 * the org.membroker1 API (design.md §6); nothing here knows the daemon's
 * internals.
 *
 *   membrokerctl [--system|--user|--address ADDRESS] [--json] [--bytes] VERB ...
 *
 * Exit status: 0 on success, 1 when the daemon or the bus refused or failed
 * (the D-Bus error message is printed), 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <langinfo.h>
#include <locale.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#include "ctl-util.h"
#include "macros.h"

#define BUS_NAME "org.membroker1"
#define MANAGER_PATH "/org/membroker1"
#define MANAGER_IFACE "org.membroker1.Manager"
#define TENANT_IFACE "org.membroker1.Tenant"

#define EXIT_USAGE 2
#define TOP_DEFAULT_DELAY_SEC 1.0

enum bus_kind {
        CTL_BUS_SYSTEM,
        CTL_BUS_USER,
        CTL_BUS_ADDRESS,
};

enum output_format {
        FORMAT_TEXT,
        FORMAT_JSON,
        FORMAT_OPENMETRICS,
};

static struct {
        enum bus_kind bus_kind;
        const char *address;
        enum output_format format;
        bool bytes;
        bool runtime;
        uint64_t iterations; /* 0: forever */
        double delay_sec;
        bool help;
} arg = {
        .bus_kind = CTL_BUS_SYSTEM,
        .format = FORMAT_TEXT,
        .delay_sec = TOP_DEFAULT_DELAY_SEC,
};

static const char *program = "membrokerctl";

static void log_error(const char *fmt, ...) _printf_(1, 2);
static void log_error(const char *fmt, ...) {
        va_list ap;

        fprintf(stderr, "%s: ", program);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/* Report a failed call: the daemon's message when there is one. */
static int log_bus_error(const char *what, const sd_bus_error *error, int r) {
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_SERVICE_UNKNOWN) ||
            sd_bus_error_has_name(error, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                log_error("%s: membrokerd is not running on this bus (%s is not owned)", what, BUS_NAME);
        else if (error && error->message)
                log_error("%s: %s", what, error->message);
        else
                log_error("%s: %s", what, strerror(-r));
        return r;
}

/* ---- bus access ---- */

static const char *bus_description(void) {
        switch (arg.bus_kind) {
        case CTL_BUS_USER:
                return "the user bus";
        case CTL_BUS_ADDRESS:
                return arg.address;
        default:
                return "the system bus";
        }
}

static int bus_open(sd_bus **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        switch (arg.bus_kind) {
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
                r = sd_bus_set_address(bus, arg.address);
                if (r < 0)
                        break;
                r = sd_bus_set_bus_client(bus, true);
                if (r < 0)
                        break;
                r = sd_bus_start(bus);
        }
        if (r < 0) {
                log_error("cannot connect to %s: %s", bus_description(), strerror(-r));
                return r;
        }
        *ret = TAKE_PTR(bus);
        return 0;
}

static int call_manager(sd_bus *bus, const char *member, sd_bus_error *error, sd_bus_message **reply,
                        const char *types, ...) {
        va_list ap;
        int r;

        va_start(ap, types);
        r = sd_bus_call_methodv(bus, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, member, error, reply, types, ap);
        va_end(ap);
        return r;
}

/* ---- property maps ---- */

struct prop_map {
        const char *name;
        char type; /* 's', 't' or 'u' */
        size_t offset;
};

static int read_props(sd_bus_message *m, const struct prop_map *map, size_t n, void *obj) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const struct prop_map *p = NULL;
                const char *name, *contents;
                char type;

                r = sd_bus_message_read(m, "s", &name);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++)
                        if (strcmp(map[i].name, name) == 0)
                                p = &map[i];
                r = sd_bus_message_peek_type(m, &type, &contents);
                if (r < 0)
                        return r;
                if (!p || contents[0] != p->type || contents[1] != '\0')
                        r = sd_bus_message_skip(m, "v");
                else {
                        char *where = (char *) obj + p->offset;
                        if (p->type == 's') {
                                const char *s;
                                r = sd_bus_message_read(m, "v", "s", &s);
                                if (r >= 0) {
                                        free(*(char **) where);
                                        *(char **) where = strdup(s);
                                        if (!*(char **) where)
                                                return -ENOMEM;
                                }
                        } else
                                r = sd_bus_message_read(m, "v", contents, where);
                }
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

struct manager_info {
        char *version;
        uint64_t page_size, capacity, current, flushes, flushed_nodes;
        uint32_t charge_batch, ntenants, nclients;
};

static const struct prop_map manager_props[] = {
        { "Version", 's', offsetof(struct manager_info, version) },
        { "PageSize", 't', offsetof(struct manager_info, page_size) },
        { "Capacity", 't', offsetof(struct manager_info, capacity) },
        { "MemoryCurrent", 't', offsetof(struct manager_info, current) },
        { "StatsFlushes", 't', offsetof(struct manager_info, flushes) },
        { "StatsFlushedNodes", 't', offsetof(struct manager_info, flushed_nodes) },
        { "ChargeBatch", 'u', offsetof(struct manager_info, charge_batch) },
        { "NTenants", 'u', offsetof(struct manager_info, ntenants) },
        { "NClients", 'u', offsetof(struct manager_info, nclients) },
};

static int get_manager_info(sd_bus *bus, struct manager_info *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_call_method(bus, BUS_NAME, MANAGER_PATH, "org.freedesktop.DBus.Properties", "GetAll", &error,
                               &reply, "s", MANAGER_IFACE);
        if (r < 0)
                return log_bus_error("cannot read the broker's properties", &error, r);
        *ret = (struct manager_info) {};
        r = read_props(reply, manager_props, ELEMENTSOF(manager_props), ret);
        if (r < 0) {
                log_error("cannot parse the broker's properties: %s", strerror(-r));
                return r;
        }
        return 0;
}

static void manager_info_done(struct manager_info *mi) {
        free(mi->version);
        mi->version = NULL;
}

/* ---- tenants ---- */

struct kv {
        char *key;
        uint64_t value;
};

struct kvlist {
        struct kv *v;
        size_t n;
};

static void kvlist_done(struct kvlist *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->v[i].key);
        free(l->v);
        *l = (struct kvlist) {};
}

static const struct kv *kvlist_find(const struct kvlist *l, const char *key) {
        for (size_t i = 0; i < l->n; i++)
                if (strcmp(l->v[i].key, key) == 0)
                        return &l->v[i];
        return NULL;
}

/* Read an a(st). */
static int read_kvlist(sd_bus_message *m, struct kvlist *ret) {
        struct kvlist l = {};
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
                        struct kv *nv = realloc(l.v, na * sizeof *nv);
                        if (!nv) {
                                kvlist_done(&l);
                                return -ENOMEM;
                        }
                        l.v = nv;
                        alloc = na;
                }
                l.v[l.n].key = strdup(key);
                if (!l.v[l.n].key) {
                        kvlist_done(&l);
                        return -ENOMEM;
                }
                l.v[l.n++].value = value;
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r < 0) {
                kvlist_done(&l);
                return r;
        }
        *ret = l;
        return 0;
}

struct tenant_info {
        char *path;
        uint64_t current, peak, max, high, low, min, emin, elow;
        uint32_t charge_batch, nclients;
        struct kvlist stat;
        struct kvlist events;
        /* tree drawing */
        size_t parent;
        bool last_child;
};

static const struct prop_map tenant_props[] = {
        { "Path", 's', offsetof(struct tenant_info, path) },
        { "MemoryCurrent", 't', offsetof(struct tenant_info, current) },
        { "MemoryPeak", 't', offsetof(struct tenant_info, peak) },
        { "MemoryMax", 't', offsetof(struct tenant_info, max) },
        { "MemoryHigh", 't', offsetof(struct tenant_info, high) },
        { "MemoryLow", 't', offsetof(struct tenant_info, low) },
        { "MemoryMin", 't', offsetof(struct tenant_info, min) },
        { "EffectiveMemoryMin", 't', offsetof(struct tenant_info, emin) },
        { "EffectiveMemoryLow", 't', offsetof(struct tenant_info, elow) },
        { "ChargeBatch", 'u', offsetof(struct tenant_info, charge_batch) },
        { "NClients", 'u', offsetof(struct tenant_info, nclients) },
};

struct tenant_set {
        struct tenant_info *t;
        size_t n;
};

static void tenant_set_done(struct tenant_set *s) {
        for (size_t i = 0; i < s->n; i++) {
                free(s->t[i].path);
                kvlist_done(&s->t[i].stat);
                kvlist_done(&s->t[i].events);
        }
        free(s->t);
        *s = (struct tenant_set) {};
}

static int tenant_info_compare(const void *a, const void *b) {
        const struct tenant_info *x = a, *y = b;
        return ctl_path_compare(x->path, y->path);
}

static struct tenant_info *tenant_set_find(struct tenant_set *s, const char *path) {
        struct tenant_info key = { .path = (char *) path };
        return bsearch(&key, s->t, s->n, sizeof key, tenant_info_compare);
}

/* Every tenant with its properties, in tree order: one GetManagedObjects. */
static int get_tenants(sd_bus *bus, struct tenant_set *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct tenant_set s = {};
        size_t alloc = 0;
        int r;

        r = sd_bus_call_method(bus, BUS_NAME, MANAGER_PATH, "org.freedesktop.DBus.ObjectManager",
                               "GetManagedObjects", &error, &reply, NULL);
        if (r < 0)
                return log_bus_error("cannot list the tenants", &error, r);

        r = sd_bus_message_enter_container(reply, 'a', "{oa{sa{sv}}}");
        if (r < 0)
                goto fail;
        while ((r = sd_bus_message_enter_container(reply, 'e', "oa{sa{sv}}")) > 0) {
                const char *object;

                r = sd_bus_message_read(reply, "o", &object);
                if (r < 0)
                        goto fail;
                r = sd_bus_message_enter_container(reply, 'a', "{sa{sv}}");
                if (r < 0)
                        goto fail;
                while ((r = sd_bus_message_enter_container(reply, 'e', "sa{sv}")) > 0) {
                        const char *iface;

                        r = sd_bus_message_read(reply, "s", &iface);
                        if (r < 0)
                                goto fail;
                        if (strcmp(iface, TENANT_IFACE) != 0)
                                r = sd_bus_message_skip(reply, "a{sv}");
                        else {
                                if (s.n == alloc) {
                                        size_t na = alloc ? 2 * alloc : 16;
                                        struct tenant_info *nt = realloc(s.t, na * sizeof *nt);
                                        if (!nt) {
                                                r = -ENOMEM;
                                                goto fail;
                                        }
                                        s.t = nt;
                                        alloc = na;
                                }
                                s.t[s.n] = (struct tenant_info) {};
                                s.n++;
                                r = read_props(reply, tenant_props, ELEMENTSOF(tenant_props), &s.t[s.n - 1]);
                                if (r >= 0 && !s.t[s.n - 1].path)
                                        r = -EBADMSG;
                        }
                        if (r < 0)
                                goto fail;
                        r = sd_bus_message_exit_container(reply);
                        if (r < 0)
                                goto fail;
                }
                if (r < 0)
                        goto fail;
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        goto fail;
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        goto fail;
        }
        if (r < 0)
                goto fail;

        qsort(s.t, s.n, sizeof *s.t, tenant_info_compare);
        *ret = s;
        return 0;
fail:
        tenant_set_done(&s);
        log_error("cannot parse the tenant list: %s", strerror(-r));
        return r;
}

/* Stats of every tenant of @s: one DumpStats. */
static int get_all_stats(sd_bus *bus, struct tenant_set *s) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = call_manager(bus, "DumpStats", &error, &reply, NULL);
        if (r < 0)
                return log_bus_error("cannot read the statistics", &error, r);
        r = sd_bus_message_enter_container(reply, 'a', "(sa(st))");
        if (r < 0)
                goto fail;
        while ((r = sd_bus_message_enter_container(reply, 'r', "sa(st)")) > 0) {
                struct tenant_info *t;
                struct kvlist l;
                const char *path;

                r = sd_bus_message_read(reply, "s", &path);
                if (r < 0)
                        goto fail;
                r = read_kvlist(reply, &l);
                if (r < 0)
                        goto fail;
                t = tenant_set_find(s, path);
                if (t) {
                        kvlist_done(&t->stat);
                        t->stat = l;
                } else
                        kvlist_done(&l); /* created since the listing */
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        goto fail;
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                return 0;
fail:
        log_error("cannot parse the statistics: %s", strerror(-r));
        return r;
}

static int get_kvlist(sd_bus *bus, const char *member, const char *path, struct kvlist *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = call_manager(bus, member, &error, &reply, "s", path);
        if (r < 0) {
                char what[256];
                snprintf(what, sizeof what, "%s of '%s'", strcmp(member, "GetEvents") == 0 ? "events" : "stat",
                         path);
                return log_bus_error(what, &error, r);
        }
        r = read_kvlist(reply, ret);
        if (r < 0)
                log_error("cannot parse the reply of %s: %s", member, strerror(-r));
        return r;
}

/* ---- output helpers ---- */

static bool use_utf8(void) {
        const char *cs = nl_langinfo(CODESET);
        return cs && strcmp(cs, "UTF-8") == 0;
}

static const char *size_str(char *buf, uint64_t v) {
        return ctl_format_bytes(buf, v, arg.bytes);
}

/* A value of a stat key, for a text table. */
static const char *stat_value_str(char *buf, const char *key, uint64_t v) {
        if (ctl_stat_key_unit(key) == CTL_UNIT_BYTES)
                return ctl_format_bytes(buf, v, arg.bytes);
        snprintf(buf, CTL_FORMAT_BYTES_MAX, "%" PRIu64, v);
        return buf;
}

static void json_kv_object(FILE *f, const struct kvlist *l) {
        fputc('{', f);
        for (size_t i = 0; i < l->n; i++) {
                if (i)
                        fputc(',', f);
                ctl_json_string(f, l->v[i].key);
                fprintf(f, ":%" PRIu64, l->v[i].value);
        }
        fputc('}', f);
}

/* ---- status ---- */

static int verb_status(sd_bus *bus, int argc, char **argv) {
        struct manager_info mi;
        char b1[CTL_FORMAT_BYTES_MAX], b2[CTL_FORMAT_BYTES_MAX], b3[CTL_FORMAT_BYTES_MAX];
        int r;

        r = get_manager_info(bus, &mi);
        if (r < 0)
                return r;
        if (arg.format == FORMAT_JSON) {
                fputs("{\"Version\":", stdout);
                ctl_json_string(stdout, mi.version ? mi.version : "");
                printf(",\"PageSize\":%" PRIu64 ",\"Capacity\":%" PRIu64 ",\"MemoryCurrent\":%" PRIu64
                       ",\"ChargeBatch\":%" PRIu32 ",\"NTenants\":%" PRIu32 ",\"NClients\":%" PRIu32
                       ",\"StatsFlushes\":%" PRIu64 ",\"StatsFlushedNodes\":%" PRIu64 "}\n",
                       mi.page_size, mi.capacity, mi.current, mi.charge_batch, mi.ntenants, mi.nclients,
                       mi.flushes, mi.flushed_nodes);
        } else {
                double pct = mi.capacity && mi.capacity != CTL_LIMIT_MAX ? 100.0 * (double) mi.current /
                                                                                   (double) mi.capacity
                                                                         : 0.0;
                printf("membrokerd %s on %s\n", mi.version ? mi.version : "?", bus_description());
                printf("      Capacity: %s\n", size_str(b1, mi.capacity));
                printf("       Current: %s (%.1f%% of capacity)\n", size_str(b2, mi.current), pct);
                printf("     Page size: %s\n", size_str(b3, mi.page_size));
                printf("  Charge batch: %" PRIu32 " pages\n", mi.charge_batch);
                printf("       Tenants: %" PRIu32 "\n", mi.ntenants);
                printf("       Clients: %" PRIu32 "\n", mi.nclients);
                printf("  Stat flushes: %" PRIu64 " (%" PRIu64 " tenant folds)\n", mi.flushes, mi.flushed_nodes);
        }
        manager_info_done(&mi);
        return 0;
}

/* ---- tree ---- */

static void tree_link(struct tenant_set *s) {
        char parent[4096];

        for (size_t i = 0; i < s->n; i++) {
                struct tenant_info *p;

                s->t[i].parent = SIZE_MAX;
                s->t[i].last_child = true;
                if (ctl_path_parent(s->t[i].path, parent, sizeof parent) < 0)
                        continue;
                p = tenant_set_find(s, parent);
                if (p)
                        s->t[i].parent = (size_t) (p - s->t);
        }
        /* In tree order a later sibling follows the whole subtree of an
         * earlier one, so the last child is the last index with that parent. */
        for (size_t i = 0; i < s->n; i++)
                for (size_t j = i + 1; j < s->n; j++)
                        if (s->t[j].parent == s->t[i].parent && s->t[i].parent != SIZE_MAX) {
                                s->t[i].last_child = false;
                                break;
                        }
}

/* The tree-drawing prefix of @i (a descendant of @top) into @buf. */
static void tree_prefix(const struct tenant_set *s, size_t top, size_t i, char *buf, size_t size) {
        bool utf8 = use_utf8();
        const char *glyph_branch = utf8 ? "\u251c\u2500" : "|-";
        const char *glyph_last = utf8 ? "\u2514\u2500" : "`-";
        const char *glyph_vert = utf8 ? "\u2502 " : "| ";
        size_t chain[64], n = 0;

        buf[0] = '\0';
        if (i == top)
                return;
        /* Ancestors strictly between @top and @i, innermost first. */
        for (size_t a = s->t[i].parent; a != SIZE_MAX && a != top && n < ELEMENTSOF(chain); a = s->t[a].parent)
                chain[n++] = a;
        while (n > 0) {
                size_t a = chain[--n];
                strncat(buf, s->t[a].last_child ? "  " : glyph_vert, size - strlen(buf) - 1);
        }
        strncat(buf, s->t[i].last_child ? glyph_last : glyph_branch, size - strlen(buf) - 1);
}

/* Display width of a UTF-8 string (code points; our glyphs are narrow). */
static size_t display_width(const char *s) {
        size_t w = 0;
        for (; *s; s++)
                if (((unsigned char) *s & 0xc0) != 0x80)
                        w++;
        return w;
}

static void json_tenant(FILE *f, const struct tenant_info *t) {
        fputs("{\"Path\":", f);
        ctl_json_string(f, t->path);
        fprintf(f,
                ",\"MemoryCurrent\":%" PRIu64 ",\"MemoryPeak\":%" PRIu64 ",\"MemoryMax\":%" PRIu64
                ",\"MemoryHigh\":%" PRIu64 ",\"MemoryLow\":%" PRIu64 ",\"MemoryMin\":%" PRIu64
                ",\"EffectiveMemoryLow\":%" PRIu64 ",\"EffectiveMemoryMin\":%" PRIu64 ",\"ChargeBatch\":%" PRIu32
                ",\"NClients\":%" PRIu32 "}",
                t->current, t->peak, t->max, t->high, t->low, t->min, t->elow, t->emin, t->charge_batch,
                t->nclients);
}

static int verb_tree(sd_bus *bus, int argc, char **argv) {
        _cleanup_(tenant_set_done) struct tenant_set s = {};
        const char *root = argc > 1 ? argv[1] : "/";
        char prefix[512], name[4096 + 512];
        size_t width = strlen("TENANT");
        struct tenant_info *top;
        int r;

        r = get_tenants(bus, &s);
        if (r < 0)
                return r;
        if (strcmp(root, "/") != 0) {
                /* Accept "/db/" like the daemon does. */
                while (*root == '/')
                        root++;
                snprintf(name, sizeof name, "%s", root);
                for (size_t l = strlen(name); l > 0 && name[l - 1] == '/'; l--)
                        name[l - 1] = '\0';
                root = name[0] ? name : "/";
        }
        top = tenant_set_find(&s, root);
        if (!top) {
                log_error("no tenant '%s'", root);
                return -ENOENT;
        }
        tree_link(&s);

        size_t first = (size_t) (top - s.t), end = first + 1;
        while (end < s.n && ctl_path_depth(s.t[end].path) > ctl_path_depth(top->path))
                end++;
        if (strcmp(top->path, "/") == 0)
                end = s.n;

        if (arg.format == FORMAT_JSON) {
                fputc('[', stdout);
                for (size_t i = first; i < end; i++) {
                        if (i > first)
                                fputc(',', stdout);
                        json_tenant(stdout, &s.t[i]);
                }
                fputs("]\n", stdout);
                return 0;
        }

        for (size_t i = first; i < end; i++) {
                tree_prefix(&s, first, i, prefix, sizeof prefix);
                size_t w = display_width(prefix) + strlen(i == first ? s.t[i].path : ctl_path_name(s.t[i].path));
                if (w > width)
                        width = w;
        }
        printf("%-*s %10s %10s %10s %10s %10s %10s %7s\n", (int) width, "TENANT", "CURRENT", "PEAK", "MIN", "LOW",
               "HIGH", "MAX", "CLIENTS");
        for (size_t i = first; i < end; i++) {
                const struct tenant_info *t = &s.t[i];
                char b[6][CTL_FORMAT_BYTES_MAX];
                /* The top line names the whole path, the others their last component. */
                const char *label = i == first ? t->path : ctl_path_name(t->path);

                tree_prefix(&s, first, i, prefix, sizeof prefix);
                printf("%s%s%*s %10s %10s %10s %10s %10s %10s %7" PRIu32 "\n", prefix, label,
                       (int) (width - display_width(prefix) - strlen(label)), "", size_str(b[0], t->current),
                       size_str(b[1], t->peak), size_str(b[2], t->min), size_str(b[3], t->low),
                       size_str(b[4], t->high), size_str(b[5], t->max), t->nclients);
        }
        return 0;
}

/* ---- stat ---- */

/* OpenMetrics family name of a stat key, its type and unit. */
static void om_family(const char *key, char *name, size_t size, const char **type, const char **unit,
                      bool *seconds) {
        enum ctl_stat_unit u = ctl_stat_key_unit(key);
        char base[128];
        size_t len = strlen(key);
        bool local = len > 6 && strcmp(key + len - 6, "_local") == 0;
        char *p;

        snprintf(base, sizeof base, "%.*s", (int) (local ? len - 6 : len), key);
        for (p = base; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
                        *p = '_';
        *seconds = false;
        switch (u) {
        case CTL_UNIT_BYTES:
                snprintf(name, size, "membroker_%s%s_bytes", base, local ? "_local" : "");
                *type = "gauge";
                *unit = "bytes";
                break;
        case CTL_UNIT_USEC: {
                size_t bl = strlen(base);
                if (bl > 5 && strcmp(base + bl - 5, "_usec") == 0)
                        base[bl - 5] = '\0';
                snprintf(name, size, "membroker_%s%s_seconds", base, local ? "_local" : "");
                *type = "counter";
                *unit = "seconds";
                *seconds = true;
                break;
        }
        case CTL_UNIT_COUNT:
                snprintf(name, size, "membroker_%s%s", base, local ? "_local" : "");
                *type = "counter";
                *unit = NULL;
                break;
        default:
                snprintf(name, size, "membroker_%s%s", base, local ? "_local" : "");
                *type = "gauge";
                *unit = NULL;
        }
}

static void om_header(const char *name, const char *type, const char *unit, const char *help) {
        printf("# TYPE %s %s\n", name, type);
        if (unit)
                printf("# UNIT %s %s\n", name, unit);
        printf("# HELP %s %s\n", name, help);
}

static void om_sample_u64(const char *name, const char *suffix, const char *tenant, const char *extra_label,
                          const char *extra_value, uint64_t v, bool limit) {
        printf("%s%s{tenant=", name, suffix);
        ctl_openmetrics_label(stdout, tenant);
        if (extra_label) {
                printf(",%s=", extra_label);
                ctl_openmetrics_label(stdout, extra_value);
        }
        if (limit && v == CTL_LIMIT_MAX)
                printf("} +Inf\n");
        else
                printf("} %" PRIu64 "\n", v);
}

static void print_openmetrics(const struct tenant_set *s, const size_t *sel, size_t nsel) {
        static const struct {
                const char *name, *help;
                size_t offset;
                bool limit;
        } gauges[] = {
                { "membroker_memory_current_bytes", "Memory charged to the tenant and its descendants.",
                  offsetof(struct tenant_info, current), false },
                { "membroker_memory_peak_bytes", "Highest MemoryCurrent seen.", offsetof(struct tenant_info, peak),
                  false },
                { "membroker_memory_max_bytes", "Hard limit (MemoryMax=); +Inf when unlimited.",
                  offsetof(struct tenant_info, max), true },
                { "membroker_memory_high_bytes", "Throttling limit (MemoryHigh=); +Inf when unlimited.",
                  offsetof(struct tenant_info, high), true },
                { "membroker_memory_low_bytes", "Best-effort protection (MemoryLow=).",
                  offsetof(struct tenant_info, low), false },
                { "membroker_memory_min_bytes", "Hard protection (MemoryMin=).", offsetof(struct tenant_info, min),
                  false },
        };
        const struct kvlist *keys = NULL;

        for (size_t g = 0; g < ELEMENTSOF(gauges); g++) {
                om_header(gauges[g].name, "gauge", "bytes", gauges[g].help);
                for (size_t i = 0; i < nsel; i++) {
                        const struct tenant_info *t = &s->t[sel[i]];
                        om_sample_u64(gauges[g].name, "", t->path, NULL, NULL,
                                      *(const uint64_t *) ((const char *) t + gauges[g].offset), gauges[g].limit);
                }
        }
        om_header("membroker_clients", "gauge", NULL, "Clients attached to the tenant.");
        for (size_t i = 0; i < nsel; i++)
                om_sample_u64("membroker_clients", "", s->t[sel[i]].path, NULL, NULL, s->t[sel[i]].nclients, false);

        /* memory.stat: the key set of the first tenant (all share it). */
        for (size_t i = 0; i < nsel && !keys; i++)
                if (s->t[sel[i]].stat.n > 0)
                        keys = &s->t[sel[i]].stat;
        for (size_t k = 0; keys && k < keys->n; k++) {
                const char *key = keys->v[k].key, *type, *unit;
                char name[256], help[256];
                bool seconds;

                om_family(key, name, sizeof name, &type, &unit, &seconds);
                snprintf(help, sizeof help, "memory.stat key %s of the tenant.", key);
                om_header(name, type, unit, help);
                for (size_t i = 0; i < nsel; i++) {
                        const struct tenant_info *t = &s->t[sel[i]];
                        const struct kv *e = kvlist_find(&t->stat, key);
                        if (!e)
                                continue;
                        printf("%s%s{tenant=", name, strcmp(type, "counter") == 0 ? "_total" : "");
                        ctl_openmetrics_label(stdout, t->path);
                        if (seconds)
                                printf("} %" PRIu64 ".%06" PRIu64 "\n", e->value / 1000000, e->value % 1000000);
                        else
                                printf("} %" PRIu64 "\n", e->value);
                }
        }

        for (int local = 0; local < 2; local++) {
                const char *name = local ? "membroker_memory_events_local" : "membroker_memory_events";
                om_header(name, "counter", NULL,
                          local ? "memory.events.local: events of the tenant itself."
                                : "memory.events: events of the tenant and its descendants.");
                for (size_t i = 0; i < nsel; i++) {
                        const struct tenant_info *t = &s->t[sel[i]];
                        for (size_t k = 0; k < t->events.n; k++) {
                                const char *key = t->events.v[k].key;
                                const char *dot = strstr(key, ".local");
                                char ev[64];
                                if ((dot != NULL) != (local != 0))
                                        continue;
                                snprintf(ev, sizeof ev, "%.*s", dot ? (int) (dot - key) : (int) strlen(key), key);
                                om_sample_u64(name, "_total", t->path, "event", ev, t->events.v[k].value, false);
                        }
                }
        }
        printf("# EOF\n");
}

/* Resolve @path with the daemon (GetTenant: it normalises and says what is
 * wrong) into @t: the canonical path, and with @props the properties. */
static int get_one_tenant(sd_bus *bus, const char *path, bool props, struct tenant_info *t) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *all = NULL;
        _cleanup_(freep) char *canonical = NULL;
        const char *object;
        char what[256];
        int r;

        snprintf(what, sizeof what, "tenant '%s'", path);
        r = call_manager(bus, "GetTenant", &error, &reply, "s", path);
        if (r < 0)
                return log_bus_error(what, &error, r);
        r = sd_bus_message_read(reply, "o", &object);
        if (r < 0)
                return r;
        r = sd_bus_path_decode(object, MANAGER_PATH "/tenant", &canonical);
        if (r <= 0) {
                log_error("%s: unexpected object path %s", what, object);
                return -EBADMSG;
        }
        *t = (struct tenant_info) {};
        if (props) {
                r = sd_bus_call_method(bus, BUS_NAME, object, "org.freedesktop.DBus.Properties", "GetAll", &error,
                                       &all, "s", TENANT_IFACE);
                if (r < 0)
                        return log_bus_error(what, &error, r);
                r = read_props(all, tenant_props, ELEMENTSOF(tenant_props), t);
                if (r < 0) {
                        free(t->path);
                        log_error("%s: cannot parse the properties: %s", what, strerror(-r));
                        return r;
                }
        }
        free(t->path);
        t->path = TAKE_PTR(canonical);
        return 0;
}

static int verb_stat(sd_bus *bus, int argc, char **argv) {
        _cleanup_(tenant_set_done) struct tenant_set s = {};
        _cleanup_(freep) size_t *sel = NULL;
        size_t nsel = 0;
        int r;

        if (argc <= 1) {
                /* Every tenant: its properties and its stat, one call each. */
                r = get_tenants(bus, &s);
                if (r < 0)
                        return r;
                r = get_all_stats(bus, &s);
                if (r < 0)
                        return r;
        } else {
                /* Only the tenants asked for (cheap among thousands). */
                s.t = calloc((size_t) argc, sizeof *s.t);
                if (!s.t)
                        return -ENOMEM;
                for (int a = 1; a < argc; a++) {
                        r = get_one_tenant(bus, argv[a], arg.format == FORMAT_OPENMETRICS, &s.t[s.n]);
                        if (r < 0)
                                return r;
                        s.n++;
                        r = get_kvlist(bus, "GetStat", s.t[s.n - 1].path, &s.t[s.n - 1].stat);
                        if (r < 0)
                                return r;
                }
        }
        sel = calloc(s.n ? s.n : 1, sizeof *sel);
        if (!sel)
                return -ENOMEM;
        for (size_t i = 0; i < s.n; i++)
                sel[nsel++] = i;

        if (arg.format == FORMAT_OPENMETRICS) {
                for (size_t i = 0; i < nsel; i++) {
                        struct tenant_info *t = &s.t[sel[i]];
                        kvlist_done(&t->events);
                        r = get_kvlist(bus, "GetEvents", t->path, &t->events);
                        if (r < 0)
                                return r;
                }
                print_openmetrics(&s, sel, nsel);
                return 0;
        }

        if (arg.format == FORMAT_JSON) {
                fputc('{', stdout);
                for (size_t i = 0; i < nsel; i++) {
                        if (i)
                                fputc(',', stdout);
                        ctl_json_string(stdout, s.t[sel[i]].path);
                        fputc(':', stdout);
                        json_kv_object(stdout, &s.t[sel[i]].stat);
                }
                fputs("}\n", stdout);
                return 0;
        }

        for (size_t i = 0; i < nsel; i++) {
                const struct tenant_info *t = &s.t[sel[i]];
                size_t kw = 0;

                for (size_t k = 0; k < t->stat.n; k++)
                        kw = MB_MAX(kw, strlen(t->stat.v[k].key));
                if (nsel > 1)
                        printf("%s%s:\n", i ? "\n" : "", t->path);
                for (size_t k = 0; k < t->stat.n; k++) {
                        char b[CTL_FORMAT_BYTES_MAX];
                        if (arg.bytes)
                                printf("%s%s %" PRIu64 "\n", nsel > 1 ? "  " : "", t->stat.v[k].key,
                                       t->stat.v[k].value);
                        else
                                printf("%s%-*s %10s\n", nsel > 1 ? "  " : "", (int) kw, t->stat.v[k].key,
                                       stat_value_str(b, t->stat.v[k].key, t->stat.v[k].value));
                }
        }
        return 0;
}

/* ---- events ---- */

static int verb_events(sd_bus *bus, int argc, char **argv) {
        struct kvlist l;
        int r;

        r = get_kvlist(bus, "GetEvents", argv[1], &l);
        if (r < 0)
                return r;
        if (arg.format == FORMAT_JSON) {
                fputc('{', stdout);
                ctl_json_string(stdout, argv[1]);
                fputc(':', stdout);
                json_kv_object(stdout, &l);
                fputs("}\n", stdout);
        } else {
                printf("%-10s %12s %12s\n", "EVENT", "SUBTREE", "LOCAL");
                for (size_t i = 0; i < l.n; i++) {
                        char local_key[128];
                        const struct kv *local;

                        if (strstr(l.v[i].key, ".local"))
                                continue;
                        snprintf(local_key, sizeof local_key, "%s.local", l.v[i].key);
                        local = kvlist_find(&l, local_key);
                        if (local)
                                printf("%-10s %12" PRIu64 " %12" PRIu64 "\n", l.v[i].key, l.v[i].value,
                                       local->value);
                        else
                                printf("%-10s %12" PRIu64 " %12s\n", l.v[i].key, l.v[i].value, "-");
                }
        }
        kvlist_done(&l);
        return 0;
}

/* ---- set / create ---- */

static const char *const limit_keys[] = { "MemoryMax", "MemoryHigh", "MemoryLow", "MemoryMin", "ChargeBatch" };

/* Append Key=Value assignments to @m as a{sv}. */
static int append_settings(sd_bus *bus, sd_bus_message *m, int n, char **assignments) {
        uint64_t capacity = 0;
        bool have_capacity = false;
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        for (int i = 0; i < n; i++) {
                const char *eq = strchr(assignments[i], '='), *value;
                char key[64];
                uint64_t v;
                bool known = false;

                if (!eq || eq == assignments[i] || (size_t) (eq - assignments[i]) >= sizeof key) {
                        log_error("'%s' is not of the form Key=Value", assignments[i]);
                        return -EINVAL;
                }
                memcpy(key, assignments[i], (size_t) (eq - assignments[i]));
                key[eq - assignments[i]] = '\0';
                value = eq + 1;
                for (size_t k = 0; k < ELEMENTSOF(limit_keys); k++)
                        known = known || strcmp(key, limit_keys[k]) == 0;
                if (!known) {
                        log_error("unknown setting '%s' (known: MemoryMax, MemoryHigh, MemoryLow, MemoryMin, "
                                  "ChargeBatch)",
                                  key);
                        return -EINVAL;
                }
                if (strcmp(key, "ChargeBatch") == 0)
                        r = ctl_parse_u64(value, &v);
                else {
                        if (strchr(value, '%') && !have_capacity) {
                                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                                r = sd_bus_get_property_trivial(bus, BUS_NAME, MANAGER_PATH, MANAGER_IFACE,
                                                                "Capacity", &error, 't', &capacity);
                                if (r < 0)
                                        return log_bus_error("cannot read the capacity", &error, r);
                                have_capacity = true;
                        }
                        r = ctl_parse_size(value, capacity, &v);
                }
                if (r < 0) {
                        log_error("invalid value for %s: '%s' (%s)", key, value,
                                  strcmp(key, "ChargeBatch") == 0 ? "a number of pages"
                                                                 : "bytes with K/M/G/T, N% of the capacity, "
                                                                   "or infinity");
                        return -EINVAL;
                }
                r = sd_bus_message_append(m, "{sv}", key, "t", v);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(m);
}

static int call_with_settings(sd_bus *bus, const char *member, const char *path, int n, char **assignments,
                              bool with_runtime, sd_bus_message **ret_reply) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        char what[256];
        int r;

        r = sd_bus_message_new_method_call(bus, &m, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, member);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "s", path);
        if (r < 0)
                return r;
        r = append_settings(bus, m, n, assignments);
        if (r < 0)
                return r;
        if (with_runtime) {
                r = sd_bus_message_append(m, "b", arg.runtime);
                if (r < 0)
                        return r;
        }
        r = sd_bus_call(bus, m, 0, &error, &reply);
        if (r < 0) {
                snprintf(what, sizeof what, "%s '%s'",
                         strcmp(member, "CreateTenant") == 0 ? "cannot create" : "cannot set limits of", path);
                return log_bus_error(what, &error, r);
        }
        if (ret_reply)
                *ret_reply = TAKE_PTR(reply);
        return 0;
}

static int verb_set(sd_bus *bus, int argc, char **argv) {
        return call_with_settings(bus, "SetTenantLimits", argv[1], argc - 2, argv + 2, true, NULL);
}

static int verb_create(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *object;
        int r;

        r = call_with_settings(bus, "CreateTenant", argv[1], argc - 2, argv + 2, false, &reply);
        if (r < 0)
                return r;
        if (sd_bus_message_read(reply, "o", &object) >= 0 && arg.format == FORMAT_JSON) {
                fputs("{\"object\":", stdout);
                ctl_json_string(stdout, object);
                fputs("}\n", stdout);
        }
        return 0;
}

static int verb_remove(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        char what[256];
        int r;

        r = call_manager(bus, "RemoveTenant", &error, NULL, "s", argv[1]);
        if (r < 0) {
                snprintf(what, sizeof what, "cannot remove '%s'", argv[1]);
                return log_bus_error(what, &error, r);
        }
        return 0;
}

static int verb_reload(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = call_manager(bus, "Reload", &error, NULL, NULL);
        if (r < 0)
                return log_bus_error("reload", &error, r);
        return 0;
}

/* ---- reclaim ---- */

static int verb_reclaim(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        char b1[CTL_FORMAT_BYTES_MAX], b2[CTL_FORMAT_BYTES_MAX], what[256];
        uint64_t bytes, reclaimed;
        int r;

        r = ctl_parse_size(argv[2], 0, &bytes);
        if (r < 0 || bytes == CTL_LIMIT_MAX) {
                log_error("invalid size '%s' (bytes with K/M/G/T)", argv[2]);
                return -EINVAL;
        }
        r = call_manager(bus, "Reclaim", &error, &reply, "st", argv[1], bytes);
        if (r < 0) {
                snprintf(what, sizeof what, "cannot reclaim from '%s'", argv[1]);
                return log_bus_error(what, &error, r);
        }
        r = sd_bus_message_read(reply, "t", &reclaimed);
        if (r < 0)
                return r;
        if (arg.format == FORMAT_JSON) {
                fputs("{\"tenant\":", stdout);
                ctl_json_string(stdout, argv[1]);
                printf(",\"requested\":%" PRIu64 ",\"reclaimed\":%" PRIu64 "}\n", bytes, reclaimed);
        } else
                printf("Reclaimed %s of %s from %s\n", size_str(b1, reclaimed), size_str(b2, bytes), argv[1]);
        return 0;
}

/* ---- top ---- */

struct top_sample {
        char *path;
        uint64_t pgalloc, pgfree, charges;
};

struct top_prev {
        struct top_sample *s;
        size_t n;
        double t_sec;
        bool valid;
};

static void top_prev_done(struct top_prev *p) {
        for (size_t i = 0; i < p->n; i++)
                free(p->s[i].path);
        free(p->s);
        *p = (struct top_prev) {};
}

static uint64_t stat_get(const struct tenant_info *t, const char *key) {
        const struct kv *e = kvlist_find(&t->stat, key);
        return e ? e->value : 0;
}

static int top_order(const void *a, const void *b) {
        const struct tenant_info *x = a, *y = b;

        if (x->current != y->current)
                return x->current < y->current ? 1 : -1;
        return ctl_path_compare(x->path, y->path);
}

static double now_sec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static const struct top_sample *top_prev_find(const struct top_prev *p, const char *path) {
        for (size_t i = 0; i < p->n; i++)
                if (strcmp(p->s[i].path, path) == 0)
                        return &p->s[i];
        return NULL;
}

static int top_iteration(sd_bus *bus, struct top_prev *prev, bool tty, unsigned rows) {
        _cleanup_(tenant_set_done) struct tenant_set s = {};
        struct manager_info mi;
        struct top_prev cur = {};
        char b[8][CTL_FORMAT_BYTES_MAX];
        size_t width = strlen("TENANT"), shown;
        double t_now, dt;
        int r;

        r = get_manager_info(bus, &mi);
        if (r < 0)
                return r;
        r = get_tenants(bus, &s);
        if (r >= 0)
                r = get_all_stats(bus, &s);
        if (r < 0) {
                manager_info_done(&mi);
                return r;
        }
        t_now = now_sec();
        dt = prev->valid ? t_now - prev->t_sec : 0;

        /* Samples for the next round, taken before sorting by usage. */
        cur.s = calloc(s.n ? s.n : 1, sizeof *cur.s);
        if (!cur.s) {
                manager_info_done(&mi);
                return -ENOMEM;
        }
        for (size_t i = 0; i < s.n; i++) {
                cur.s[i].path = strdup(s.t[i].path);
                if (!cur.s[i].path) {
                        top_prev_done(&cur);
                        manager_info_done(&mi);
                        return -ENOMEM;
                }
                cur.n++;
                cur.s[i].pgalloc = stat_get(&s.t[i], "pgalloc");
                cur.s[i].pgfree = stat_get(&s.t[i], "pgfree");
                cur.s[i].charges = stat_get(&s.t[i], "charge_requests");
        }
        cur.t_sec = t_now;
        cur.valid = true;

        qsort(s.t, s.n, sizeof *s.t, top_order);
        for (size_t i = 0; i < s.n; i++)
                width = MB_MAX(width, strlen(s.t[i].path));

        if (arg.format == FORMAT_JSON) {
                printf("{\"MemoryCurrent\":%" PRIu64 ",\"Capacity\":%" PRIu64 ",\"tenants\":[", mi.current,
                       mi.capacity);
                for (size_t i = 0; i < s.n; i++) {
                        const struct top_sample *old = top_prev_find(prev, s.t[i].path);
                        if (i)
                                fputc(',', stdout);
                        fputs("{\"Path\":", stdout);
                        ctl_json_string(stdout, s.t[i].path);
                        printf(",\"MemoryCurrent\":%" PRIu64 ",\"MemoryPeak\":%" PRIu64 ",\"MemoryMax\":%" PRIu64
                               ",\"NClients\":%" PRIu32 ",\"pages\":%" PRIu64 ",\"stock\":%" PRIu64,
                               s.t[i].current, s.t[i].peak, s.t[i].max, s.t[i].nclients, stat_get(&s.t[i], "pages"),
                               stat_get(&s.t[i], "stock"));
                        if (old && dt > 0)
                                printf(",\"pgalloc_per_sec\":%.1f,\"pgfree_per_sec\":%.1f",
                                       (double) (stat_get(&s.t[i], "pgalloc") - old->pgalloc) / dt,
                                       (double) (stat_get(&s.t[i], "pgfree") - old->pgfree) / dt);
                        fputc('}', stdout);
                }
                fputs("]}\n", stdout);
        } else {
                double pct = mi.capacity && mi.capacity != CTL_LIMIT_MAX
                                     ? 100.0 * (double) mi.current / (double) mi.capacity
                                     : 0.0;
                if (tty)
                        fputs("\033[H\033[2J", stdout);
                printf("Capacity %s   Current %s (%.1f%%)   Tenants %" PRIu32 "   Clients %" PRIu32
                       "   Stat flushes %" PRIu64 "\n\n",
                       size_str(b[0], mi.capacity), size_str(b[1], mi.current), pct, mi.ntenants, mi.nclients,
                       mi.flushes);
                printf("%-*s %7s %10s %10s %10s %10s %10s %10s %10s\n", (int) width, "TENANT", "CLIENTS", "CURRENT",
                       "PEAK", "MAX", "PAGES", "STOCK", "ALLOC/s", "FREE/s");
                shown = s.n;
                if (tty && rows > 4 && shown > rows - 4)
                        shown = rows - 4;
                for (size_t i = 0; i < shown; i++) {
                        const struct tenant_info *t = &s.t[i];
                        const struct top_sample *old = top_prev_find(prev, t->path);
                        uint64_t pa = stat_get(t, "pgalloc"), pf = stat_get(t, "pgfree");

                        if (old && dt > 0) {
                                snprintf(b[6], sizeof b[6], "%.0f", (double) (pa >= old->pgalloc ? pa - old->pgalloc : 0) / dt);
                                snprintf(b[7], sizeof b[7], "%.0f", (double) (pf >= old->pgfree ? pf - old->pgfree : 0) / dt);
                        } else {
                                strcpy(b[6], "-");
                                strcpy(b[7], "-");
                        }
                        printf("%-*s %7" PRIu32 " %10s %10s %10s %10s %10s %10s %10s\n", (int) width, t->path,
                               t->nclients, size_str(b[0], t->current), size_str(b[1], t->peak),
                               size_str(b[2], t->max), size_str(b[3], stat_get(t, "pages")),
                               size_str(b[4], stat_get(t, "stock")), b[6], b[7]);
                }
        }
        fflush(stdout);
        top_prev_done(prev);
        *prev = cur;
        manager_info_done(&mi);
        return 0;
}

static int verb_top(sd_bus *bus, int argc, char **argv) {
        struct top_prev prev = {};
        bool tty = isatty(STDOUT_FILENO) && arg.format == FORMAT_TEXT;
        int r = 0;

        for (uint64_t i = 0; arg.iterations == 0 || i < arg.iterations; i++) {
                struct winsize ws = {};
                unsigned rows = 0;

                if (i > 0) {
                        struct timespec ts = {
                                .tv_sec = (time_t) arg.delay_sec,
                                .tv_nsec = (long) ((arg.delay_sec - (double) (time_t) arg.delay_sec) * 1e9),
                        };
                        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                                ;
                        if (!tty && arg.format == FORMAT_TEXT)
                                putchar('\n');
                }
                if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
                        rows = ws.ws_row;
                r = top_iteration(bus, &prev, tty, rows);
                if (r < 0)
                        break;
        }
        top_prev_done(&prev);
        return r;
}

/* ---- verbs and help ---- */

struct verb {
        const char *name;
        int min_args, max_args; /* including the verb; -1: no maximum */
        int (*run)(sd_bus *bus, int argc, char **argv);
        const char *usage;
        const char *summary;
        const char *help;
};

static const struct verb verbs[] = {
        { "status", 1, 1, verb_status, "status",
          "Show the broker's capacity, usage and counters",
          "Show the broker: capacity, usage, page size, charge batch, tenants, clients and how much\n"
          "work the statistics flush did (StatsFlushes, StatsFlushedNodes).\n"
          "Options: --json, --bytes." },
        { "tree", 1, 2, verb_tree, "tree [PATH]",
          "Show the tenant hierarchy with usage and limits",
          "Show the tenant hierarchy below PATH (default: the root) like systemd-cgls, with usage,\n"
          "peak and limits of each tenant and its number of clients.  'max' means no limit.\n"
          "Options: --json (a list of tenants with their D-Bus properties), --bytes." },
        { "stat", 1, -1, verb_stat, "stat [PATH...]",
          "Show memory.stat of tenants (text, JSON, OpenMetrics)",
          "Show memory.stat of the tenants given (default: every tenant).  Byte values are\n"
          "hierarchical (the tenant and its descendants); *_local keys cover the tenant alone.\n"
          "Reading flushes the lazily kept statistics of that subtree when enough updates are\n"
          "pending; otherwise the figures are at most StatsFlushIntervalSec= old.\n"
          "Options: --bytes (exact numbers, the daemon's GetStatText), --json,\n"
          "         --format=openmetrics (usage, limits, memory.stat and memory.events of every\n"
          "         tenant given, as OpenMetrics text for a node-exporter textfile collector)." },
        { "events", 2, 2, verb_events, "events PATH",
          "Show memory.events of a tenant",
          "Show memory.events of PATH: how often protection was breached (low), the tenant was\n"
          "throttled (high), a charge hit a hard limit (max), a charge failed (oom, oom_kill)\n"
          "and a client backed arena pages it did not hold (overrun);\n"
          "SUBTREE counts the tenant and its descendants, LOCAL the tenant alone.\n"
          "Options: --json." },
        { "set", 3, -1, verb_set, "set PATH Key=Value...",
          "Change limits (MemoryMax=1G ...)",
          "Change limits of PATH at once: MemoryMax=, MemoryHigh=, MemoryLow=, MemoryMin= take bytes\n"
          "with K/M/G/T (powers of 1024), N% of the capacity, or 'infinity'; ChargeBatch= takes pages.\n"
          "Without --runtime the change is persisted in the state directory and survives restarts;\n"
          "with --runtime it lasts until the daemon stops.  Needs uid 0.\n"
          "Options: --runtime." },
        { "reclaim", 3, 3, verb_reclaim, "reclaim PATH SIZE",
          "Reclaim memory from a subtree",
          "Ask the clients of PATH's subtree to give back SIZE bytes (K/M/G/T), like writing to\n"
          "memory.reclaim, and print how much was reclaimed.  Needs uid 0.\n"
          "Options: --json, --bytes." },
        { "top", 1, 1, verb_top, "top",
          "Show tenants ordered by usage, refreshing",
          "Show tenants ordered by usage, refreshed every -d SEC seconds, like systemd-cgtop.\n"
          "Allocation and free rates are pages per second between two refreshes.  On a terminal\n"
          "the screen is redrawn; otherwise each refresh is printed after the previous one.\n"
          "Options: -n/--iterations=N (stop after N refreshes; default: until interrupted),\n"
          "         -d/--delay=SEC (default 1), --json (one JSON object per refresh), --bytes." },
        { "create", 2, -1, verb_create, "create PATH [Key=Value...]",
          "Create a tenant at run time",
          "Create a tenant (and missing parents) at run time, with the limits given (as for set).\n"
          "Needs uid 0." },
        { "remove", 2, 2, verb_remove, "remove PATH",
          "Remove an idle leaf tenant",
          "Remove a tenant that has no clients and no children.  Needs uid 0." },
        { "reload", 1, 1, verb_reload, "reload",
          "Re-read the configuration",
          "Re-read the configuration files, as SIGHUP does; on an error the running configuration\n"
          "is kept and the error (file:line) is printed.  Needs uid 0." },
};

static const struct verb *find_verb(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (strcmp(verbs[i].name, name) == 0)
                        return &verbs[i];
        return NULL;
}

static void help_common(void) {
        printf("\nBus options:\n"
               "     --system          Talk to membrokerd on the system bus (default)\n"
               "     --user            Talk to membrokerd on the user bus\n"
               "     --address=ADDRESS Talk to membrokerd on the bus at ADDRESS\n"
               "\nOutput options:\n"
               "     --json            Output JSON (status, tree, stat, events, reclaim, top)\n"
               "     --format=FORMAT   text (default), json, or openmetrics (stat only)\n"
               "     --bytes           Exact byte counts instead of human sizes\n"
               "  -h --help            Show this help, or the help of VERB\n"
               "     --version         Show the version\n");
}

static void help_main(void) {
        printf("%s [OPTIONS...] VERB [ARGS...]\n\n"
               "Inspect and control membrokerd, the userspace memory broker, over D-Bus.\n\n"
               "Verbs:\n",
               program);
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                printf("  %-28s %s\n", verbs[i].usage, verbs[i].summary);
        printf("  %-28s %s\n", "help [VERB]", "Show this help, or the help of VERB");
        help_common();
        printf("\nVerb options:\n"
               "     --runtime         set: the change lasts until the daemon stops (not persisted)\n"
               "  -n --iterations=N   top: refresh N times, then exit\n"
               "  -d --delay=SEC      top: seconds between refreshes\n");
        printf("\nSizes are shown in powers of 1024 (K, M, G, T); 'max' means no limit.\n"
               "Exit status: 0 on success, 1 when the daemon refused or failed, 2 on a usage error.\n"
               "See '%s help VERB' or '%s VERB --help' for each verb.\n",
               program, program);
}

static void help_verb(const struct verb *v) {
        printf("%s [OPTIONS...] %s\n\n%s\n", program, v->usage, v->help);
        help_common();
}

static int parse_argv(int argc, char **argv) {
        enum {
                ARG_SYSTEM = 0x100,
                ARG_USER,
                ARG_ADDRESS,
                ARG_JSON,
                ARG_FORMAT,
                ARG_BYTES,
                ARG_RUNTIME,
                ARG_VERSION,
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "system", no_argument, NULL, ARG_SYSTEM },
                { "user", no_argument, NULL, ARG_USER },
                { "address", required_argument, NULL, ARG_ADDRESS },
                { "json", no_argument, NULL, ARG_JSON },
                { "format", required_argument, NULL, ARG_FORMAT },
                { "bytes", no_argument, NULL, ARG_BYTES },
                { "runtime", no_argument, NULL, ARG_RUNTIME },
                { "iterations", required_argument, NULL, 'n' },
                { "delay", required_argument, NULL, 'd' },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "hn:d:", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        arg.help = true;
                        break;
                case ARG_VERSION:
                        printf("membrokerctl %s\n", PACKAGE_VERSION);
                        return 0;
                case ARG_SYSTEM:
                        arg.bus_kind = CTL_BUS_SYSTEM;
                        break;
                case ARG_USER:
                        arg.bus_kind = CTL_BUS_USER;
                        break;
                case ARG_ADDRESS:
                        arg.bus_kind = CTL_BUS_ADDRESS;
                        arg.address = optarg;
                        break;
                case ARG_JSON:
                        arg.format = FORMAT_JSON;
                        break;
                case ARG_FORMAT:
                        if (strcmp(optarg, "text") == 0)
                                arg.format = FORMAT_TEXT;
                        else if (strcmp(optarg, "json") == 0)
                                arg.format = FORMAT_JSON;
                        else if (strcmp(optarg, "openmetrics") == 0)
                                arg.format = FORMAT_OPENMETRICS;
                        else {
                                log_error("unknown format '%s' (text, json, openmetrics)", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_BYTES:
                        arg.bytes = true;
                        break;
                case ARG_RUNTIME:
                        arg.runtime = true;
                        break;
                case 'n':
                        if (ctl_parse_u64(optarg, &arg.iterations) < 0 || arg.iterations == 0) {
                                log_error("invalid iteration count '%s'", optarg);
                                return -EINVAL;
                        }
                        break;
                case 'd': {
                        char *end;
                        errno = 0;
                        arg.delay_sec = strtod(optarg, &end);
                        if (errno || *end || !(arg.delay_sec > 0) || arg.delay_sec > 86400) {
                                log_error("invalid delay '%s' (seconds)", optarg);
                                return -EINVAL;
                        }
                        break;
                }
                default:
                        return -EINVAL;
                }
        }
        return 1;
}

int main(int argc, char **argv) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        const struct verb *v;
        int r, nargs;
        char **args;

        setlocale(LC_ALL, "");
        r = parse_argv(argc, argv);
        if (r < 0) {
                fprintf(stderr, "Try '%s --help'.\n", program);
                return EXIT_USAGE;
        }
        if (r == 0)
                return EXIT_SUCCESS;

        args = argv + optind;
        nargs = argc - optind;
        if (nargs == 0) {
                if (arg.help) {
                        help_main();
                        return EXIT_SUCCESS;
                }
                log_error("a verb is needed (status, tree, stat, events, set, reclaim, top, ...)");
                fprintf(stderr, "Try '%s --help'.\n", program);
                return EXIT_USAGE;
        }
        if (strcmp(args[0], "help") == 0) {
                if (nargs == 1) {
                        help_main();
                        return EXIT_SUCCESS;
                }
                v = find_verb(args[1]);
                if (!v) {
                        log_error("unknown verb '%s'", args[1]);
                        return EXIT_USAGE;
                }
                help_verb(v);
                return EXIT_SUCCESS;
        }
        v = find_verb(args[0]);
        if (!v) {
                log_error("unknown verb '%s'", args[0]);
                fprintf(stderr, "Try '%s --help'.\n", program);
                return EXIT_USAGE;
        }
        if (arg.help) {
                help_verb(v);
                return EXIT_SUCCESS;
        }
        if (nargs < v->min_args || (v->max_args >= 0 && nargs > v->max_args)) {
                log_error("%s", nargs < v->min_args ? "too few arguments" : "too many arguments");
                fprintf(stderr, "Usage: %s %s\n", program, v->usage);
                return EXIT_USAGE;
        }
        if (arg.format == FORMAT_OPENMETRICS && v->run != verb_stat) {
                log_error("--format=openmetrics is only for stat");
                return EXIT_USAGE;
        }
        if (arg.bus_kind == CTL_BUS_ADDRESS && (!arg.address || !*arg.address)) {
                log_error("--address needs a bus address");
                return EXIT_USAGE;
        }

        r = bus_open(&bus);
        if (r < 0)
                return EXIT_FAILURE;
        r = v->run(bus, nargs, args);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
