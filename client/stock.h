/* SPDX-License-Identifier: MIT */
/*
 * stock.h - the per-CPU stock of pre-charged pages, the client's
 * counterpart of the kernel's struct memcg_stock_pcp.
 *
 * One struct stock per possible CPU, each on its own cache line; its page
 * array and its slot of the stats region live on lines of their own, so two
 * CPUs never write the same line.  Allocation pops, free pushes; only an
 * empty stock (refill: one Charge of charge_batch pages) or a stock that
 * would pass 2 * charge_batch (one Uncharge of charge_batch pages) leaves
 * the fast path (stock.c).
 *
 * Locking.  Each stock has a per-CPU lock word (pcpu_lock.h), taken in
 * rseq mode (no atomic instruction on the fast path) or in atomic mode,
 * fixed per client (MEMBROKER_RSEQ=0 forces atomic mode).  The lock makes
 * its holder the single writer of the CPU's stats slot, which
 * mb_stats_abi.h requires.
 *
 * Lock order: the connection mutex (client.h) may be taken before a stock
 * lock, never after one; no stock lock is held across a system call other
 * than the remote acquisition's membarrier.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "client.h"
#include "macros.h"
#include "mb_stats_abi.h"
#include "pcpu_lock.h"

struct stock {
        union {
                struct {
                        int lock;           /* the per-CPU lock word (pcpu_lock.h) */
                        uint32_t nr;        /* pages in pages[] */
                };
                uint64_t lock_nr;           /* both: the fast path releases the lock and
                                             * sets nr with one store (stock_unlock_nr) */
        };
        uint32_t limit;             /* at most this many pages stay stocked
                                     * (2 * charge_batch); 0 = stock disabled
                                     * (after fork() or a lost connection) */
        uint32_t cap;               /* room in pages[] */
        void **pages;               /* LIFO: the most recently freed page is reused first */
        struct mb_stat_slot *slot;  /* this CPU's slot in the stats region */
} _cacheline_aligned_;

_Static_assert(sizeof(struct stock) == MB_CACHELINE_BYTES, "one stock per cache line");

/*
 * Stats slot updates for the fast path.  Same protocol as mb_stat_slot_add()
 * (relaxed stores to v[], then a release bump of `updates`), but one bump for
 * the items that change together.  Caller holds the stock lock (single
 * writer of the slot).
 */
static inline void stock_slot_add(struct mb_stat_slot *slot, enum mb_stat_item item, int64_t delta) {
        __atomic_store_n(&slot->v[item], __atomic_load_n(&slot->v[item], __ATOMIC_RELAXED) + delta,
                         __ATOMIC_RELAXED);
}

/* Count an update of @weight (> 0) in the slot: memcg_rstat_updated() adds
 * abs(val) to the pending updates, so that a bulk change of thousands of
 * pages counts as thousands toward the daemon's flush threshold, not as
 * one.  Returns the slot's new update count. */
static inline uint64_t stock_slot_updated(struct mb_stat_slot *slot, uint64_t weight) {
        uint64_t u = __atomic_load_n(&slot->updates, __ATOMIC_RELAXED) + weight;

        __atomic_store_n(&slot->updates, u, __ATOMIC_RELEASE);
        return u;
}

/*
 * The fast path marks its stats region dirty (mb_stats_abi.h) only once per
 * STOCK_STAT_DIRTY_UPDATES updates of a slot, as the kernel's
 * memcg_rstat_updated() calls cgroup_rstat_updated() only once a CPU's
 * pending updates pass MEMCG_CHARGE_BATCH: the test is whether the update
 * count just computed crossed a multiple of 64 (an update weighs the pages
 * it moves), so the others cost no memory access at all.  Slow paths
 * (charges, returns, drains, slab) mark every time.  A read over the bus
 * may therefore miss up to STOCK_STAT_DIRTY_UPDATES - 1 fast-path updates
 * per CPU slot of a client until the next one or the periodic flush
 * (StatsFlushIntervalSec), which walks every slot whatever the mark.
 */
#define STOCK_STAT_DIRTY_UPDATES 64u

/* @n pages moved between the application and the stock: alloc (@n > 0)
 * or free (@n < 0).  True when the region is due for a dirty mark. */
static inline bool stock_stat_use(struct mb_stat_slot *slot, int64_t n) {
        uint64_t w = (uint64_t) (n > 0 ? n : -n), u;

        stock_slot_add(slot, MB_STAT_PAGES, n);
        stock_slot_add(slot, MB_STAT_STOCK, -n);
        if (n > 0)
                stock_slot_add(slot, MB_STAT_PGALLOC, n);
        else
                stock_slot_add(slot, MB_STAT_PGFREE, -n);
        u = stock_slot_updated(slot, w);
        return (u ^ (u - w)) >= STOCK_STAT_DIRTY_UPDATES;
}

/* ---- the stock lock ---- */

static inline void stock_unlock(struct stock *s) {
        pcpu_unlock(&s->lock);
}

/* Set nr to @nr and unlock, in one store (little-endian: lock is the low
 * half of lock_nr). */
static inline void stock_unlock_nr(struct stock *s, uint32_t nr) {
        _Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "lock_nr layout");
        __atomic_store_n(&s->lock_nr, (uint64_t) nr << 32 | PCPU_UNLOCKED, __ATOMIC_RELEASE);
}

/* "Caller holds the stock lock", asserted in debug builds. */
#define stock_assert_locked(s) mb_assert_debug(pcpu_locked(&(s)->lock))

/* Whether a new client takes its stock locks in rseq mode (pcpu_lock.h):
 * when the process can, unless MEMBROKER_RSEQ=0.  Fixed per client. */
bool stock_rseq_mode(void);

/* Take the lock of stock @cpu from wherever the caller runs (the remote way
 * in rseq mode).  Slow paths only. */
struct stock *stock_lock_cpu(const mb_client *c, unsigned cpu);

/* stock_lock_this() when the first attempt failed: busy, aborted, no valid
 * rseq CPU, or atomic mode. */
struct stock *stock_lock_slow(const mb_client *c);

/* Lock the stock of the CPU the caller runs on: the fast path.  In rseq
 * mode one attempt inline, without any atomic instruction. */
static inline __attribute__((always_inline)) struct stock *stock_lock_this(const mb_client *c) {
#if PCPU_HAVE_RSEQ
        if (_likely_(c->rseq_lock)) {
                uint32_t cpu = pcpu_rseq_cpu(c->rseq_offset);

                if (_likely_(cpu < c->ncpus)) {
                        struct stock *s = &c->stocks[cpu];

                        if (_likely_(pcpu_rseq_trylock(&s->lock, cpu, c->rseq_area) == PCPU_RSEQ_LOCKED))
                                return s;
                }
        }
#endif
        return stock_lock_slow(c);
}

/* After an update of a stats slot, stock lock held: mark the region dirty
 * for the daemon (mb_stats_abi.h); a read of a shared line while the word
 * is set, no fence.  A reconnection publishes the new region before it
 * moves the slots, under each stock's lock, and unmaps the old one after:
 * a writer holding any stock lock sees a mapped region. */
static inline __attribute__((always_inline)) void stock_stat_dirty(const mb_client *c) {
        mb_stats_region_mark_dirty(__atomic_load_n(&c->stats, __ATOMIC_RELAXED));
}

/* A slow path's update of @s's slot, moving @weight pages (at least 1 is
 * counted), is complete: bump `updates` by the weight and mark the region
 * (every time; the fast path marks every STOCK_STAT_DIRTY_UPDATES). */
static inline void stock_slot_commit(const mb_client *c, struct stock *s, uint64_t weight) {
        stock_assert_locked(s);
        stock_slot_updated(s->slot, weight > 0 ? weight : 1);
        stock_stat_dirty(c);
}

/* The fast path's stats: @n pages between the application and the stock
 * (stock_stat_use()), the region marked when it is due. */
static inline __attribute__((always_inline)) void stock_use(const mb_client *c, struct stock *s, int64_t n) {
        if (_unlikely_(stock_stat_use(s->slot, n)))
                stock_stat_dirty(c);
}

/* ---- stock.c ---- */

/* Allocate @c's stocks (room for 2 * batch_cap + 1 pages each), every one
 * with its slot of @c->stats.  -ENOMEM. */
int stock_setup(mb_client *c);

/* Empty and disable every stock: the session is lost, and the daemon has
 * freed (or will free) every page this client held, stocked or not. */
void stock_disable_all(mb_client *c);

/* @n pages went to the application (@n > 0, pgalloc) or came back from it
 * (@n < 0, pgfree) on a slow path, outside the stock: account them in the
 * slot of the locked stock @s, and unlock it. */
void stock_account_unlock(const mb_client *c, struct stock *s, int64_t n);

/* Move the @take topmost pages of the locked stock @s to @out. */
void stock_take_locked(const mb_client *c, struct stock *s, void **out, uint32_t take);

/* Take up to @n stocked pages from any CPU (the local drain_all_stock()).
 * Returns how many were taken.  No stock lock held. */
size_t stock_take_all(mb_client *c, void **out, size_t n);

/**
 * stock_adopt_batch_locked - the daemon told a new batch (Grant.charge_batch):
 * adopt it, clamped to what the stocks have room for, trimming every stock
 * to its new limit.  conn_lock held.  Returns 0 or a negative errno (the old
 * batch stays on -ENOMEM).
 */
int stock_adopt_batch_locked(mb_client *c, uint32_t batch);
