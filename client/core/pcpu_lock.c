/* SPDX-License-Identifier: MIT */
/* pcpu_lock.c - the slow half of the per-CPU lock (pcpu_lock.h): the
 * process's membarrier registration and the remote acquisition. */
#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/membarrier.h>

#include "core/pcpu_lock.h"

/* rseq mode needs the kernel to abort other CPUs' critical sections on
 * demand; registered once per process (per address space). */
static pthread_once_t pcpu_rseq_once = PTHREAD_ONCE_INIT;
static bool pcpu_rseq_fence_ok;

static int pcpu_membarrier(int cmd, unsigned flags, int cpu) {
        return (int) syscall(__NR_membarrier, cmd, flags, cpu);
}

static bool pcpu_rseq_register(void) {
        return pcpu_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0;
}

/* The registration belongs to the parent's mm: register the child's, for
 * the locks it uses from now on. */
static void pcpu_rseq_atfork_child(void) {
        if (pcpu_rseq_fence_ok)
                pcpu_rseq_fence_ok = pcpu_rseq_register();
}

static void pcpu_rseq_init(void) {
        int cmds = pcpu_membarrier(MEMBARRIER_CMD_QUERY, 0, 0);

        if (cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ))
                pcpu_rseq_fence_ok = pcpu_rseq_register();
        (void) pthread_atfork(NULL, NULL, pcpu_rseq_atfork_child);
}

bool pcpu_rseq_usable(void) {
        if (!PCPU_HAVE_RSEQ || pcpu_rseq_cpu_offset() < 0)
                return false;
        (void) pthread_once(&pcpu_rseq_once, pcpu_rseq_init);
        return pcpu_rseq_fence_ok;
}

void pcpu_rseq_fence(unsigned cpu) {
        if (pcpu_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_CMD_FLAG_CPU, (int) cpu) < 0 &&
            errno != EINVAL)
                /* EINVAL: that CPU is offline, nothing runs there.  Else be
                 * safe with a fence on every CPU. */
                (void) pcpu_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0);
}

/* This thread's remote lock value: PCPU_LOCKED_REMOTE with the thread id
 * above it, so that no two live threads write the same value. */
static __thread int pcpu_remote_token;

static int pcpu_remote_token_get(void) {
        if (_unlikely_(pcpu_remote_token == 0))
                pcpu_remote_token = PCPU_LOCKED_REMOTE | (int) ((unsigned) gettid() << PCPU_REMOTE_TID_SHIFT);
        return pcpu_remote_token;
}

void pcpu_lock_remote(int *lock, unsigned cpu, bool rseq) {
        int token;

        if (!rseq) {
                pcpu_lock_atomic(lock);
                return;
        }
        token = pcpu_remote_token_get();
        for (;;) {
                int expected = PCPU_UNLOCKED;

                if (__atomic_compare_exchange_n(lock, &expected, token, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
                        /* A sequence on @cpu may have read 0 before our swap
                         * and not committed yet: abort it, then look. */
                        pcpu_rseq_fence(cpu);
                        /* Still our own value: nobody committed over it.  A
                         * value shared by all remote lockers would not do:
                         * a sequence may commit over it and unlock, and
                         * another remote locker swap it in again before we
                         * look. */
                        if (__atomic_load_n(lock, __ATOMIC_ACQUIRE) == token)
                                return;
                        /* It committed first and holds the lock now. */
                }
                pcpu_wait_unlocked(lock);
        }
}
