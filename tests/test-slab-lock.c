/* SPDX-License-Identifier: MIT */
/*
 * test-slab-lock.c - white-box test of the per-CPU slab lock (client/slab/slab.h
 * over client/core/pcpu_lock.h, the lock the page stocks use too): owners on
 * the rseq fast path and remote lockers (membarrier slow path) increment
 * one counter per CPU slot with a deliberately non-atomic, slow
 * read-modify-write; any hole in the mutual exclusion loses increments.
 * Several remote lockers at once: their compare-and-swap values must not
 * be mistaken for one another.  Runs in both modes: rseq fast path (when
 * the machine has it) and the plain spinlock (MEMBROKER_SLAB_RSEQ=0).
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slab/slab.h"

#include "slab-fake-client.h"

#define MAX_CPUS 1024u
#define LOCAL_THREADS 4u
#define REMOTE_THREADS 3u
#define LOCAL_ITERATIONS 400000u
#define REMOTE_ITERATIONS 20000u

struct lock_test {
        struct slab_ctx *ctx;
        unsigned ncpus;
        volatile uint64_t counter[MAX_CPUS];
        uint64_t done[MAX_CPUS];
};

struct local_arg {
        struct lock_test *t;
        unsigned cpu;
};

/* Read, dawdle, write: two holders at once lose increments. */
static void slow_increment(volatile uint64_t *v) {
        uint64_t x = *v;

        for (unsigned i = 0; i < 20; i++)
                pcpu_relax();
        *v = x + 1;
}

static void *local_thread(void *arg) {
        struct local_arg *a = arg;
        struct lock_test *t = a->t;
        cpu_set_t set;

        /* Two threads per CPU, each staying there: the fast path runs, and
         * the two contend as threads of one CPU slot do. */
        CPU_ZERO(&set);
        CPU_SET(a->cpu, &set);
        (void) sched_setaffinity(0, sizeof(set), &set);
        for (unsigned i = 0; i < LOCAL_ITERATIONS; i++) {
                unsigned cpu;
                struct slab_pcpu *p = slab_pcpu_lock_this(t->ctx, &cpu);

                slow_increment(&t->counter[cpu]);
                __atomic_fetch_add(&t->done[cpu], 1, __ATOMIC_RELAXED);
                slab_pcpu_unlock(p);
        }
        return NULL;
}

static void *remote_thread(void *arg) {
        struct lock_test *t = arg;

        for (unsigned i = 0; i < REMOTE_ITERATIONS; i++) {
                unsigned cpu = i % t->ncpus;
                struct slab_pcpu *p = slab_pcpu_lock_cpu(t->ctx, cpu);

                slow_increment(&t->counter[cpu]);
                __atomic_fetch_add(&t->done[cpu], 1, __ATOMIC_RELAXED);
                slab_pcpu_unlock(p);
        }
        return NULL;
}

static void run_lock_test(void) {
        static struct lock_test t;
        unsigned ncpus = (unsigned) MB_MIN(sysconf(_SC_NPROCESSORS_CONF), (long) MAX_CPUS);
        unsigned online = (unsigned) sysconf(_SC_NPROCESSORS_ONLN);
        mb_client *c = fake_client_new(16, 4096, ncpus);
        struct local_arg args[LOCAL_THREADS];
        pthread_t local[LOCAL_THREADS], remote[REMOTE_THREADS];
        uint64_t total = 0;
        int r;

        fake_client_set_cpu(-1); /* the real CPU: the rseq fast path */
        memset(&t, 0, sizeof(t));
        t.ncpus = ncpus;
        pthread_mutex_lock(&slab_registry_lock);
        r = slab_ctx_get(c, &t.ctx);
        pthread_mutex_unlock(&slab_registry_lock);
        ck_assert_int_eq(r, 0);
        printf("rseq fast path: %s\n", t.ctx->rseq ? "yes" : "no");

        for (unsigned i = 0; i < LOCAL_THREADS; i++) {
                args[i] = (struct local_arg) { .t = &t, .cpu = online > 1 ? i % 2 : 0 };
                ck_assert_int_eq(pthread_create(&local[i], NULL, local_thread, &args[i]), 0);
        }
        for (unsigned i = 0; i < REMOTE_THREADS; i++)
                ck_assert_int_eq(pthread_create(&remote[i], NULL, remote_thread, &t), 0);
        for (unsigned i = 0; i < LOCAL_THREADS; i++)
                ck_assert_int_eq(pthread_join(local[i], NULL), 0);
        for (unsigned i = 0; i < REMOTE_THREADS; i++)
                ck_assert_int_eq(pthread_join(remote[i], NULL), 0);
        for (unsigned cpu = 0; cpu < ncpus; cpu++) {
                ck_assert_uint_eq(t.counter[cpu], t.done[cpu]);
                ck_assert_int_eq(t.ctx->pcpu[cpu].lock, PCPU_UNLOCKED);
                total += t.done[cpu];
        }
        ck_assert_uint_eq(total, LOCAL_THREADS * LOCAL_ITERATIONS + REMOTE_THREADS * REMOTE_ITERATIONS);

        pthread_mutex_lock(&slab_registry_lock);
        slab_ctx_put(t.ctx);
        pthread_mutex_unlock(&slab_registry_lock);
        fake_client_free(c);
}

START_TEST(test_lock_excludes_local_and_remote) {
        run_lock_test();
}
END_TEST

int main(void) {
        Suite *s = suite_create("slab-lock");
        TCase *tc = tcase_create("lock");
        SRunner *sr;
        int failed;

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_lock_excludes_local_and_remote);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
