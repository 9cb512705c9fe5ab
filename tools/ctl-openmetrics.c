/* SPDX-License-Identifier: MIT */
/*
 * ctl-openmetrics.c - the text a Prometheus scrape or a node-exporter
 * textfile collector reads: usage, limits, memory.stat and memory.events
 * of tenants, one family per figure with its # TYPE and # HELP lines.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ctl-bus.h"
#include "ctl-openmetrics.h"
#include "ctl.h"


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

void ctl_openmetrics_print(const struct ctl_tenant_set *s, const size_t *sel, size_t nsel) {
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
                om_header(gauges[g].name, "gauge", "bytes", gauges[g].help);
                for (size_t i = 0; i < nsel; i++) {
                        const struct ctl_tenant *t = &s->t[sel[i]];
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
                        const struct ctl_tenant *t = &s->t[sel[i]];
                        const struct ctl_kv *e = ctl_kvlist_find(&t->stat, key);
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
                        const struct ctl_tenant *t = &s->t[sel[i]];
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

