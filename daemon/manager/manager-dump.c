/* SPDX-License-Identifier: MIT */
/*
 * manager-dump.c - the state dump of SIGUSR1: every tenant's figures,
 * settings and right-sizing state, and the reclaimer's counters, logged one
 * line each (for admins and tests).
 */
#include <inttypes.h>
#include <stdio.h>

#include "arena.h"
#include "audit.h"
#include "log.h"
#include "manager.h"
#include "mb_stats_abi.h"
#include "reclaim.h"
#include "tenant_state.h"

/* ---- state dump (SIGUSR1) ---- */

static void fmt_limit(char *buf, size_t size, unsigned long v) {
        if (v >= (unsigned long) PAGE_COUNTER_MAX)
                snprintf(buf, size, "max");
        else
                snprintf(buf, size, "%lu", v);
}

static int log_state_cb(struct tenant *t, void *userdata) {
        struct tenant_state *ts = tenant_state_of(t);
        char max[32], high[32];
        uint64_t backed = 0;

        if (ts && ts->arena)
                (void) arena_backed_bytes(ts->arena, &backed);
        fmt_limit(max, sizeof(max), page_counter_get_max(&t->memory));
        fmt_limit(high, sizeof(high), page_counter_get_high_setting(&t->memory));
        log_info("state: tenant=%s usage=%lu max=%s high=%s low=%lu min=%lu peak=%lu clients=%u children=%u "
                 "events=low:%" PRIu64 ",high:%" PRIu64 ",max:%" PRIu64 ",oom:%" PRIu64 ",oom_kill:%" PRIu64
                 ",overrun:%" PRIu64 ",oom_group_kill:%" PRIu64 " "
                 "events_local=low:%" PRIu64 ",high:%" PRIu64 ",max:%" PRIu64 ",oom:%" PRIu64 ",oom_kill:%" PRIu64
                 ",overrun:%" PRIu64 ",oom_group_kill:%" PRIu64 " "
                 "pages=%" PRId64 " stock=%" PRId64 " charge_requests=%" PRId64 " uncharge_requests=%" PRId64
                 " arena_used=%" PRIu64 " arena_backed=%" PRIu64 " unaccounted=%" PRIu64 " pgscan=%" PRId64
                 " pgsteal=%" PRId64 " throttle_usec=%" PRId64 " draining=%s",
                 t->path, page_counter_read(&t->memory), max, high, page_counter_get_low(&t->memory),
                 page_counter_get_min(&t->memory), atomic_load(&t->memory.watermark), atomic_load(&t->nclients),
                 t->nchildren, atomic_load(&t->events[MB_EVENT_LOW]), atomic_load(&t->events[MB_EVENT_HIGH]),
                 atomic_load(&t->events[MB_EVENT_MAX]), atomic_load(&t->events[MB_EVENT_OOM]),
                 atomic_load(&t->events[MB_EVENT_OOM_KILL]), atomic_load(&t->events[MB_EVENT_OVERRUN]),
                 atomic_load(&t->events[MB_EVENT_OOM_GROUP_KILL]),
                 atomic_load(&t->events_local[MB_EVENT_LOW]), atomic_load(&t->events_local[MB_EVENT_HIGH]),
                 atomic_load(&t->events_local[MB_EVENT_MAX]), atomic_load(&t->events_local[MB_EVENT_OOM]),
                 atomic_load(&t->events_local[MB_EVENT_OOM_KILL]), atomic_load(&t->events_local[MB_EVENT_OVERRUN]),
                 atomic_load(&t->events_local[MB_EVENT_OOM_GROUP_KILL]),
                 t->rstat.value[MB_STAT_PAGES], t->rstat.value[MB_STAT_STOCK],
                 t->rstat.value[MB_STAT_CHARGE_REQUESTS], t->rstat.value[MB_STAT_UNCHARGE_REQUESTS],
                 ts && ts->arena ? arena_used(ts->arena) : 0, backed, audit_tenant_unaccounted(t),
                 t->rstat.value[MB_STAT_PGSCAN], t->rstat.value[MB_STAT_PGSTEAL], t->rstat.value[MB_STAT_THROTTLE_USEC],
                 atomic_load(&t->draining) ? "yes" : "no");
        return 0;
}

void manager_log_state(struct manager *m) {
        uint64_t n = ++m->state_dumps;

        manager_stats_refresh(m, m->b.tree->root, true);
        log_info("state: dump %" PRIu64 " begin: %u tenants, %u clients, page size %" PRIu64, n,
                 m->b.tree->ntenants, manager_nclients(m), m->b.page_size);
        (void) tenant_walk(m->b.tree->root, log_state_cb, m);
        {
                struct reclaim_stats rs;

                reclaim_get_stats(m->b.reclaimer, &rs);
                log_info("state: reclaim jobs=%" PRIu64 " rounds=%" PRIu64 " requests=%" PRIu64 " skipped=%" PRIu64
                         " timeouts=%" PRIu64 " late_answers=%" PRIu64 " pressure_events=%" PRIu64
                         " oom_kills=%" PRIu64,
                         rs.jobs, rs.rounds, rs.requests, rs.skipped, rs.timeouts, rs.late_answers,
                         rs.pressure_events, rs.oom_kills);
        }
        log_info("state: dump %" PRIu64 " end", n);
}
