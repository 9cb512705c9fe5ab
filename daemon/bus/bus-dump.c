/* SPDX-License-Identifier: MIT */
/*
 * bus-dump.c - the figures of every tenant in one call, what a scrape of
 * the whole broker reads: Manager.DumpStats() (memory.stat of every tenant
 * as a(sa(st)), the pairs of GetStat) and Manager.DumpStatsCompact() (the
 * key names once, then per tenant arrays of numbers).
 *
 * Where a large dump spends its time is sd-bus serializing it: a(sa(st))
 * with 25 named pairs per tenant is 25 strings and 25 structures per
 * tenant, each appended and aligned one by one.  So both methods read every
 * tenant into buffers on the stack (no allocation per tenant), DumpStats
 * appends each pair with the basic calls rather than re-parsing a format
 * string, and DumpStatsCompact appends each tenant's values as arrays of t
 * (sd_bus_message_append_array(): one copy per array), naming the keys once.
 * One refresh of the whole tree comes first, flushing only what is pending
 * there (mem_cgroup_flush_stats() -> memcg_vmstats_needs_flush()).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bus-internal.h"
#include "bus.h"

/* The tenant properties DumpStatsCompact() reports, as numbers (t), in this
 * order; their values are those of the Tenant properties of the same name. */
enum dump_prop {
        DUMP_PROP_MEMORY_CURRENT,
        DUMP_PROP_MEMORY_PEAK,
        DUMP_PROP_MEMORY_MAX,
        DUMP_PROP_MEMORY_HIGH,
        DUMP_PROP_MEMORY_LOW,
        DUMP_PROP_MEMORY_MIN,
        DUMP_PROP_EFFECTIVE_MEMORY_MIN,
        DUMP_PROP_EFFECTIVE_MEMORY_LOW,
        DUMP_PROP_CHARGE_BATCH,
        DUMP_PROP_NCLIENTS,
        /* memory.pressure: the Pressure* properties (bus-pressure.c). */
        DUMP_PROP_PRESSURE_FIRST,
        DUMP_PROP_PRESSURE_SOME_TOTAL = DUMP_PROP_PRESSURE_FIRST,
        DUMP_PROP_PRESSURE_SOME_AVG10,
        DUMP_PROP_PRESSURE_SOME_AVG60,
        DUMP_PROP_PRESSURE_SOME_AVG300,
        DUMP_PROP_PRESSURE_FULL_TOTAL,
        DUMP_PROP_PRESSURE_FULL_AVG10,
        DUMP_PROP_PRESSURE_FULL_AVG60,
        DUMP_PROP_PRESSURE_FULL_AVG300,
        _DUMP_PROP_NR,
};

static const char *const dump_prop_names[_DUMP_PROP_NR + 1] = {
        [DUMP_PROP_MEMORY_CURRENT] = "MemoryCurrent",
        [DUMP_PROP_MEMORY_PEAK] = "MemoryPeak",
        [DUMP_PROP_MEMORY_MAX] = "MemoryMax",
        [DUMP_PROP_MEMORY_HIGH] = "MemoryHigh",
        [DUMP_PROP_MEMORY_LOW] = "MemoryLow",
        [DUMP_PROP_MEMORY_MIN] = "MemoryMin",
        [DUMP_PROP_EFFECTIVE_MEMORY_MIN] = "EffectiveMemoryMin",
        [DUMP_PROP_EFFECTIVE_MEMORY_LOW] = "EffectiveMemoryLow",
        [DUMP_PROP_CHARGE_BATCH] = "ChargeBatch",
        [DUMP_PROP_NCLIENTS] = "NClients",
        [DUMP_PROP_PRESSURE_SOME_TOTAL] = "PressureSomeTotalUSec",
        [DUMP_PROP_PRESSURE_SOME_AVG10] = "PressureSomeAvg10",
        [DUMP_PROP_PRESSURE_SOME_AVG60] = "PressureSomeAvg60",
        [DUMP_PROP_PRESSURE_SOME_AVG300] = "PressureSomeAvg300",
        [DUMP_PROP_PRESSURE_FULL_TOTAL] = "PressureFullTotalUSec",
        [DUMP_PROP_PRESSURE_FULL_AVG10] = "PressureFullAvg10",
        [DUMP_PROP_PRESSURE_FULL_AVG60] = "PressureFullAvg60",
        [DUMP_PROP_PRESSURE_FULL_AVG300] = "PressureFullAvg300",
};

struct dump_ctx {
        struct manager *manager;
        sd_bus_message *reply;
        unsigned charge_batch_default;
};

/* One tenant of DumpStats: (sa(st)). */
static int dump_one(struct tenant *t, void *userdata) {
        struct dump_ctx *c = userdata;
        struct mb_stat_kv kv[MANAGER_STAT_NKEYS];
        size_t n;
        int r;

        n = manager_tenant_stat_fill(c->manager, t, kv);
        r = sd_bus_message_open_container(c->reply, 'r', "sa(st)");
        if (r < 0)
                return r;
        r = sd_bus_message_append_basic(c->reply, 's', t->path);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(c->reply, 'a', "(st)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                r = sd_bus_message_open_container(c->reply, 'r', "st");
                if (r < 0)
                        return r;
                r = sd_bus_message_append_basic(c->reply, 's', kv[i].key);
                if (r < 0)
                        return r;
                r = sd_bus_message_append_basic(c->reply, 't', &kv[i].value);
                if (r < 0)
                        return r;
                r = sd_bus_message_close_container(c->reply);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(c->reply);
        if (r < 0)
                return r;
        r = sd_bus_message_close_container(c->reply);
        return r < 0 ? r : 0;
}

/* Walk every tenant with @cb into the array @sig of a new reply to @msg,
 * after @prefix (may be NULL) appended the fields before it; send it. */
static int dump_reply(sd_bus_message *msg, struct manager *m, const char *sig,
                      int (*prefix)(struct dump_ctx *c), int (*cb)(struct tenant *t, void *userdata)) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct dump_ctx c = {
                .manager = m,
                .charge_batch_default = m->b.config ? m->b.config->broker.charge_batch : 64,
        };
        int r;

        manager_stats_refresh(m, m->b.tree->root, false);

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        c.reply = reply;
        if (prefix) {
                r = prefix(&c);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_open_container(reply, 'a', sig);
        if (r < 0)
                return r;
        {
                BUS_TREE_RDLOCK(m);
                r = tenant_walk(m->b.tree->root, cb, &c);
        }
        if (r < 0)
                return r;
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

int bus_manager_method_dump_stats(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        (void) error;
        return dump_reply(msg, userdata, "(sa(st))", NULL, dump_one);
}

/* The three name lists of DumpStatsCompact(), taken from the root's own
 * reports so that they are the names GetStat and GetEvents use. */
static int dump_compact_names(struct dump_ctx *c) {
        struct tenant *root = c->manager->b.tree->root;
        struct mb_stat_kv kv[MANAGER_STAT_NKEYS];
        const char *stat_names[MANAGER_STAT_NKEYS + 1] = {};
        const char *event_names[BUS_EVENTS_MAX + 1] = {};
        struct bus_events ev;
        size_t n;
        int r;

        n = manager_tenant_stat_fill(c->manager, root, kv);
        for (size_t i = 0; i < n; i++)
                stat_names[i] = kv[i].key;
        bus_events_collect(root, &ev);
        for (size_t i = 0; i < ev.n; i++)
                event_names[i] = ev.e[i].key;

        r = sd_bus_message_append_strv(c->reply, (char **) dump_prop_names);
        if (r < 0)
                return r;
        r = sd_bus_message_append_strv(c->reply, (char **) stat_names);
        if (r < 0)
                return r;
        return sd_bus_message_append_strv(c->reply, (char **) event_names);
}

/* The eight Pressure* figures of @t, in the order of enum dump_prop. */
static void dump_pressure(struct tenant *t, uint64_t *ret) {
        static const unsigned which[4] = { 0, 10, 60, 300 };
        uint64_t now = psi_now_usec();

        for (int k = 0; k < _PSI_KIND_NR; k++) {
                struct psi_reading r;

                tenant_pressure_read_at(t, (enum psi_kind) k, now, &r);
                for (int i = 0; i < 4; i++)
                        ret[k * 4 + i] = bus_pressure_figure(&r, which[i]);
        }
}

/* One tenant of DumpStatsCompact: (satatat). */
static int dump_compact_one(struct tenant *t, void *userdata) {
        struct dump_ctx *c = userdata;
        struct manager *m = c->manager;
        struct mb_stat_kv kv[MANAGER_STAT_NKEYS];
        uint64_t props[_DUMP_PROP_NR], stats[MANAGER_STAT_NKEYS], events[BUS_EVENTS_MAX];
        struct bus_events ev;
        size_t n;
        int r;

        props[DUMP_PROP_MEMORY_CURRENT] = bus_pages_to_bytes(m, page_counter_read(&t->memory));
        props[DUMP_PROP_MEMORY_PEAK] = bus_pages_to_bytes(m, atomic_load(&t->memory.watermark));
        props[DUMP_PROP_MEMORY_MAX] = bus_limit_to_bytes(m, page_counter_get_max(&t->memory));
        props[DUMP_PROP_MEMORY_HIGH] = bus_limit_to_bytes(m, page_counter_get_high_setting(&t->memory));
        props[DUMP_PROP_MEMORY_LOW] = bus_limit_to_bytes(m, page_counter_get_low(&t->memory));
        props[DUMP_PROP_MEMORY_MIN] = bus_limit_to_bytes(m, page_counter_get_min(&t->memory));
        bus_effective_protection(m, t, &props[DUMP_PROP_EFFECTIVE_MEMORY_MIN],
                                 &props[DUMP_PROP_EFFECTIVE_MEMORY_LOW]);
        props[DUMP_PROP_CHARGE_BATCH] = tenant_charge_batch(t, c->charge_batch_default);
        props[DUMP_PROP_NCLIENTS] = atomic_load(&t->nclients);
        dump_pressure(t, &props[DUMP_PROP_PRESSURE_FIRST]);

        n = manager_tenant_stat_fill(m, t, kv);
        for (size_t i = 0; i < n; i++)
                stats[i] = kv[i].value;
        bus_events_collect(t, &ev);
        for (size_t i = 0; i < ev.n; i++)
                events[i] = ev.e[i].value;

        r = sd_bus_message_open_container(c->reply, 'r', "satatat");
        if (r < 0)
                return r;
        r = sd_bus_message_append_basic(c->reply, 's', t->path);
        if (r < 0)
                return r;
        r = sd_bus_message_append_array(c->reply, 't', props, sizeof(props));
        if (r < 0)
                return r;
        r = sd_bus_message_append_array(c->reply, 't', stats, n * sizeof(stats[0]));
        if (r < 0)
                return r;
        r = sd_bus_message_append_array(c->reply, 't', events, ev.n * sizeof(events[0]));
        if (r < 0)
                return r;
        r = sd_bus_message_close_container(c->reply);
        return r < 0 ? r : 0;
}

int bus_manager_method_dump_stats_compact(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        (void) error;
        return dump_reply(msg, userdata, "(satatat)", dump_compact_names, dump_compact_one);
}
