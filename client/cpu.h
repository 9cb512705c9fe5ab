/* SPDX-License-Identifier: MIT */
/*
 * cpu.h - which CPU the calling thread runs on, without a system call.
 *
 * glibc (2.35 and later) registers a struct rseq for every thread it starts;
 * the kernel keeps its cpu_id current on every return to user space.  The
 * area sits at a fixed offset (__rseq_offset) from the thread pointer, so
 * reading the CPU is one load.  When glibc did not register rseq
 * (__rseq_size == 0: old kernel, glibc.pthread.rseq=0 tunable, a seccomp
 * filter) or registration failed for this thread (cpu_id is then
 * RSEQ_CPU_ID_UNINITIALIZED or RSEQ_CPU_ID_REGISTRATION_FAILED, both huge),
 * sched_getcpu() answers (vDSO getcpu on x86-64, still no system call).
 *
 * The value can be stale the moment it is read (the thread may migrate);
 * callers only use it to pick a per-CPU structure that they then lock.
 */
#pragma once

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/rseq.h>

#include "macros.h"

/* Offset of rseq cpu_id from the thread pointer, or -1 without rseq. */
static inline ptrdiff_t cpu_rseq_offset(void) {
        if (__rseq_size < offsetof(struct rseq, cpu_id) + sizeof(uint32_t))
                return -1;
        return __rseq_offset + (ptrdiff_t) offsetof(struct rseq, cpu_id);
}

/* sched_getcpu(), folded into [0, ncpus). */
static inline unsigned cpu_fallback(unsigned ncpus) {
        int cpu = sched_getcpu();

        if (cpu < 0)
                return 0;
        return (unsigned) cpu < ncpus ? (unsigned) cpu : (unsigned) cpu % ncpus;
}

/**
 * cpu_current - the CPU of the calling thread, always < @ncpus (a CPU number
 * beyond @ncpus, which a hot-plugged CPU could give, is folded in).
 * @rseq_offset is cpu_rseq_offset(), cached by the caller.
 */
static inline unsigned cpu_current(ptrdiff_t rseq_offset, unsigned ncpus) {
        if (_likely_(rseq_offset >= 0)) {
                const uint32_t *p = (const uint32_t *) ((const char *) __builtin_thread_pointer() + rseq_offset);
                uint32_t cpu = __atomic_load_n(p, __ATOMIC_RELAXED);

                if (_likely_(cpu < ncpus))
                        return cpu;
        }
        return cpu_fallback(ncpus);
}
