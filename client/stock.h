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
 * Locking.  The kernel protects its per-CPU stock by disabling interrupts on
 * the local CPU; user space cannot, and any number of threads may run on one
 * CPU (or migrate between reading cpu_id and touching the stock).  So each
 * stock has a lock word, taken in one of two ways, fixed per client:
 *
 *  - rseq mode (x86-64, glibc registered rseq, the kernel offers
 *    MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ): a thread takes the lock of the
 *    CPU it runs on inside a restartable sequence -- "if cpu_id is still
 *    this CPU and lock == 0, store STOCK_LOCKED_LOCAL" -- with plain loads
 *    and stores, no atomic instruction.  Two threads of one CPU cannot both
 *    pass: the kernel aborts a sequence that is preempted, migrated or
 *    signalled before its final store, and the restarted one sees the lock.
 *    The holder may migrate afterwards; threads on that CPU then find the
 *    lock taken and wait.  Another CPU's stock is taken "remotely": compare
 *    and swap 0 -> STOCK_LOCKED_REMOTE, then an rseq membarrier on that CPU
 *    (aborting any sequence in flight there that read 0 before the swap),
 *    then check that the word is still ours.  The remote way is for slow
 *    paths only (draining all stocks, a lost session).
 *
 *  - atomic mode (everything else, or MEMBROKER_RSEQ=0): an exchange-based
 *    spinlock, one uncontended atomic per acquisition; local and remote
 *    acquisitions are the same.
 *
 * Contended, both spin briefly and then yield to the holder (which may be
 * preempted on this very CPU).  The lock also makes its holder the single
 * writer of the CPU's stats slot, which mb_stats_abi.h requires.
 *
 * Lock order: the connection mutex (client.c) may be taken before a stock
 * lock, never after one; no stock lock is held across a system call other
 * than the remote acquisition's membarrier.
 */
#pragma once

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macros.h"
#include "mb_stats_abi.h"

#define STOCK_UNLOCKED 0
#define STOCK_LOCKED_LOCAL 1  /* taken by a thread of this CPU (rseq) or by exchange (atomic mode) */
#define STOCK_LOCKED_REMOTE 2 /* taken from another CPU in rseq mode */

struct stock {
        union {
                struct {
                        int lock;           /* STOCK_UNLOCKED / STOCK_LOCKED_* */
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

#define STOCK_SPIN_LOOPS 64

static inline void stock_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Wait until @s looks free: spin on a plain load, then yield the CPU to the
 * holder (who may be preempted on this very CPU). */
static inline void stock_wait_unlocked(const struct stock *s) {
        while (__atomic_load_n(&s->lock, __ATOMIC_RELAXED) != STOCK_UNLOCKED) {
                for (unsigned i = 0; i < STOCK_SPIN_LOOPS; i++) {
                        if (__atomic_load_n(&s->lock, __ATOMIC_RELAXED) == STOCK_UNLOCKED)
                                return;
                        stock_cpu_relax();
                }
                sched_yield();
        }
}

/* Atomic mode: take @s by exchange. */
static inline void stock_lock_atomic(struct stock *s) {
        while (_unlikely_(__atomic_exchange_n(&s->lock, STOCK_LOCKED_LOCAL, __ATOMIC_ACQUIRE) != STOCK_UNLOCKED))
                stock_wait_unlocked(s);
}

static inline void stock_unlock(struct stock *s) {
        __atomic_store_n(&s->lock, STOCK_UNLOCKED, __ATOMIC_RELEASE);
}

/* Set nr to @nr and unlock, in one store (little-endian: lock is the low
 * half of lock_nr). */
static inline void stock_unlock_nr(struct stock *s, uint32_t nr) {
        _Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "lock_nr layout");
        __atomic_store_n(&s->lock_nr, (uint64_t) nr << 32 | STOCK_UNLOCKED, __ATOMIC_RELEASE);
}

#if defined(__x86_64__)
#define STOCK_HAVE_RSEQ 1
#define STOCK_RSEQ_SIG 0x53053053 /* glibc's RSEQ_SIG on x86 */

enum { STOCK_RSEQ_LOCKED, STOCK_RSEQ_BUSY, STOCK_RSEQ_ABORTED };

/*
 * stock_rseq_trylock - rseq mode: take @lock if the thread still runs on
 * @cpu and the lock is free.  @rseq_offset is glibc's __rseq_offset (the
 * struct rseq from the thread pointer).  Returns STOCK_RSEQ_LOCKED,
 * STOCK_RSEQ_BUSY (held by someone), or STOCK_RSEQ_ABORTED (migrated,
 * preempted or signalled: read the CPU again and retry).
 *
 * The critical section is [1, 2): it publishes its descriptor in
 * rseq->rseq_cs (offset 8), compares rseq->cpu_id (offset 4) and commits
 * with the single store of the lock word.  The abort handler 4 is preceded
 * by the signature glibc registered, as the kernel requires.
 */
static inline int stock_rseq_trylock(int *lock, uint32_t cpu, ptrdiff_t rseq_offset) {
        __asm__ __volatile__ goto(
                ".pushsection __rseq_cs, \"aw\"\n\t"
                ".balign 32\n\t"
                "3:\n\t"
                ".long 0x0, 0x0\n\t"                    /* version, flags */
                ".quad 1f, (2f - 1f), 4f\n\t"           /* start_ip, post_commit_offset, abort_ip */
                ".popsection\n\t"
                "1:\n\t"
                "leaq 3b(%%rip), %%rax\n\t"
                "movq %%rax, %%fs:8(%[off])\n\t"
                "cmpl %[cpu], %%fs:4(%[off])\n\t"
                "jnz 4f\n\t"
                "cmpl $0, (%[lock])\n\t"
                "jnz %l[busy]\n\t"
                "movl $1, (%[lock])\n\t"                /* commit: STOCK_LOCKED_LOCAL */
                "2:\n\t"
                ".pushsection __rseq_failure, \"ax\"\n\t"
                ".byte 0x0f, 0xb9, 0x3d\n\t"            /* ud1 <sig>(%rip), %edi: the signature */
                ".long 0x53053053\n\t"
                "4:\n\t"
                "jmp %l[aborted]\n\t"
                ".popsection\n\t"
                :
                : [off] "r"(rseq_offset), [cpu] "r"(cpu), [lock] "r"(lock)
                : "memory", "cc", "rax"
                : busy, aborted);
        return STOCK_RSEQ_LOCKED;
busy:
        return STOCK_RSEQ_BUSY;
aborted:
        return STOCK_RSEQ_ABORTED;
}
#else
#define STOCK_HAVE_RSEQ 0
#endif

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

/* Returns the slot's new update count. */
static inline uint64_t stock_slot_updated(struct mb_stat_slot *slot) {
        uint64_t u = __atomic_load_n(&slot->updates, __ATOMIC_RELAXED) + 1;

        __atomic_store_n(&slot->updates, u, __ATOMIC_RELEASE);
        return u;
}

/*
 * The fast path marks its stats region dirty (mb_stats_abi.h) only once per
 * STOCK_STAT_DIRTY_UPDATES updates of a slot, as the kernel's
 * memcg_rstat_updated() calls cgroup_rstat_updated() only once a CPU's
 * pending updates pass MEMCG_CHARGE_BATCH: the test is on the update count
 * just computed, so the other 63 cost no memory access at all.  Slow paths
 * (charges, returns, drains, slab) mark every time.  A read over the bus
 * may therefore miss up to STOCK_STAT_DIRTY_UPDATES - 1 fast-path updates
 * per CPU slot of a client until the next one or the periodic flush
 * (StatsFlushIntervalSec), which walks every slot whatever the mark.
 */
#define STOCK_STAT_DIRTY_UPDATES 64u

/* @n pages moved between the application and the stock: alloc (@n > 0)
 * or free (@n < 0).  True when the region is due for a dirty mark. */
static inline bool stock_stat_use(struct mb_stat_slot *slot, int64_t n) {
        stock_slot_add(slot, MB_STAT_PAGES, n);
        stock_slot_add(slot, MB_STAT_STOCK, -n);
        if (n > 0)
                stock_slot_add(slot, MB_STAT_PGALLOC, n);
        else
                stock_slot_add(slot, MB_STAT_PGFREE, -n);
        return (stock_slot_updated(slot) & (STOCK_STAT_DIRTY_UPDATES - 1)) == 0;
}
