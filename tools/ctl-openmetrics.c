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

/* One sample of family @name (its full name) for @tenant. */
static void om_sample_u64(FILE *f, const char *name, const char *tenant, const char *extra_label,
                          const char *extra_value, uint64_t v, bool limit) {
        fprintf(f, "%s{tenant=", name);
        ctl_openmetrics_label(f, tenant);
        if (extra_label) {
                fprintf(f, ",%s=", extra_label);
                ctl_openmetrics_label(f, extra_value);
        }
        if (limit && v == MB_LIMIT_MAX)
                fprintf(f, "} +Inf\n");
        else
                fprintf(f, "} %" PRIu64 "\n", v);
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
                        const struct ctl_kv *e = ctl_kvlist_find(&t->stat, key);
                        if (!e)
                                continue;
                        fprintf(f, "%s{tenant=", fam.name);
                        ctl_openmetrics_label(f, t->path);
                        if (fam.usec)
                                fprintf(f, "} %" PRIu64 ".%06" PRIu64 "\n", e->value / 1000000, e->value % 1000000);
                        else
                                fprintf(f, "} %" PRIu64 "\n", e->value);
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
                                snprintf(ev, sizeof ev, "%.*s", dot ? (int) (dot - key) : (int) strlen(key), key);
                                om_sample_u64(f, name, t->path, "event", ev, t->events.v[k].value, false);
                        }
                }
        }
        if (format == CTL_METRICS_OPENMETRICS)
                fprintf(f, "# EOF\n");
}


int ctl_metrics_collect(sd_bus *bus, struct ctl_tenant_set *s) {
        int r;

        /* Every tenant: its properties, then DumpStats (one call), then
         * memory.events one tenant at a time. */
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
