/* SPDX-License-Identifier: MIT */
/*
 * stock.h - the per-CPU stock of pre-charged pages (design.md §3), the
 * client's counterpart of the kernel's struct memcg_stock_pcp.
 *
 * One struct stock per possible CPU, each on its own cache line; its page
 * array and its slot of the stats region live on lines of their own, so two
 * CPUs never write the same line.  Allocation pops, free pushes; only an
 * empty stock (refill: one Charge of charge_batch pages) or a stock that
 * would pass 2 * charge_batch (one Uncharge of charge_batch pages) leaves
 * the fast path (client.c).
 *
 * Locking: the kernel protects its per-CPU stock by disabling interrupts on
 * the local CPU; user space cannot, and any number of threads may run on one
 * CPU (or migrate between reading cpu_id and touching the stock).  So each
 * stock has a lock: an exchange-based spinlock that costs one uncontended
 * atomic on the fast path and, contended, spins briefly and then yields.
 * Contention is rare by construction: the holder is on this CPU (or just
 * migrated away) and holds the lock for a few instructions.  The lock also
 * makes the holder the single writer of the CPU's stats slot, which is what
 * mb_stats_abi.h requires.
 *
 * Lock order: the connection mutex (client.c) may be taken before a stock
 * lock, never after one; no stock lock is held across a system call.
 */
#pragma once

#include <sched.h>
#include <stdint.h>

#include "macros.h"
#include "mb_stats_abi.h"

struct stock {
        int lock;                   /* 0 free, 1 held */
        uint32_t nr;                /* pages in pages[] */
        uint32_t limit;             /* free() pushes on the fast path while nr < limit
                                     * (2 * charge_batch); 0 = stock disabled
                                     * (after fork() or a lost connection) */
        uint32_t cap;               /* room in pages[]: limit + 1 */
        void **pages;               /* LIFO: the most recently freed page is reused first */
        struct mb_stat_slot *slot;  /* this CPU's slot in the stats region */
} _cacheline_aligned_;

_Static_assert(sizeof(struct stock) == MB_CACHELINE_BYTES, "one stock per cache line");

#define STOCK_SPIN_LOOPS 64

static inline void stock_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Contended path of stock_lock(): spin on a plain load, then yield the CPU
 * to the holder (who may be preempted on this very CPU). */
static inline void stock_lock_wait(struct stock *s) {
        do {
                for (unsigned i = 0; i < STOCK_SPIN_LOOPS; i++) {
                        if (!__atomic_load_n(&s->lock, __ATOMIC_RELAXED))
                                break;
                        stock_cpu_relax();
                }
                if (__atomic_load_n(&s->lock, __ATOMIC_RELAXED))
                        sched_yield();
        } while (__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE));
}

static inline void stock_lock(struct stock *s) {
        if (_unlikely_(__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE)))
                stock_lock_wait(s);
}

static inline void stock_unlock(struct stock *s) {
        __atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE);
}

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

static inline void stock_slot_updated(struct mb_stat_slot *slot) {
        __atomic_store_n(&slot->updates, __atomic_load_n(&slot->updates, __ATOMIC_RELAXED) + 1,
                         __ATOMIC_RELEASE);
}

/* @n pages moved between the application and the stock: alloc (@n > 0)
 * or free (@n < 0). */
static inline void stock_stat_use(struct mb_stat_slot *slot, int64_t n) {
        stock_slot_add(slot, MB_STAT_PAGES, n);
        stock_slot_add(slot, MB_STAT_STOCK, -n);
        if (n > 0)
                stock_slot_add(slot, MB_STAT_PGALLOC, n);
        else
                stock_slot_add(slot, MB_STAT_PGFREE, -n);
        stock_slot_updated(slot);
}
