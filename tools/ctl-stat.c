/* SPDX-License-Identifier: MIT */
/*
 * ctl-stat.c - membrokerctl stat and events: memory.stat and memory.events
 * of tenants as text tables or JSON (stat --format=openmetrics is printed
 * by ctl-openmetrics.c from what is read here).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-bus.h"
#include "ctl-openmetrics.h"
#include "ctl.h"
#include "mb_stat_keys.h"

/* A value of a stat key, for a text table. */
static const char *stat_value_str(char *buf, const char *key, uint64_t v) {
        const struct mb_stat_key_info *k = mb_stat_key_find(key, NULL);

        if (k && k->unit == MB_STAT_UNIT_BYTES)
                return ctl_format_bytes(buf, v, ctl_arg.bytes);
        snprintf(buf, CTL_FORMAT_BYTES_MAX, "%" PRIu64, v);
        return buf;
}

static void json_kv_object(FILE *f, const struct ctl_kvlist *l) {
        fputc('{', f);
        for (size_t i = 0; i < l->n; i++) {
                if (i)
                        fputc(',', f);
                ctl_json_string(f, l->v[i].key);
                fprintf(f, ":%" PRIu64, l->v[i].value);
        }
        fputc('}', f);
}

/* memory.pressure of @t in the kernel's layout, after the stat lines. */
static void print_pressure(const struct ctl_tenant *t, const char *indent) {
        for (int k = 0; k < 2; k++) {
                const uint32_t *a = t->pressure_avg[k];

                printf("%spressure %s avg10=%u.%02u avg60=%u.%02u avg300=%u.%02u total=%" PRIu64 "\n", indent,
                       k ? "full" : "some", a[0] / 100, a[0] % 100, a[1] / 100, a[1] % 100, a[2] / 100, a[2] % 100,
                       t->pressure_total[k]);
        }
}

int ctl_stat_show(sd_bus *bus, int argc, char **argv) {
        _cleanup_(ctl_tenant_set_done) struct ctl_tenant_set s = {};
        _cleanup_(freep) size_t *sel = NULL;
        bool have_events = false;
        size_t nsel = 0;
        int r;

        if (argc <= 1) {
                /* Every tenant with all its figures in one call; from a
                 * daemon without DumpStatsCompact(): its properties and its
                 * stat, one call each. */
                r = ctl_bus_get_all_compact(bus, &s);
                have_events = r >= 0;
                if (r == -EOPNOTSUPP) {
                        r = ctl_bus_get_tenants(bus, &s);
                        if (r >= 0)
                                r = ctl_bus_get_all_stats(bus, &s);
                }
                if (r < 0)
                        return r;
        } else {
                /* Only the tenants asked for (cheap among thousands). */
                s.t = calloc((size_t) argc, sizeof *s.t);
                if (!s.t)
                        return -ENOMEM;
                for (int a = 1; a < argc; a++) {
                        r = ctl_bus_get_one_tenant(bus, argv[a], ctl_arg.format != CTL_FORMAT_JSON, &s.t[s.n]);
                        if (r < 0)
                                return r;
                        s.n++;
                        r = ctl_bus_get_kvlist(bus, "GetStat", s.t[s.n - 1].path, &s.t[s.n - 1].stat);
                        if (r < 0)
                                return r;
                }
        }
        sel = calloc(s.n ? s.n : 1, sizeof *sel);
        if (!sel)
                return -ENOMEM;
        for (size_t i = 0; i < s.n; i++)
                sel[nsel++] = i;

        if (ctl_format_is_metrics()) {
                for (size_t i = 0; i < nsel && !have_events; i++) {
                        struct ctl_tenant *t = &s.t[sel[i]];
                        ctl_kvlist_done(&t->events);
                        r = ctl_bus_get_kvlist(bus, "GetEvents", t->path, &t->events);
                        if (r < 0)
                                return r;
                }
                ctl_metrics_write(stdout,
                                  ctl_arg.format == CTL_FORMAT_PROMETHEUS ? CTL_METRICS_PROMETHEUS
                                                                          : CTL_METRICS_OPENMETRICS,
                                  &s, sel, nsel);
                return 0;
        }

        if (ctl_arg.format == CTL_FORMAT_JSON) {
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
                const struct ctl_tenant *t = &s.t[sel[i]];
                size_t kw = 0;

                for (size_t k = 0; k < t->stat.n; k++)
                        kw = MB_MAX(kw, strlen(t->stat.v[k].key));
                if (nsel > 1)
                        printf("%s%s:\n", i ? "\n" : "", t->path);
                for (size_t k = 0; k < t->stat.n; k++) {
                        char b[CTL_FORMAT_BYTES_MAX];
                        if (ctl_arg.bytes)
                                printf("%s%s %" PRIu64 "\n", nsel > 1 ? "  " : "", t->stat.v[k].key,
                                       t->stat.v[k].value);
                        else
                                printf("%s%-*s %10s\n", nsel > 1 ? "  " : "", (int) kw, t->stat.v[k].key,
                                       stat_value_str(b, t->stat.v[k].key, t->stat.v[k].value));
                }
                print_pressure(t, nsel > 1 ? "  " : "");
        }
        return 0;
}

/* ---- events ---- */

int ctl_stat_events(sd_bus *bus, int argc, char **argv) {
        struct ctl_kvlist l;
        int r;

        r = ctl_bus_get_kvlist(bus, "GetEvents", argv[1], &l);
        if (r < 0)
                return r;
        if (ctl_arg.format == CTL_FORMAT_JSON) {
                fputc('{', stdout);
                ctl_json_string(stdout, argv[1]);
                fputc(':', stdout);
                json_kv_object(stdout, &l);
                fputs("}\n", stdout);
        } else {
                if (ctl_arg.legend)
                        printf("%-14s %12s %12s\n", "EVENT", "SUBTREE", "LOCAL");
                for (size_t i = 0; i < l.n; i++) {
                        char local_key[128];
                        const struct ctl_kv *local;

                        if (strstr(l.v[i].key, ".local"))
                                continue;
                        snprintf(local_key, sizeof local_key, "%s.local", l.v[i].key);
                        local = ctl_kvlist_find(&l, local_key);
                        if (local)
                                printf("%-14s %12" PRIu64 " %12" PRIu64 "\n", l.v[i].key, l.v[i].value,
                                       local->value);
                        else
                                printf("%-14s %12" PRIu64 " %12s\n", l.v[i].key, l.v[i].value, "-");
                }
        }
        ctl_kvlist_done(&l);
        return 0;
}

