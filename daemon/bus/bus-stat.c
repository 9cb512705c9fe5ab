/* SPDX-License-Identifier: MIT */
/*
 * bus-stat.c - the figures the D-Bus API reports for a tenant: memory.stat
 * (GetStat, GetStatText, DumpStats), memory.events (GetEvents) and the
 * derived properties (bytes, effective protection).
 *
 * Freshness (docs/design.md): a read calls manager_stats_refresh(m, t, false),
 * which polls the stats sources of @t's subtree and flushes that subtree only
 * when more updates than the rstat flush threshold are pending there
 * (mem_cgroup_flush_stats() -> memcg_vmstats_needs_flush()).  So a read
 * either is exact, or misses at most that many updates, and never more than
 * StatsFlushIntervalSec= seconds of them (the periodic flush).  Charges
 * (MemoryCurrent, MemoryPeak, limits, events) are exact at every read: they
 * are counters the daemon owns, not rstat figures.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bus-internal.h"
#include "mb_stat_keys.h"
#include "protection.h"

uint64_t bus_page_size(struct manager *m) {
        return m->b.page_size;
}

uint64_t bus_pages_to_bytes(struct manager *m, unsigned long pages) {
        uint64_t ps = bus_page_size(m);

        if (pages > UINT64_MAX / ps)
                return UINT64_MAX;
        return (uint64_t) pages * ps;
}

uint64_t bus_limit_to_bytes(struct manager *m, unsigned long pages) {
        if (pages >= (unsigned long) PAGE_COUNTER_MAX)
                return UINT64_MAX;
        return bus_pages_to_bytes(m, pages);
}

int bus_stat_collect(struct manager *m, struct tenant *t, bool refreshed, struct bus_stat *ret) {
        if (!refreshed)
                manager_stats_refresh(m, t, false);
        *ret = (struct bus_stat) {};
        /* The daemon's key list (docs/design.md), read under stats_lock. */
        return manager_tenant_stat(m, t, &ret->e, &ret->n);
}

void bus_stat_done(struct bus_stat *s) {
        free(s->e);
        *s = (struct bus_stat) {};
}

void bus_events_collect(struct tenant *t, struct bus_events *ret) {
        size_t n = 0;

        _Static_assert((int) MB_EVENT_KEY_NR == (int) _MB_EVENT_NR &&
                               (int) MB_EVENT_KEY_LOW == (int) MB_EVENT_LOW &&
                               (int) MB_EVENT_KEY_HIGH == (int) MB_EVENT_HIGH &&
                               (int) MB_EVENT_KEY_MAX == (int) MB_EVENT_MAX &&
                               (int) MB_EVENT_KEY_OOM == (int) MB_EVENT_OOM &&
                               (int) MB_EVENT_KEY_OOM_KILL == (int) MB_EVENT_OOM_KILL &&
                               (int) MB_EVENT_KEY_OVERRUN == (int) MB_EVENT_OVERRUN &&
                               (int) MB_EVENT_KEY_OOM_GROUP_KILL == (int) MB_EVENT_OOM_GROUP_KILL,
                       "mb_event_keys[] follows enum mb_event");

        for (int i = 0; i < _MB_EVENT_NR; i++) {
                ret->e[n].key = mb_event_keys[i].name;
                ret->e[n].value = atomic_load_explicit(&t->events[i], memory_order_relaxed);
                n++;
        }
        for (int i = 0; i < _MB_EVENT_NR; i++) {
                ret->e[n].key = mb_event_keys[i].local_name;
                ret->e[n].value = atomic_load_explicit(&t->events_local[i], memory_order_relaxed);
                n++;
        }
        ret->n = n;
}

int bus_stat_append(sd_bus_message *reply, const struct bus_stat *s) {
        int r;

        r = sd_bus_message_open_container(reply, 'a', "(st)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < s->n; i++) {
                r = sd_bus_message_append(reply, "(st)", s->e[i].key, s->e[i].value);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(reply);
}

/* Effective protection relative to the root tenant, in bytes
 * (tenant_effective_protection()). */
void bus_effective_protection(struct manager *m, struct tenant *t, uint64_t *ret_emin_bytes,
                              uint64_t *ret_elow_bytes) {
        unsigned long emin, elow;

        tenant_effective_protection(t, m->b.tree ? m->b.tree->recursive_protection : false, &emin, &elow);
        *ret_emin_bytes = bus_pages_to_bytes(m, emin);
        *ret_elow_bytes = bus_pages_to_bytes(m, elow);
}
