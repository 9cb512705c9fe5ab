/* SPDX-License-Identifier: MIT */
/*
 * mb_stats_abi.h - layout of the shared statistics region.
 *
 * Every connected client gets its own stats region (a sealed memfd sent with
 * the Welcome).  The region holds one slot per CPU.  The client writes the
 * slot of the CPU it runs on, on its fast path, without any system call; the
 * daemon reads the region lazily, when it flushes (daemon/core/rstat.c,
 * modelled on the kernel's cgroup_rstat_updated()/cgroup_rstat_flush()), and
 * writes nothing in it but the header's `dirty` word.  The daemon keeps a
 * region of the same layout in its own memory for the counters its workers
 * write (one slot per worker).
 *
 * Slot protocol (writer side):
 *   - v[item] is a running signed sum: gauges (pages, stock, slab_*) move both
 *     ways, counters (pgalloc, pgfree) only grow.
 *   - after changing v[], the writer bumps `updates` by the update's weight:
 *     1, or the pages it moved (libmembroker), as memcg_rstat_updated()
 *     adds abs(val), so that the reader's count of pending updates -- which
 *     decides a flush on read -- grows with the size of a change.  The
 *     reader folds the slot only when `updates` differs from what it saw at
 *     the last flush, so an idle client costs a flush nothing.
 *   - one writer per slot at a time (the client serialises per-CPU work), so
 *     relaxed load+store suffices; the reader tolerates a torn view across
 *     items because every value is folded as a delta against the last read.
 *
 * Dirty word (region protocol, still version 1):
 *   - Without it the daemon learns that a region changed only by summing the
 *     `updates` of all nslots slots, O(CPUs) per region per poll.  A writer
 *     that sets MB_STATS_WRITER_MARKS_DIRTY in `writer_flags` promises to
 *     call mb_stats_region_mark_dirty() after its slot updates (after the
 *     release bump of `updates`): after every one, or, like the kernel's
 *     memcg_rstat_updated() with MEMCG_CHARGE_BATCH, after every Nth of a
 *     slot (libmembroker's fast path: every 64th, client/stock/stock.h), the
 *     periodic full walk below bounding what the others leave unseen.  The
 *     daemon reads and clears the one word `dirty` per region and walks the
 *     slots only when it was set.  A region without the flag (an older
 *     client) is walked on every poll, as before, so the version stays 1.
 *   - Writer, at attach: mb_stats_region_writer_attach() stores dirty = 1,
 *     then the flag (release), so a reader that sees the flag also sees the
 *     region dirty and walks what was written before.
 *   - Writer, after an update: if (relaxed load(dirty) == 0)
 *     store(dirty, 1, release).  While the word is 1 this is a read of a
 *     line that stays shared between all writers' CPUs; it is written (and
 *     bounced) once per clear by the daemon.  No fence, no atomic RMW on the
 *     hot path.
 *   - Reader: a relaxed load first (a clear word is not written, so its line
 *     stays shared), then exchange(dirty, 0, acquire); when it returned 1,
 *     the slot writes that preceded the writer's release store of 1 are
 *     visible to the walk that follows.
 *   - Tolerated race (store buffering): a writer's slot store may still sit
 *     in its CPU's store buffer when its load of `dirty` returns the 1 the
 *     daemon is about to clear; the daemon's walk then misses that store and
 *     the word is 0 afterwards.  The write is not lost (slots are running
 *     sums, folded as deltas): the next update of the region sets the word
 *     again, and the daemon's periodic flush walks every region regardless
 *     of the word, so a figure is never more than one flush interval
 *     (StatsFlushIntervalSec) stale -- the same bound as without the word.
 *   - `dirty` is alone on the header's second cache line, so the exchange
 *     does not disturb the read-mostly first line (magic, nslots, flags).
 */
#pragma once

#include <stdbool.h>
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
        MB_STAT_ANON_MMAP,             /* pages charged outside the arena: the
                                        * clients' own anonymous mappings
                                        * (pages, daemon side)                    */
        _MB_STAT_NR,
};

#define MB_STAT_SLOT_WORDS 16 /* v[] words reserved in a slot: room to grow */

struct mb_stat_slot {
        int64_t v[MB_STAT_SLOT_WORDS - 1];
        uint64_t updates;
} __attribute__((aligned(64)));

_Static_assert(_MB_STAT_NR < MB_STAT_SLOT_WORDS, "slot too small");
_Static_assert(sizeof(struct mb_stat_slot) == 128, "slot is two cache lines");

/* writer_flags: the writer maintains `dirty` (see above). */
#define MB_STATS_WRITER_MARKS_DIRTY 1u

struct mb_stats_region {
        uint32_t magic;
        uint32_t version;
        uint32_t nslots;       /* number of CPU slots that follow */
        uint32_t nitems;       /* _MB_STAT_NR of the writer */
        uint32_t writer_flags; /* MB_STATS_WRITER_*, set once by the writer; 0 in older regions */
        uint8_t _reserved0[64 - 20];
        /* Second cache line, alone: set by writers, exchanged by the daemon. */
        uint64_t dirty;
        uint8_t _reserved1[64 - 8];
        struct mb_stat_slot slot[];
};

_Static_assert(sizeof(struct mb_stats_region) == 128, "the region header is two cache lines");
_Static_assert(__builtin_offsetof(struct mb_stats_region, writer_flags) == 16, "writer_flags moved");
_Static_assert(__builtin_offsetof(struct mb_stats_region, dirty) == 64, "dirty is alone on line 2");
_Static_assert(__builtin_offsetof(struct mb_stats_region, slot) == 128, "slots start on line 3");

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

/* The region whose slot @index is @slot (the writer knows both). */
static inline struct mb_stats_region *mb_stats_region_of_slot(struct mb_stat_slot *slot, unsigned index) {
        return (struct mb_stats_region *) ((char *) (slot - index) - __builtin_offsetof(struct mb_stats_region, slot));
}

/* Writer side: tell the daemon that a slot of @region changed, after the
 * slot update.  A relaxed read while the word is already set; a release
 * store of 1 only after the daemon cleared it.  Call from every writer of a
 * region whose writer_flags has MB_STATS_WRITER_MARKS_DIRTY. */
static inline void mb_stats_region_mark_dirty(struct mb_stats_region *region) {
        if (!__atomic_load_n(&region->dirty, __ATOMIC_RELAXED))
                __atomic_store_n(&region->dirty, 1, __ATOMIC_RELEASE);
}

/* Writer side, once, before or after the first slot update: promise to
 * maintain `dirty` from now on.  The region is marked dirty first, so a
 * reader that sees the flag walks everything written before. */
static inline void mb_stats_region_writer_attach(struct mb_stats_region *region) {
        __atomic_store_n(&region->dirty, 1, __ATOMIC_RELAXED);
        __atomic_fetch_or(&region->writer_flags, MB_STATS_WRITER_MARKS_DIRTY, __ATOMIC_RELEASE);
}

/* Reader side: clear `dirty` and return whether it was set.  A clear word
 * is only read (the line stays shared with the writers' CPUs); a set one is
 * exchanged with 0, whose acquire pairs with mb_stats_region_mark_dirty()'s
 * release store. */
static inline bool mb_stats_region_test_and_clear_dirty(struct mb_stats_region *region) {
        if (!__atomic_load_n(&region->dirty, __ATOMIC_RELAXED))
                return false;
        return __atomic_exchange_n(&region->dirty, 0, __ATOMIC_ACQUIRE) != 0;
}

/* Reader side: does the writer maintain `dirty`? */
static inline bool mb_stats_region_marks_dirty(const struct mb_stats_region *region) {
        return __atomic_load_n(&region->writer_flags, __ATOMIC_ACQUIRE) & MB_STATS_WRITER_MARKS_DIRTY;
}
