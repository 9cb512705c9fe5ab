/* SPDX-License-Identifier: MIT */
/*
 * mb_stats_abi.h - layout of the shared statistics region.
 *
 * Every connected client gets its own stats region (a sealed memfd sent with
 * the Welcome).  The region holds one slot per CPU.  The client writes the
 * slot of the CPU it runs on, on its fast path, without any system call; the
 * daemon only reads the region, lazily, when it flushes (daemon/core/rstat.c,
 * modelled on the kernel's cgroup_rstat_updated()/cgroup_rstat_flush()).
 *
 * Slot protocol (writer side):
 *   - v[item] is a running signed sum: gauges (pages, stock, slab_*) move both
 *     ways, counters (pgalloc, pgfree) only grow.
 *   - after changing v[], the writer bumps `updates`.  The reader folds the
 *     slot only when `updates` differs from what it saw at the last flush,
 *     so an idle client costs a flush nothing (seed 001/004).
 *   - one writer per slot at a time (the client serialises per-CPU work), so
 *     relaxed load+store suffices; the reader tolerates a torn view across
 *     items because every value is folded as a delta against the last read.
 */
#pragma once

#include <stdint.h>

#define MB_STATS_MAGIC 0x6d627374u /* "mbst" */
#define MB_STATS_VERSION 1u

/* Activity items counted on the clients' (and daemon's) fast paths. */
enum mb_stat_item {
        MB_STAT_PAGES = 0,             /* pages in use by the application (pages) */
        MB_STAT_STOCK,                 /* pre-charged pages in the stock (pages)  */
        MB_STAT_SLAB_RECLAIMABLE,      /* bytes                                   */
        MB_STAT_SLAB_UNRECLAIMABLE,    /* bytes                                   */
        MB_STAT_PGALLOC,               /* count                                   */
        MB_STAT_PGFREE,                /* count                                   */
        MB_STAT_CHARGE_REQUESTS,       /* count (daemon side)                     */
        MB_STAT_UNCHARGE_REQUESTS,     /* count (daemon side)                     */
        MB_STAT_PGSCAN,                /* count (daemon side)                     */
        MB_STAT_PGSTEAL,               /* count (daemon side)                     */
        MB_STAT_THROTTLE_USEC,         /* usec  (daemon side)                     */
        _MB_STAT_NR,
};

#define MB_STAT_SLOT_WORDS 16 /* v[] words reserved in a slot: room to grow */

struct mb_stat_slot {
        int64_t v[MB_STAT_SLOT_WORDS - 1];
        uint64_t updates;
} __attribute__((aligned(64)));

_Static_assert(_MB_STAT_NR < MB_STAT_SLOT_WORDS, "slot too small");
_Static_assert(sizeof(struct mb_stat_slot) == 128, "slot is two cache lines");

struct mb_stats_region {
        uint32_t magic;
        uint32_t version;
        uint32_t nslots;  /* number of CPU slots that follow */
        uint32_t nitems;  /* _MB_STAT_NR of the writer */
        uint8_t _reserved[128 - 16];
        struct mb_stat_slot slot[];
};

static inline uint64_t mb_stats_region_bytes(uint32_t nslots) {
        return sizeof(struct mb_stats_region) + (uint64_t) nslots * sizeof(struct mb_stat_slot);
}

/* Slot writer helpers (the client library and the daemon): add @delta to
 * @item of @slot and bump `updates`.  Single writer per slot. */
static inline void mb_stat_slot_add(struct mb_stat_slot *slot, enum mb_stat_item item, int64_t delta) {
        __atomic_store_n(&slot->v[item], __atomic_load_n(&slot->v[item], __ATOMIC_RELAXED) + delta,
                         __ATOMIC_RELAXED);
        __atomic_store_n(&slot->updates, __atomic_load_n(&slot->updates, __ATOMIC_RELAXED) + 1,
                         __ATOMIC_RELEASE);
}
/* Multi-writer variant (atomic RMW) for slots shared between threads. */
static inline void mb_stat_slot_add_atomic(struct mb_stat_slot *slot, enum mb_stat_item item, int64_t delta) {
        __atomic_fetch_add(&slot->v[item], delta, __ATOMIC_RELAXED);
        __atomic_fetch_add(&slot->updates, 1, __ATOMIC_RELEASE);
}
