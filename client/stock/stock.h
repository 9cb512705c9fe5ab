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
 * Two modes, fixed per client (MEMBROKER_RSEQ=0 forces atomic mode):
 *
 *  - rseq mode (x86-64, glibc registered rseq, the kernel offers
 *    MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ): mb_page_alloc() and
 *    mb_page_free() are each one restartable sequence, committed by the
 *    store of the stock word (below), as tcmalloc's per-CPU caches do: no
 *    lock, no atomic instruction.  Slow paths and other CPUs take the
 *    stock's lock: a thread of the stock's CPU with a sequence that
 *    commits the LOCKED bit; another CPU by compare-and-swap of LOCKED |
 *    REMOTE, then an rseq fence on the stock's CPU (membarrier), which
 *    aborts a sequence that read the word before the swap, then a check
 *    that the word still holds the swapped value (a sequence that
 *    committed first overwrote it: try again).
 *
 *  - atomic mode (no rseq, valgrind, other architectures): every
 *    operation takes the lock bit by compare-and-swap.
 *
 * Whoever holds the lock, or a sequence committing on the stock's CPU
 * while nobody does, is the single writer of the CPU's stats slot, which
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

#include "core/client.h"
#include "macros.h"
#include "mb_stats_abi.h"
#include "core/pcpu_lock.h"

/*
 * The stock word.  A stock's page count, an operation count and its lock
 * live in one 64-bit word, so that one store publishes a whole fast-path
 * operation (the commit of a restartable sequence), as the "current" index
 * of tcmalloc's per-CPU slabs does:
 *
 *   bits  0..19  nr      pages in pages[]
 *   bits 20..61  ops     operations since an unlock last reset them (an
 *                        unlock resets them past STOCK_OPS_RESET, and
 *                        the fast path goes to one when it sees them past
 *                        it, which it checks every 64 operations: the
 *                        field never fills)
 *   bit  62      REMOTE  held by a remote locker (rseq mode)
 *   bit  63      LOCKED  held by a lock holder: the fast path keeps out
 *
 * Every operation and every unlock moves ops on, so the word never takes
 * the same value twice (short of 2^41 operations while a thread sleeps
 * between reading the word and comparing it again): a sequence that finds
 * the word it read at its start knows that nothing in the stock changed.
 */
#define STOCK_NR_BITS 20u
#define STOCK_NR_MASK ((UINT64_C(1) << STOCK_NR_BITS) - 1)
#define STOCK_OPS_ONE (UINT64_C(1) << STOCK_NR_BITS)
#define STOCK_OPS_RESET (UINT64_C(1) << 40)  /* an unlock past this many ops resets them */
#define STOCK_W_REMOTE (UINT64_C(1) << 62)
#define STOCK_W_LOCKED (UINT64_C(1) << 63)

/*
 * Stats in rseq mode.  A sequence may be aborted after any of its stores
 * and then run again, so it cannot add to a stats slot (the retry would add
 * twice).  It writes absolute values instead, computed from the word it
 * commits and from the stock's bases k_*, which change only under the lock
 * (and every unlock moves the word on):
 *
 *   v[PAGES]   = k_pages - nr
 *   v[STOCK]   = k_stock + nr
 *   v[PGALLOC] = (k_alloc2 + ops - nr) / 2    (allocs + frees == ops since
 *   v[PGFREE]  = (k_free2 + ops + nr) / 2      the unlock, frees - allocs ==
 *   updates    = k_updates + ops               nr - nr at the unlock)
 *
 * so a retry writes the same values again, and a later operation of any
 * thread overwrites them with its own.  A sequence aborted between its
 * stats stores and its commit leaves values one operation ahead in the
 * slot until the next operation on that CPU; the aborted thread makes sure
 * there is one: it retries on that CPU, or, moved to another, takes and
 * releases that CPU's stock remotely (an rseq fence: a system call), and
 * every lock in rseq mode first writes the slot from the word
 * (stock_materialize()), `updates` two past the last value, so the daemon
 * folds the slot again.  The slot stores are the sequence's last
 * instructions before the commit, and its abort handler tells an abort
 * before the first of them (nothing to settle, the common case) from one
 * after.
 *
 * In atomic mode (no rseq) every operation takes the lock and adds to the
 * slot, as slow paths do in both modes.
 */
struct stock {
        uint64_t word;              /* nr | ops | REMOTE | LOCKED (above) */
        uint32_t limit;             /* at most this many pages stay stocked
                                     * (2 * charge_batch); 0 = stock disabled
                                     * (after fork() or a lost connection) */
        uint32_t cap;               /* room in pages[] */
        void **pages;               /* LIFO: the most recently freed page is reused first */
        struct mb_stat_slot *slot;  /* this CPU's slot in the stats region */
        int64_t k_pages, k_stock;   /* rseq mode: the bases above */
        int64_t k_alloc2, k_free2;
        /* Second line, still this CPU's only. */
        uint64_t k_updates;
        int64_t k_total;            /* k_pages + k_stock (v[PAGES] = k_total - v[STOCK]) */
        uint32_t refill_ask;        /* atomic: this stock asked the library's
                                     * thread for a batch (stock_refill.c) */
} _cacheline_aligned_;

_Static_assert(sizeof(struct stock) == 2 * MB_CACHELINE_BYTES, "one stock per two cache lines");

/*
 * Stats slot updates for the slow paths (and the fast path of atomic
 * mode).  Same protocol as mb_stat_slot_add() (relaxed stores to v[], then
 * a release bump of `updates`), but one bump for the items that change
 * together.  Caller holds the stock lock (single writer of the slot).
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
 * it moves), so the others cost no access to the shared line at all.
 * Slow paths (charges, returns, drains, slab) mark every time.  A read over
 * the bus may therefore miss up to STOCK_STAT_DIRTY_UPDATES - 1 fast-path
 * updates per CPU slot of a client until the next one or the periodic
 * flush (StatsFlushIntervalSec), which walks every slot whatever the mark.
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

/* Pages in the stock (any caller: a racy peek without the lock). */
static inline uint32_t stock_nr(const struct stock *s) {
        return (uint32_t) (__atomic_load_n(&s->word, __ATOMIC_RELAXED) & STOCK_NR_MASK);
}

/* Set the count of the locked stock @s. */
static inline void stock_set_nr(struct stock *s, uint32_t nr) {
        __atomic_store_n(&s->word, (s->word & ~STOCK_NR_MASK) | nr, __ATOMIC_RELAXED);
}

/* "Caller holds the stock lock", asserted in debug builds. */
#define stock_assert_locked(s) mb_assert_debug(__atomic_load_n(&(s)->word, __ATOMIC_RELAXED) & STOCK_W_LOCKED)

/* Release the stock lock (stock.c). */
void stock_unlock(const mb_client *c, struct stock *s);

/* Whether a new client runs its stocks in rseq mode: when the process can
 * (pcpu_rseq_usable()), unless MEMBROKER_RSEQ=0.  Fixed per client. */
bool stock_rseq_mode(void);

/* Take the lock of stock @cpu from wherever the caller runs (the remote way
 * in rseq mode: an rseq fence on @cpu).  Slow paths only. */
struct stock *stock_lock_cpu(const mb_client *c, unsigned cpu);

/* Lock the stock of the CPU the caller runs on (in rseq mode a
 * restartable sequence, no atomic instruction; the holder may migrate). */
struct stock *stock_lock_this(const mb_client *c);

/* After an update of a stats slot, stock lock held: mark the region dirty
 * for the daemon (mb_stats_abi.h); a read of a shared line while the word
 * is set, no fence.  A reconnection publishes the new region before it
 * moves the slots, under each stock's lock, and unmaps the old one after:
 * a writer holding any stock lock sees a mapped region.  (The sequences of
 * rseq mode mark the region of the slot they write, inside the sequence:
 * the lock's fence on their CPU finishes or aborts them before it is
 * unmapped.) */
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

/* ---- spill.c: pages between the CPUs' stocks ---- */

#define STOCK_SPILL_FAR_BYTES (16u << 20) /* the spill's bound far from every limit */
#define STOCK_SPILL_ENV "MEMBROKER_SPILL" /* =0: no spill */

/* Room for every page @c's stocks and spill may hold: what a drain of
 * them all may collect. */
static inline size_t stock_room_all(const mb_client *c) {
        return (size_t) c->ncpus * (2u * c->batch_cap + 1u) + c->spill.cap;
}

/* Room for the spilled pages.  -ENOMEM. */
int stock_spill_setup(mb_client *c);

/* Spill up to @n pages (taken out of the locked, live stock @s's count)
 * for other CPUs: they count as stocked again (@s's slot); the caller
 * commits the slot.  Returns how many were kept (0 when the spill is full
 * or busy). */
size_t stock_spill_put_locked(mb_client *c, struct stock *s, void **pages, size_t n);

/* Take up to @n spilled pages into @out, no longer stocked (counted and
 * committed in the locked @s's slot).  Returns how many. */
size_t stock_spill_take_locked(mb_client *c, struct stock *s, void **out, size_t n);

/* Move up to a batch of spilled pages onto the locked stock @s, up to
 * three quarters of its limit (no stat moves).  Returns how many. */
size_t stock_spill_refill_locked(mb_client *c, struct stock *s);

/* The session is lost: the spilled pages are the daemon's. */
void stock_spill_clear(mb_client *c);

/* Pages in the spill (a racy peek). */
uint32_t stock_spill_count(const mb_client *c);

/* ---- stock_refill.c ---- */

/* The charging-ahead state of a new session: refill_low from the batch
 * (MEMBROKER_REFILL=0 disables it), headroom from the Welcome. */
void stock_refill_setup(mb_client *c);

/*
 * stock_populate_range() - fault in @n charged pages from @start, writable
 * (MADV_POPULATE_WRITE), as the refill does for pages charged ahead: one
 * call allocates and zeroes them for less than a fault each would cost.
 * Nothing with MEMBROKER_POPULATE=0 or a kernel without it.  The caller
 * holds no lock the application waits on for long.
 */
void stock_populate_range(const mb_client *c, void *start, size_t n);
/* The same for @n charged pages at @pages (runs of consecutive pages in
 * one call each). */
void stock_populate_pages(const mb_client *c, void **pages, size_t n);

/* A pop left CPU @cpu's stock below c->refill_low: ask the library's thread
 * for a batch, once until it answered (an eventfd write, nothing more).
 * Any thread, no lock held. */
void stock_refill_kick(mb_client *c, unsigned cpu);

/* Whether a pop that left @nr pages in its stock should ask for a batch. */
static inline bool stock_refill_due(const mb_client *c, uint32_t nr) {
        return _unlikely_(nr < c->refill.low);
}

/**
 * stock_refill_run - the library's thread: charge a batch for every stock
 * that asked and is still below its watermark, while the last Grant left
 * headroom for it, and stock it there.  Skips (the stock asks again) when
 * the application holds conn_lock: it is talking to the daemon itself.
 * No lock held.
 */
void stock_refill_run(mb_client *c);

/* Give @n pages (charged, not the application's) to the stock of CPU
 * @cpu, up to its limit; the rest go back to the daemon without waiting
 * for the Ack.  Returns 0 or a negative errno (the session broke). */
int stock_refill_put(mb_client *c, unsigned cpu, void **pages, size_t n);

/**
 * stock_adopt_batch_locked - the daemon told a new batch (Grant.charge_batch):
 * adopt it, clamped to what the stocks have room for, trimming every stock
 * to its new limit.  conn_lock held.  Returns 0 or a negative errno (the old
 * batch stays on -ENOMEM).
 */
int stock_adopt_batch_locked(mb_client *c, uint32_t batch);

/* Enter @c in the list of live clients, whose stocks are disabled in a
 * fork() child (stock/fork.c), and take it out again. */
void client_registry_add(mb_client *c);
void client_registry_remove(mb_client *c);
