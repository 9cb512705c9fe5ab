/* SPDX-License-Identifier: MIT */
/*
 * pcpu_lock.h - which CPU the calling thread runs on, the rseq fence on a
 * CPU, and the per-CPU lock word of the slab caches (slab.h): the
 * user-space stand-in for the kernel's local_lock() around a per-CPU
 * structure (kmem_cache_cpu).  Neither the slab caches nor the page stocks
 * (stock.h) take a lock on their fast paths: each operation is one
 * restartable sequence committed by the store of a word.  The slab
 * sequences read this lock word and leave to the locked path while it is
 * held; the slab slow paths and remote operations take it as below (the
 * page stocks take their word's lock bits the same two ways).
 *
 * The CPU.  glibc (2.35 and later) registers a struct rseq for every thread
 * it starts; the kernel keeps its cpu_id current on every return to user
 * space.  The area sits at a fixed offset (__rseq_offset) from the thread
 * pointer, so reading the CPU is one load.  When glibc did not register
 * rseq (__rseq_size == 0: old kernel, glibc.pthread.rseq=0 tunable, a
 * seccomp filter, valgrind) or registration failed for this thread (cpu_id
 * is then RSEQ_CPU_ID_UNINITIALIZED or RSEQ_CPU_ID_REGISTRATION_FAILED, both
 * huge), sched_getcpu() answers (vDSO getcpu on x86-64, still no system
 * call).  The value can be stale the moment it is read (the thread may
 * migrate); callers only use it to pick a per-CPU structure that they then
 * lock.
 *
 * The lock.  The kernel protects a per-CPU structure by disabling
 * preemption or interrupts on the local CPU; user space cannot, and any
 * number of threads may run on one CPU (or migrate between reading cpu_id
 * and touching the structure).  So each structure has a lock word (an int),
 * taken in one of two ways, fixed per user of the lock:
 *
 *  - rseq mode (x86-64, glibc registered rseq, the kernel offers
 *    MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ): a thread takes the lock of the
 *    CPU it runs on inside a restartable sequence -- "if cpu_id is still
 *    this CPU and lock == 0, store PCPU_LOCKED_LOCAL" -- with plain loads
 *    and stores, no atomic instruction.  Two threads of one CPU cannot both
 *    pass: the kernel aborts a sequence that is preempted, migrated or
 *    signalled before its final store, and the restarted one sees the lock.
 *    The holder may migrate afterwards; threads on that CPU then find the
 *    lock taken and wait.  Another CPU's lock is taken "remotely"
 *    (pcpu_lock_remote()): compare and swap 0 -> PCPU_LOCKED_REMOTE tagged
 *    with the caller's thread id, then an rseq membarrier on that CPU
 *    (aborting any sequence in flight there that read 0 before the swap),
 *    then check that the word still holds the caller's own value.
 *    The remote way is for slow paths (drains, a lost session, stats).
 *
 *  - atomic mode (everything else, or turned off by an environment
 *    variable of the user): an exchange-based spinlock, one uncontended
 *    atomic per acquisition; local and remote acquisitions are the same.
 *
 * Contended, both spin briefly and then yield to the holder (which may be
 * preempted on this very CPU).  Releasing is one store of 0, whoever holds.
 */
#pragma once

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/rseq.h>

#include "macros.h"

/* ---- the CPU ---- */

/* Offset of rseq cpu_id from the thread pointer, or -1 without rseq. */
static inline ptrdiff_t pcpu_rseq_cpu_offset(void) {
        if (__rseq_size < offsetof(struct rseq, cpu_id) + sizeof(uint32_t))
                return -1;
        return __rseq_offset + (ptrdiff_t) offsetof(struct rseq, cpu_id);
}

/* rseq cpu_id of the calling thread; @cpu_offset is pcpu_rseq_cpu_offset()
 * >= 0.  Huge when the kernel did not register this thread. */
static inline uint32_t pcpu_rseq_cpu(ptrdiff_t cpu_offset) {
        return __atomic_load_n((const uint32_t *) ((const char *) __builtin_thread_pointer() + cpu_offset),
                               __ATOMIC_RELAXED);
}

/* sched_getcpu(), folded into [0, ncpus). */
static inline unsigned pcpu_fallback_cpu(unsigned ncpus) {
        int cpu = sched_getcpu();

        if (cpu < 0)
                return 0;
        return (unsigned) cpu < ncpus ? (unsigned) cpu : (unsigned) cpu % ncpus;
}

/**
 * pcpu_current_cpu - the CPU of the calling thread, always < @ncpus (a CPU
 * number beyond @ncpus, which a hot-plugged CPU could give, is folded in).
 * @cpu_offset is pcpu_rseq_cpu_offset(), cached by the caller.
 */
static inline unsigned pcpu_current_cpu(ptrdiff_t cpu_offset, unsigned ncpus) {
        if (_likely_(cpu_offset >= 0)) {
                uint32_t cpu = pcpu_rseq_cpu(cpu_offset);

                if (_likely_(cpu < ncpus))
                        return cpu;
        }
        return pcpu_fallback_cpu(ncpus);
}

/* ---- the lock word ---- */

#define PCPU_UNLOCKED 0
#define PCPU_LOCKED_LOCAL 1  /* taken by a thread of this CPU (rseq) or by exchange (atomic mode) */
#define PCPU_LOCKED_REMOTE 2 /* taken from another CPU in rseq mode (low bits; the thread id above) */
#define PCPU_REMOTE_TID_SHIFT 2

#define PCPU_SPIN_LOOPS 64

static inline void pcpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Whether @lock is held by anyone (debug assertions of "lock held"). */
static inline bool pcpu_locked(const int *lock) {
        return __atomic_load_n(lock, __ATOMIC_RELAXED) != PCPU_UNLOCKED;
}

/* Wait until @lock looks free: spin on a plain load, then yield the CPU to
 * the holder (who may be preempted on this very CPU). */
static inline void pcpu_wait_unlocked(const int *lock) {
        while (__atomic_load_n(lock, __ATOMIC_RELAXED) != PCPU_UNLOCKED) {
                for (unsigned i = 0; i < PCPU_SPIN_LOOPS; i++) {
                        if (__atomic_load_n(lock, __ATOMIC_RELAXED) == PCPU_UNLOCKED)
                                return;
                        pcpu_relax();
                }
                sched_yield();
        }
}

/* Atomic mode: take @lock by exchange. */
static inline void pcpu_lock_atomic(int *lock) {
        while (_unlikely_(__atomic_exchange_n(lock, PCPU_LOCKED_LOCAL, __ATOMIC_ACQUIRE) != PCPU_UNLOCKED))
                pcpu_wait_unlocked(lock);
}

static inline void pcpu_unlock(int *lock) {
        mb_assert_debug(pcpu_locked(lock));
        __atomic_store_n(lock, PCPU_UNLOCKED, __ATOMIC_RELEASE);
}

#if defined(__x86_64__)
#define PCPU_HAVE_RSEQ 1
#define PCPU_RSEQ_SIG 0x53053053 /* glibc's RSEQ_SIG on x86 */

enum { PCPU_RSEQ_LOCKED, PCPU_RSEQ_BUSY, PCPU_RSEQ_ABORTED };

/*
 * The entry of a restartable sequence, x86-64, for inline asm with operands
 * %[off] (glibc's __rseq_offset: the struct rseq from %fs) and %[cpu]: emit
 * the sequence's descriptor into the __rseq_cs section (start label 1,
 * commit label 2, abort handler 4, which the caller places after glibc's
 * signature), publish it in rseq->rseq_cs (offset 8) and leave to the abort
 * handler unless rseq->cpu_id (offset 4) is %[cpu].  Clobbers %rax.  The
 * stocks' and the slab caches' sequences begin with it.
 */
#define PCPU_RSEQ_ENTER                                                        \
        ".pushsection __rseq_cs, \"aw\"\n\t"                                   \
        ".balign 32\n\t"                                                       \
        "3:\n\t"                                                               \
        ".long 0x0, 0x0\n\t"                 /* version, flags */              \
        ".quad 1f, (2f - 1f), 4f\n\t"        /* start, post_commit_offset, abort */ \
        ".popsection\n\t"                                                      \
        "1:\n\t"                                                               \
        "leaq 3b(%%rip), %%rax\n\t"                                            \
        "movq %%rax, %%fs:8(%[off])\n\t"                                       \
        "cmpl %[cpu], %%fs:4(%[off])\n\t"                                      \
        "jnz 4f\n\t"

/*
 * pcpu_rseq_trylock - rseq mode: take @lock if the thread still runs on
 * @cpu and the lock is free.  @rseq_area is glibc's __rseq_offset (the
 * struct rseq from the thread pointer).  Returns PCPU_RSEQ_LOCKED,
 * PCPU_RSEQ_BUSY (held by someone), or PCPU_RSEQ_ABORTED (another CPU,
 * migrated, preempted or signalled: read the CPU again and retry).
 *
 * The critical section is [1, 2): it publishes its descriptor in
 * rseq->rseq_cs (offset 8), compares rseq->cpu_id (offset 4) and commits
 * with the single store of the lock word.  The abort handler 4 is preceded
 * by the signature glibc registered, as the kernel requires.
 */
static inline int pcpu_rseq_trylock(int *lock, uint32_t cpu, ptrdiff_t rseq_area) {
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
                "movl $1, (%[lock])\n\t"                /* commit: PCPU_LOCKED_LOCAL */
                "2:\n\t"
                ".pushsection __rseq_failure, \"ax\"\n\t"
                ".byte 0x0f, 0xb9, 0x3d\n\t"            /* ud1 <sig>(%rip), %edi: the signature */
                ".long 0x53053053\n\t"
                "4:\n\t"
                "jmp %l[aborted]\n\t"
                ".popsection\n\t"
                :
                : [off] "r"(rseq_area), [cpu] "r"(cpu), [lock] "r"(lock)
                : "memory", "cc", "rax"
                : busy, aborted);
        return PCPU_RSEQ_LOCKED;
busy:
        return PCPU_RSEQ_BUSY;
aborted:
        return PCPU_RSEQ_ABORTED;
}
#else
#define PCPU_HAVE_RSEQ 0
#endif

/**
 * pcpu_rseq_usable - whether this process can take locks in rseq mode: an
 * rseq area and the kernel's MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, for
 * which the process registers once (and again in a fork() child, whose
 * address space is new).  Users add their own switch (an environment
 * variable) and fix their mode for the lifetime of their lock words.
 */
bool pcpu_rseq_usable(void);

/**
 * pcpu_rseq_fence - abort every restartable sequence of this process that
 * runs on CPU @cpu now (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ)
 * with MEMBARRIER_CMD_FLAG_CPU; on every CPU when that fails).  When it
 * returns, a sequence that had started on @cpu before the call has either
 * committed or restarted, and its stores are visible to the caller.  Only
 * after pcpu_rseq_usable() returned true; it enters the kernel.
 */
void pcpu_rseq_fence(unsigned cpu);

/**
 * pcpu_lock_remote - take @lock, the lock word of CPU @cpu's structure,
 * from whatever CPU the caller runs on: in rseq mode (@rseq) the compare
 * and swap plus membarrier described above, else by exchange.  Slow paths
 * only: it may enter the kernel.
 */
void pcpu_lock_remote(int *lock, unsigned cpu, bool rseq);
