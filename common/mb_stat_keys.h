/* SPDX-License-Identifier: MIT */
/*
 * mb_stat_keys.h - the keys of a tenant's memory.stat and memory.events as
 * the daemon reports them (GetStat, GetStatText, DumpStats, GetEvents) and
 * the tools show them: names, order, units, which have a per-tenant
 * (_local, .local) form, a sentence of help, and for each stat key the item
 * of the clients' stats regions it is read from (mb_stats_abi.h).
 *
 * Report order, the same as the kernel's memory.stat lists hierarchical
 * figures: every key's name in table order, then the local name of every
 * key that has one, in table order.  Events: every name, then every local
 * name.
 */
#pragma once

#include <stdbool.h>

#include "mb_stats_abi.h"

enum mb_stat_unit {
        MB_STAT_UNIT_BYTES,
        MB_STAT_UNIT_COUNT,
        MB_STAT_UNIT_USEC,
};

/* memory.stat keys, in report order. */
enum mb_stat_key {
        MB_STAT_KEY_PAGES,
        MB_STAT_KEY_STOCK,
        MB_STAT_KEY_SLAB,
        MB_STAT_KEY_SLAB_RECLAIMABLE,
        MB_STAT_KEY_SLAB_UNRECLAIMABLE,
        MB_STAT_KEY_PGALLOC,
        MB_STAT_KEY_PGFREE,
        MB_STAT_KEY_CHARGE_REQUESTS,
        MB_STAT_KEY_UNCHARGE_REQUESTS,
        MB_STAT_KEY_PGSCAN,
        MB_STAT_KEY_PGSTEAL,
        MB_STAT_KEY_THROTTLE_USEC,
        MB_STAT_KEY_ANON_MMAP,
        MB_STAT_KEY_UNACCOUNTED,
        _MB_STAT_KEY_NR,
};

/* Not read from one item of the stats regions (slab sums two; unaccounted
 * comes from the arena). */
#define MB_STAT_KEY_NO_ITEM (-1)

struct mb_stat_key_info {
        const char *name;       /* the tenant and its descendants */
        const char *local_name; /* the tenant alone; NULL: no such form */
        enum mb_stat_unit unit;
        int item;               /* enum mb_stat_item, or MB_STAT_KEY_NO_ITEM */
        bool pages;             /* the item counts pages: reported times the page size */
        const char *help;       /* one sentence, unit-neutral */
};

extern const struct mb_stat_key_info mb_stat_keys[_MB_STAT_KEY_NR];

/**
 * mb_stat_key_find - the key named @name, either form.  *@ret_local (may be
 * NULL) tells whether @name is the local form.  Returns NULL for a name not
 * in the table (a newer daemon's key).
 */
const struct mb_stat_key_info *mb_stat_key_find(const char *name, bool *ret_local);

/* The key read from stats-region item @item, or NULL. */
const struct mb_stat_key_info *mb_stat_key_of_item(enum mb_stat_item item);

/* memory.events keys, in the order the kernel's memory.events lists them;
 * the daemon's enum mb_event has the same values. */
enum mb_event_key {
        MB_EVENT_KEY_LOW,
        MB_EVENT_KEY_HIGH,
        MB_EVENT_KEY_MAX,
        MB_EVENT_KEY_OOM,
        MB_EVENT_KEY_OOM_KILL,
        MB_EVENT_KEY_OVERRUN, /* membroker's own: arena pages backed beyond the charge */
        MB_EVENT_KEY_OOM_GROUP_KILL,
        MB_EVENT_KEY_NR,
};

struct mb_event_key_info {
        const char *name;       /* "low": the tenant and its descendants */
        const char *local_name; /* "low.local": the tenant alone */
        const char *help;
};

extern const struct mb_event_key_info mb_event_keys[MB_EVENT_KEY_NR];
