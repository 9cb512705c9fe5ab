/* SPDX-License-Identifier: MIT */
/*
 * ctl-view.c - membrokerctl's read-only views of the broker: status (the
 * Manager's properties), tree (the hierarchy like systemd-cgls) and top
 * (tenants by usage, refreshing, like systemd-cgtop).
 */
#include <errno.h>
#include <inttypes.h>
#include <langinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "ctl-bus.h"
#include "ctl.h"

static bool use_utf8(void) {
        const char *cs = nl_langinfo(CODESET);
        return cs && strcmp(cs, "UTF-8") == 0;
}

/* ---- status ---- */

int ctl_view_status(sd_bus *bus, int argc, char **argv) {
        struct ctl_manager_info mi;
        char b1[CTL_FORMAT_BYTES_MAX], b2[CTL_FORMAT_BYTES_MAX], b3[CTL_FORMAT_BYTES_MAX];
        int r;

        r = ctl_bus_get_manager_info(bus, &mi);
        if (r < 0)
                return r;
        if (ctl_arg.format == CTL_FORMAT_JSON) {
                fputs("{\"Version\":", stdout);
                ctl_json_string(stdout, mi.version ? mi.version : "");
                printf(",\"PageSize\":%" PRIu64 ",\"Capacity\":%" PRIu64 ",\"MemoryCurrent\":%" PRIu64
                       ",\"ChargeBatch\":%" PRIu32 ",\"NTenants\":%" PRIu32 ",\"NClients\":%" PRIu32
                       ",\"StatsFlushes\":%" PRIu64 ",\"StatsFlushedNodes\":%" PRIu64 "}\n",
                       mi.page_size, mi.capacity, mi.current, mi.charge_batch, mi.ntenants, mi.nclients,
                       mi.flushes, mi.flushed_nodes);
        } else {
                double pct = mi.capacity && mi.capacity != MB_LIMIT_MAX ? 100.0 * (double) mi.current /
                                                                                   (double) mi.capacity
                                                                         : 0.0;
                printf("membrokerd %s on %s\n", mi.version ? mi.version : "?", ctl_bus_description());
                printf("      Capacity: %s\n", ctl_size_str(b1, mi.capacity));
                printf("       Current: %s (%.1f%% of capacity)\n", ctl_size_str(b2, mi.current), pct);
                printf("     Page size: %s\n", ctl_size_str(b3, mi.page_size));
                printf("  Charge batch: %" PRIu32 " pages\n", mi.charge_batch);
                printf("       Tenants: %" PRIu32 "\n", mi.ntenants);
                printf("       Clients: %" PRIu32 "\n", mi.nclients);
                printf("  Stat flushes: %" PRIu64 " (%" PRIu64 " tenant folds)\n", mi.flushes, mi.flushed_nodes);
        }
        ctl_manager_info_done(&mi);
        return 0;
}

/* ---- tree ---- */

static void tree_link(struct ctl_tenant_set *s) {
        char parent[4096];

        for (size_t i = 0; i < s->n; i++) {
                struct ctl_tenant *p;

                s->t[i].parent = SIZE_MAX;
                s->t[i].last_child = true;
                if (ctl_path_parent(s->t[i].path, parent, sizeof parent) < 0)
                        continue;
                p = ctl_tenant_set_find(s, parent);
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
static void tree_prefix(const struct ctl_tenant_set *s, size_t top, size_t i, char *buf, size_t size) {
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

static void json_tenant(FILE *f, const struct ctl_tenant *t) {
        fputs("{\"Path\":", f);
        ctl_json_string(f, t->path);
        fprintf(f, ",\"MemoryCurrent\":%" PRIu64 ",\"MemoryPeak\":%" PRIu64, t->current, t->peak);
        fputs(",\"MemoryMax\":", f);
        ctl_json_limit(f, t->max);
        fputs(",\"MemoryHigh\":", f);
        ctl_json_limit(f, t->high);
        fputs(",\"MemoryLow\":", f);
        ctl_json_limit(f, t->low);
        fputs(",\"MemoryMin\":", f);
        ctl_json_limit(f, t->min);
        fputs(",\"EffectiveMemoryLow\":", f);
        ctl_json_limit(f, t->elow);
        fputs(",\"EffectiveMemoryMin\":", f);
        ctl_json_limit(f, t->emin);
        fprintf(f, ",\"ChargeBatch\":%" PRIu32 ",\"NClients\":%" PRIu32 "}", t->charge_batch, t->nclients);
}

int ctl_view_tree(sd_bus *bus, int argc, char **argv) {
        _cleanup_(ctl_tenant_set_done) struct ctl_tenant_set s = {};
        const char *root = argc > 1 ? argv[1] : "/";
        char prefix[512], name[4096 + 512];
        size_t width = strlen("TENANT");
        struct ctl_tenant *top;
        int r;

        r = ctl_bus_get_tenants(bus, &s);
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
        top = ctl_tenant_set_find(&s, root);
        if (!top) {
                ctl_log_error("no tenant '%s'", root);
                return -ENOENT;
        }
        tree_link(&s);

        size_t first = (size_t) (top - s.t), end = first + 1;
        while (end < s.n && ctl_path_depth(s.t[end].path) > ctl_path_depth(top->path))
                end++;
        if (strcmp(top->path, "/") == 0)
                end = s.n;

        if (ctl_arg.format == CTL_FORMAT_JSON) {
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
        if (ctl_arg.legend)
                printf("%-*s %10s %10s %10s %10s %10s %10s %7s\n", (int) width, "TENANT", "CURRENT", "PEAK", "MIN",
                       "LOW", "HIGH", "MAX", "CLIENTS");
        for (size_t i = first; i < end; i++) {
                const struct ctl_tenant *t = &s.t[i];
                char b[6][CTL_FORMAT_BYTES_MAX];
                /* The top line names the whole path, the others their last component. */
                const char *label = i == first ? t->path : ctl_path_name(t->path);

                tree_prefix(&s, first, i, prefix, sizeof prefix);
                printf("%s%s%*s %10s %10s %10s %10s %10s %10s %7" PRIu32 "\n", prefix, label,
                       (int) (width - display_width(prefix) - strlen(label)), "", ctl_size_str(b[0], t->current),
                       ctl_size_str(b[1], t->peak), ctl_size_str(b[2], t->min), ctl_size_str(b[3], t->low),
                       ctl_size_str(b[4], t->high), ctl_size_str(b[5], t->max), t->nclients);
        }
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

static uint64_t stat_get(const struct ctl_tenant *t, const char *key) {
        const struct ctl_kv *e = ctl_kvlist_find(&t->stat, key);
        return e ? e->value : 0;
}

static int top_order(const void *a, const void *b) {
        const struct ctl_tenant *x = a, *y = b;

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
        _cleanup_(ctl_tenant_set_done) struct ctl_tenant_set s = {};
        struct ctl_manager_info mi;
        struct top_prev cur = {};
        char b[8][CTL_FORMAT_BYTES_MAX];
        size_t width = strlen("TENANT"), shown;
        double t_now, dt;
        int r;

        r = ctl_bus_get_manager_info(bus, &mi);
        if (r < 0)
                return r;
        r = ctl_bus_get_all_compact(bus, &s);
        if (r == -EOPNOTSUPP) { /* an older daemon */
                r = ctl_bus_get_tenants(bus, &s);
                if (r >= 0)
                        r = ctl_bus_get_all_stats(bus, &s);
        }
        if (r < 0) {
                ctl_manager_info_done(&mi);
                return r;
        }
        t_now = now_sec();
        dt = prev->valid ? t_now - prev->t_sec : 0;

        /* Samples for the next round, taken before sorting by usage. */
        cur.s = calloc(s.n ? s.n : 1, sizeof *cur.s);
        if (!cur.s) {
                ctl_manager_info_done(&mi);
                return -ENOMEM;
        }
        for (size_t i = 0; i < s.n; i++) {
                cur.s[i].path = strdup(s.t[i].path);
                if (!cur.s[i].path) {
                        top_prev_done(&cur);
                        ctl_manager_info_done(&mi);
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

        if (ctl_arg.format == CTL_FORMAT_JSON) {
                printf("{\"MemoryCurrent\":%" PRIu64 ",\"Capacity\":%" PRIu64 ",\"Tenants\":[", mi.current,
                       mi.capacity);
                for (size_t i = 0; i < s.n; i++) {
                        const struct top_sample *old = top_prev_find(prev, s.t[i].path);
                        if (i)
                                fputc(',', stdout);
                        fputs("{\"Path\":", stdout);
                        ctl_json_string(stdout, s.t[i].path);
                        printf(",\"MemoryCurrent\":%" PRIu64 ",\"MemoryPeak\":%" PRIu64 ",\"MemoryMax\":",
                               s.t[i].current, s.t[i].peak);
                        ctl_json_limit(stdout, s.t[i].max);
                        printf(",\"NClients\":%" PRIu32 ",\"Pages\":%" PRIu64 ",\"Stock\":%" PRIu64
                               ",\"PressureSomeAvg10\":%.2f,\"PressureFullAvg10\":%.2f",
                               s.t[i].nclients, stat_get(&s.t[i], "pages"), stat_get(&s.t[i], "stock"),
                               s.t[i].pressure_avg[0][0] / 100.0, s.t[i].pressure_avg[1][0] / 100.0);
                        if (old && dt > 0)
                                printf(",\"PgallocPerSec\":%.1f,\"PgfreePerSec\":%.1f",
                                       (double) (stat_get(&s.t[i], "pgalloc") - old->pgalloc) / dt,
                                       (double) (stat_get(&s.t[i], "pgfree") - old->pgfree) / dt);
                        fputc('}', stdout);
                }
                fputs("]}\n", stdout);
        } else {
                double pct = mi.capacity && mi.capacity != MB_LIMIT_MAX
                                     ? 100.0 * (double) mi.current / (double) mi.capacity
                                     : 0.0;
                if (tty)
                        fputs("\033[H\033[2J", stdout);
                if (ctl_arg.legend) {
                        printf("Capacity %s   Current %s (%.1f%%)   Tenants %" PRIu32 "   Clients %" PRIu32
                               "   Stat flushes %" PRIu64 "\n\n",
                               ctl_size_str(b[0], mi.capacity), ctl_size_str(b[1], mi.current), pct, mi.ntenants,
                               mi.nclients, mi.flushes);
                        printf("%-*s %7s %10s %10s %10s %10s %10s %10s %10s %7s\n", (int) width, "TENANT",
                               "CLIENTS", "CURRENT", "PEAK", "MAX", "PAGES", "STOCK", "ALLOC/s", "FREE/s", "PSI10");
                }
                shown = s.n;
                if (tty && rows > 4 && shown > rows - 4)
                        shown = rows - 4;
                for (size_t i = 0; i < shown; i++) {
                        const struct ctl_tenant *t = &s.t[i];
                        const struct top_sample *old = top_prev_find(prev, t->path);
                        uint64_t pa = stat_get(t, "pgalloc"), pf = stat_get(t, "pgfree");

                        if (old && dt > 0) {
                                snprintf(b[6], sizeof b[6], "%.0f", (double) (pa >= old->pgalloc ? pa - old->pgalloc : 0) / dt);
                                snprintf(b[7], sizeof b[7], "%.0f", (double) (pf >= old->pgfree ? pf - old->pgfree : 0) / dt);
                        } else {
                                strcpy(b[6], "-");
                                strcpy(b[7], "-");
                        }
                        /* PSI10: memory.pressure's "some" avg10, in percent. */
                        printf("%-*s %7" PRIu32 " %10s %10s %10s %10s %10s %10s %10s %4u.%02u\n", (int) width,
                               t->path, t->nclients, ctl_size_str(b[0], t->current), ctl_size_str(b[1], t->peak),
                               ctl_size_str(b[2], t->max), ctl_size_str(b[3], stat_get(t, "pages")),
                               ctl_size_str(b[4], stat_get(t, "stock")), b[6], b[7], t->pressure_avg[0][0] / 100,
                               t->pressure_avg[0][0] % 100);
                }
        }
        fflush(stdout);
        top_prev_done(prev);
        *prev = cur;
        ctl_manager_info_done(&mi);
        return 0;
}

int ctl_view_top(sd_bus *bus, int argc, char **argv) {
        struct top_prev prev = {};
        bool tty = isatty(STDOUT_FILENO) && ctl_arg.format == CTL_FORMAT_TEXT;
        int r = 0;

        for (uint64_t i = 0; ctl_arg.iterations == 0 || i < ctl_arg.iterations; i++) {
                struct winsize ws = {};
                unsigned rows = 0;

                if (i > 0) {
                        struct timespec ts = {
                                .tv_sec = (time_t) ctl_arg.delay_sec,
                                .tv_nsec = (long) ((ctl_arg.delay_sec - (double) (time_t) ctl_arg.delay_sec) * 1e9),
                        };
                        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                                ;
                        if (!tty && ctl_arg.format == CTL_FORMAT_TEXT)
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
