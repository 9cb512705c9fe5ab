/* SPDX-License-Identifier: MIT */
/*
 * ctl-openmetrics.c - the text a Prometheus scrape or a node-exporter
 * textfile collector reads: usage, limits, memory.stat and memory.events
 * of tenants, one family per figure.  Each family's # TYPE, # UNIT and
 * # HELP lines name it exactly as its samples do, a counter's name ending
 * in "_total", as the Prometheus text format wants (promtool check
 * metrics); "# EOF" ends the text for OpenMetrics readers.
 *
 * The Prometheus text format (version 0.0.4, what node_exporter's textfile
 * collector and a /metrics scrape read) is the same families with # HELP
 * before # TYPE, no # UNIT (the unit is in the name: _bytes, _seconds) and
 * no "# EOF".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ctl-bus.h"
#include "ctl-openmetrics.h"
#include "ctl.h"
#include "mb_limits.h"
#include "mb_stat_keys.h"


/* A stat key's metric family: the name its samples carry (a counter's
 * with "_total"), its type, unit and help, and whether the value is
 * microseconds to print as seconds.  Keys not in the table (a newer
 * daemon's) are gauges without a unit. */
struct om_family {
        char name[192];
        const char *type, *unit;
        char help[320];
        bool usec;
};

static void om_family_of_key(const char *key, struct om_family *ret) {
        bool local = false;
        const struct mb_stat_key_info *k = mb_stat_key_find(key, &local);
        char base[128];

        snprintf(base, sizeof base, "%s", k ? k->name : key);
        for (char *p = base; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
                        *p = '_';
        *ret = (struct om_family) { .type = "gauge" };
        if (!k) {
                snprintf(ret->name, sizeof ret->name, "membroker_%s", base);
                snprintf(ret->help, sizeof ret->help, "memory.stat key %s of the tenant.", key);
                return;
        }
        switch (k->unit) {
        case MB_STAT_UNIT_BYTES:
                snprintf(ret->name, sizeof ret->name, "membroker_%s%s_bytes", base, local ? "_local" : "");
                ret->unit = "bytes";
                break;
        case MB_STAT_UNIT_USEC:
                /* throttle_usec -> membroker_throttle_seconds_total */
                snprintf(ret->name, sizeof ret->name, "membroker_%.*s%s_seconds_total",
                         (int) (strlen(base) - strlen("_usec")), base, local ? "_local" : "");
                ret->type = "counter";
                ret->unit = "seconds";
                ret->usec = true;
                break;
        case MB_STAT_UNIT_COUNT:
                snprintf(ret->name, sizeof ret->name, "membroker_%s%s_total", base, local ? "_local" : "");
                ret->type = "counter";
                break;
        }
        snprintf(ret->help, sizeof ret->help, "%s memory.stat key %s%s.", k->help, key,
                 !k->local_name ? ""
                 : local        ? ": the tenant alone"
                                : ": the tenant and its descendants");
}

static void om_header(FILE *f, enum ctl_metrics_format format, const char *name, const char *type,
                      const char *unit, const char *help) {
        if (format == CTL_METRICS_PROMETHEUS) {
                fprintf(f, "# HELP %s %s\n", name, help);
                fprintf(f, "# TYPE %s %s\n", name, type);
                return;
        }
        fprintf(f, "# TYPE %s %s\n", name, type);
        if (unit)
                fprintf(f, "# UNIT %s %s\n", name, unit);
        fprintf(f, "# HELP %s %s\n", name, help);
}

/* How a sample's value is written. */
enum om_value {
        OM_VALUE_COUNT,
        OM_VALUE_LIMIT, /* MB_LIMIT_MAX is +Inf */
        OM_VALUE_USEC,  /* microseconds written as seconds */
};

static char *om_put(char *p, const char *s, size_t n) {
        memcpy(p, s, n);
        return p + n;
}

static char *om_put_u64(char *p, uint64_t v, int min_digits) {
        char tmp[24];
        int n = 0;

        do {
                tmp[n++] = (char) ('0' + v % 10);
                v /= 10;
        } while (v || n < min_digits);
        while (n)
                *p++ = tmp[--n];
        return p;
}

/* A label value between quotes, escaped as the text format wants. */
static char *om_put_label(char *p, const char *s) {
        *p++ = '"';
        for (; *s; s++) {
                if (*s == '\\' || *s == '"' || *s == '\n') {
                        *p++ = '\\';
                        *p++ = *s == '\n' ? 'n' : *s;
                } else
                        *p++ = *s;
        }
        *p++ = '"';
        return p;
}

/* One sample of family @name (its full name) for @tenant: the line built
 * in a buffer and written at once (a scrape of 10,000 tenants is some
 * 400,000 lines; printf() per field was most of its time). */
static void om_sample(FILE *f, const char *name, const char *tenant, const char *extra_label,
                      const char *extra_value, uint64_t v, enum om_value how) {
        size_t nn = strlen(name), nt = strlen(tenant), nl = extra_label ? strlen(extra_label) : 0,
               nv = extra_value ? strlen(extra_value) : 0;
        char buf[1024], *p = buf;

        if (nn + 2 * (nt + nv) + nl + 96 > sizeof(buf)) { /* too long for the buffer: the slow way */
                fprintf(f, "%s{tenant=", name);
                ctl_openmetrics_label(f, tenant);
                if (extra_label) {
                        fprintf(f, ",%s=", extra_label);
                        ctl_openmetrics_label(f, extra_value);
                }
                if (how == OM_VALUE_LIMIT && v == MB_LIMIT_MAX)
                        fprintf(f, "} +Inf\n");
                else if (how == OM_VALUE_USEC)
                        fprintf(f, "} %" PRIu64 ".%06" PRIu64 "\n", v / 1000000, v % 1000000);
                else
                        fprintf(f, "} %" PRIu64 "\n", v);
                return;
        }
        p = om_put(p, name, nn);
        p = om_put(p, "{tenant=", 8);
        p = om_put_label(p, tenant);
        if (extra_label) {
                *p++ = ',';
                p = om_put(p, extra_label, nl);
                *p++ = '=';
                p = om_put_label(p, extra_value);
        }
        p = om_put(p, "} ", 2);
        if (how == OM_VALUE_LIMIT && v == MB_LIMIT_MAX)
                p = om_put(p, "+Inf", 4);
        else if (how == OM_VALUE_USEC) {
                p = om_put_u64(p, v / 1000000, 1);
                *p++ = '.';
                p = om_put_u64(p, v % 1000000, 6);
        } else
                p = om_put_u64(p, v, 1);
        *p++ = '\n';
        fwrite_unlocked(buf, 1, (size_t) (p - buf), f); /* one thread writes @f */
}

static void om_sample_u64(FILE *f, const char *name, const char *tenant, const char *extra_label,
                          const char *extra_value, uint64_t v, bool limit) {
        om_sample(f, name, tenant, extra_label, extra_value, v, limit ? OM_VALUE_LIMIT : OM_VALUE_COUNT);
}

/* The entry of @key in @l, looked up first at @hint (every tenant lists
 * the same keys in the same order). */
static const struct ctl_kv *om_find(const struct ctl_kvlist *l, const char *key, size_t hint) {
        if (hint < l->n && (l->v[hint].key == key || strcmp(l->v[hint].key, key) == 0))
                return &l->v[hint];
        return ctl_kvlist_find(l, key);
}

void ctl_metrics_write(FILE *f, enum ctl_metrics_format format, const struct ctl_tenant_set *s, const size_t *sel,
                       size_t nsel) {
        static const struct {
                const char *name, *help;
                size_t offset;
                bool limit;
        } gauges[] = {
                { "membroker_memory_current_bytes", "Memory charged to the tenant and its descendants.",
                  offsetof(struct ctl_tenant, current), false },
                { "membroker_memory_peak_bytes", "Highest MemoryCurrent seen.", offsetof(struct ctl_tenant, peak),
                  false },
                { "membroker_memory_max_bytes", "Hard limit (MemoryMax=); +Inf when unlimited.",
                  offsetof(struct ctl_tenant, max), true },
                { "membroker_memory_high_bytes", "Throttling limit (MemoryHigh=); +Inf when unlimited.",
                  offsetof(struct ctl_tenant, high), true },
                { "membroker_memory_low_bytes", "Best-effort protection (MemoryLow=).",
                  offsetof(struct ctl_tenant, low), false },
                { "membroker_memory_min_bytes", "Hard protection (MemoryMin=).", offsetof(struct ctl_tenant, min),
                  false },
        };
        const struct ctl_kvlist *keys = NULL;

        for (size_t g = 0; g < ELEMENTSOF(gauges); g++) {
                om_header(f, format, gauges[g].name, "gauge", "bytes", gauges[g].help);
                for (size_t i = 0; i < nsel; i++) {
                        const struct ctl_tenant *t = &s->t[sel[i]];
                        om_sample_u64(f, gauges[g].name, t->path, NULL, NULL,
                                      *(const uint64_t *) ((const char *) t + gauges[g].offset), gauges[g].limit);
                }
        }
        om_header(f, format, "membroker_clients", "gauge", NULL, "Clients attached to the tenant.");
        for (size_t i = 0; i < nsel; i++)
                om_sample_u64(f, "membroker_clients", s->t[sel[i]].path, NULL, NULL, s->t[sel[i]].nclients, false);

        /* memory.pressure totals, as node_exporter names the host's PSI
         * (node_pressure_memory_waiting/stalled_seconds_total). */
        for (int k = 0; k < 2; k++) {
                const char *name = k ? "membroker_pressure_memory_stalled_seconds_total"
                                     : "membroker_pressure_memory_waiting_seconds_total";

                om_header(f, format, name, "counter", "seconds",
                          k ? "memory.pressure full: time all clients of the tenant's subtree were stalled on memory."
                            : "memory.pressure some: time at least one client of the tenant's subtree was stalled "
                              "on memory.");
                for (size_t i = 0; i < nsel; i++)
                        om_sample(f, name, s->t[sel[i]].path, NULL, NULL, s->t[sel[i]].pressure_total[k],
                                  OM_VALUE_USEC);
        }

        /* memory.stat: the key set of the first tenant (all share it). */
        for (size_t i = 0; i < nsel && !keys; i++)
                if (s->t[sel[i]].stat.n > 0)
                        keys = &s->t[sel[i]].stat;
        for (size_t k = 0; keys && k < keys->n; k++) {
                const char *key = keys->v[k].key;
                struct om_family fam;

                om_family_of_key(key, &fam);
                om_header(f, format, fam.name, fam.type, fam.unit, fam.help);
                for (size_t i = 0; i < nsel; i++) {
                        const struct ctl_tenant *t = &s->t[sel[i]];
                        const struct ctl_kv *e = om_find(&t->stat, key, k);
                        if (!e)
                                continue;
                        om_sample(f, fam.name, t->path, NULL, NULL, e->value,
                                  fam.usec ? OM_VALUE_USEC : OM_VALUE_COUNT);
                }
        }

        for (int local = 0; local < 2; local++) {
                const char *name = local ? "membroker_memory_events_local_total" : "membroker_memory_events_total";
                om_header(f, format, name, "counter", NULL,
                          local ? "memory.events.local: events of the tenant itself."
                                : "memory.events: events of the tenant and its descendants.");
                for (size_t i = 0; i < nsel; i++) {
                        const struct ctl_tenant *t = &s->t[sel[i]];
                        for (size_t k = 0; k < t->events.n; k++) {
                                const char *key = t->events.v[k].key;
                                const char *dot = strstr(key, ".local");
                                char ev[64];
                                if ((dot != NULL) != (local != 0))
                                        continue;
                                size_t len = dot ? (size_t) (dot - key) : strlen(key);
                                if (len >= sizeof ev)
                                        len = sizeof ev - 1;
                                memcpy(ev, key, len);
                                ev[len] = '\0';
                                om_sample_u64(f, name, t->path, "event", ev, t->events.v[k].value, false);
                        }
                }
        }
        if (format == CTL_METRICS_OPENMETRICS)
                fprintf(f, "# EOF\n");
}


int ctl_metrics_collect(sd_bus *bus, struct ctl_tenant_set *s) {
        int r;

        /* Every tenant and all its figures in one call; a daemon without
         * DumpStatsCompact(): its properties, then DumpStats (one call),
         * then memory.events one tenant at a time. */
        r = ctl_bus_get_all_compact(bus, s);
        if (r != -EOPNOTSUPP)
                return r;
        r = ctl_bus_get_tenants(bus, s);
        if (r < 0)
                return r;
        r = ctl_bus_get_all_stats(bus, s);
        if (r < 0)
                return r;
        for (size_t i = 0; i < s->n; i++) {
                ctl_kvlist_done(&s->t[i].events);
                r = ctl_bus_get_kvlist(bus, "GetEvents", s->t[i].path, &s->t[i].events);
                if (r < 0)
                        return r;
        }
        return 0;
}
