/* SPDX-License-Identifier: MIT */
/*
 * client-tool.c - small real clients for the shell tests ($MEMBROKER_SOCKET):
 *
 *   client-tool stock-loop TENANT ITERATIONS [PREEMPTIONS]
 *        pin to one CPU, warm the stock (and wait until the charge ahead
 *        it asked for is stocked), then between two marker system
 *        calls (close(-1001), close(-1002)) run ITERATIONS alloc+free pairs
 *        and bulk pairs that the stock covers; then, up to close(-1003),
 *        allocate past the stock (a positive control: that must talk to
 *        the daemon).  tests/test-client-stock-nosyscall.sh straces it.
 *        With PREEMPTIONS, a second thread on the same CPU spins until
 *        the loop's thread was preempted that many times (it may be
 *        inside a sequence each time), and the loop runs (at least
 *        ITERATIONS times) until then; prints "preempted=N".
 *
 *   client-tool scribble TENANT FIRST COUNT
 *        overwrite arena pages FIRST..FIRST+COUNT-1 of TENANT by handle
 *        (another client of the same tenant may share them).
 *
 *   client-tool steps TENANT STEP...
 *        connect, then run the steps in order: "cycle:N" allocates N pages
 *        in one bulk call, writes them and frees them all; "wait:PATH"
 *        waits (up to 60 s) until PATH exists; "cpu:N" moves the thread to
 *        CPU N; "hold:N" allocates N pages in one bulk call, writes them
 *        and keeps them until the end; "touch:PATH" creates PATH; "print"
 *        prints "batch=<mb_charge_batch()>" (stdout, flushed).
 *        tests/test-client-batch-change.sh uses it.
 *
 *   client-tool churn TENANT PAGES PERIOD_US
 *        pin to one CPU, warm the stock, then allocate PAGES pages one at a
 *        time, PERIOD_US microseconds apart, keeping them (the stock must
 *        be refilled again and again), check that every page reads zero,
 *        write it, and free them all; prints "misses=N batch=B
 *        resident=R", N the allocations of the paced part that found
 *        their stock empty (mb_client_stock_misses()), R the pages that
 *        were already in memory when handed out (mincore(): faulted in
 *        ahead).  tests/test-client-refill.sh uses it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/mb_internal.h"
#include "membroker.h"

#define MARK_START (-1001)
#define MARK_END (-1002)
#define MARK_CONTROL (-1003)

/* The thread that preempts the stock loop (stock-loop ... PREEMPTIONS): it
 * shares the loop's CPU and spins, so the scheduler takes turns between
 * the two, until the loop's thread was preempted (involuntary context
 * switches, /proc) that many times since it started; then it says so. */
struct preempter {
        pid_t tid;              /* the loop's thread */
        unsigned long want;     /* preemptions to see */
        unsigned long seen;
        int done;               /* atomic: the loop may stop */
};

static unsigned long involuntary_switches(pid_t tid) {
        char path[64], line[128];
        unsigned long n = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int) tid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "nonvoluntary_ctxt_switches: %lu", &n) == 1)
                        break;
        fclose(f);
        return n;
}

static void *preempter_run(void *userdata) {
        struct preempter *p = userdata;
        unsigned long base = involuntary_switches(p->tid);

        for (;;) {
                for (volatile unsigned long spin = 0; spin < 1000000; spin++)
                        ;
                p->seen = involuntary_switches(p->tid) - base;
                if (p->seen >= p->want)
                        break;
        }
        __atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
        return NULL;
}

static int stock_loop(const char *tenant, unsigned long iterations, unsigned long preemptions) {
        struct preempter preempter = { .tid = gettid(), .want = preemptions };
        pthread_t thread;
        mb_client *c;
        cpu_set_t set;
        void *v[4], **many;
        size_t nmany;
        int cpu = sched_getcpu(), r;

        /* One CPU, so that the loop always meets the stock it warmed. */
        CPU_ZERO(&set);
        CPU_SET(cpu < 0 ? 0 : cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) < 0) {
                perror("sched_setaffinity");
                return 2;
        }
        r = mb_connect(NULL, tenant, &c);
        if (r < 0) {
                fprintf(stderr, "mb_connect: %s\n", mb_last_error());
                return 2;
        }
        /* Warm: one charge leaves charge_batch - 1 pages in the stock. */
        v[0] = mb_page_alloc(c);
        if (!v[0] || mb_page_free(c, v[0]) < 0) {
                fprintf(stderr, "warm-up: %s\n", mb_last_error());
                return 2;
        }
        nmany = 4 * mb_charge_batch(c);
        many = calloc(nmany, sizeof(void *));
        if (!many)
                return 2;
        /* The warm-up's charge left the stock below its watermark, so the
         * library's thread charges a batch ahead and stocks it (locking
         * this CPU's stock): let it finish before the window, which must
         * see the application's own fast path only.  The loop then keeps
         * the stock above the watermark: no further charge ahead. */
        while (!mb_client_refill_idle(c))
                sched_yield();
        /* Created on this CPU (the affinity is inherited). */
        if (preemptions > 0 && pthread_create(&thread, NULL, preempter_run, &preempter) != 0)
                return 2;

        (void) close(MARK_START);
        for (unsigned long i = 0; i < iterations || (preemptions > 0 && !__atomic_load_n(&preempter.done,
                                                                                         __ATOMIC_ACQUIRE));
             i++) {
                void *p = mb_page_alloc(c);

                if (!p || mb_page_free(c, p) < 0)
                        return 3;
                if (mb_page_alloc_bulk(c, v, 2) < 0 || mb_page_free_bulk(c, v, 2) < 0)
                        return 3;
        }
        (void) close(MARK_END);
        if (preemptions > 0) {
                (void) pthread_join(thread, NULL);
                printf("preempted=%lu\n", preempter.seen);
        }

        /* Past the stock: charges must reach the daemon. */
        if (mb_page_alloc_bulk(c, many, nmany) < 0 || mb_page_free_bulk(c, many, nmany) < 0) {
                fprintf(stderr, "control: %s\n", mb_last_error());
                return 2;
        }
        (void) close(MARK_CONTROL);
        free(many);
        mb_close(c);
        return 0;
}

static int churn(const char *tenant, size_t npages, unsigned period_us) {
        mb_client *c;
        cpu_set_t set;
        void **v;
        uint64_t before, after, resident = 0;
        int cpu = sched_getcpu(), r;

        CPU_ZERO(&set);
        CPU_SET(cpu < 0 ? 0 : cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) < 0) {
                perror("sched_setaffinity");
                return 2;
        }
        r = mb_connect(NULL, tenant, &c);
        if (r < 0) {
                fprintf(stderr, "mb_connect: %s\n", mb_last_error());
                return 2;
        }
        v = calloc(npages + 1, sizeof(void *));
        if (!v)
                return 2;
        /* Warm: the first charge fills the stock (and tells the headroom). */
        v[0] = mb_page_alloc(c);
        if (!v[0] || mb_page_free(c, v[0]) < 0) {
                fprintf(stderr, "warm-up: %s\n", mb_last_error());
                return 2;
        }
        before = mb_client_stock_misses(c);
        for (size_t i = 0; i < npages; i++) {
                const unsigned char *b;

                v[i] = mb_page_alloc(c);
                if (!v[i]) {
                        fprintf(stderr, "alloc %zu: %s\n", i, mb_last_error());
                        return 3;
                }
                b = v[i];
                {
                        unsigned char vec[1] = { 0 };

                        if (mincore(v[i], mb_page_size(c), vec) == 0 && (vec[0] & 1))
                                resident++;
                }
                for (size_t k = 0; k < mb_page_size(c); k++)
                        if (b[k] != 0) {
                                fprintf(stderr, "page %zu not zero at byte %zu\n", i, k);
                                return 4;
                        }
                memset(v[i], 0x77, mb_page_size(c));
                if (period_us > 0)
                        usleep(period_us);
        }
        after = mb_client_stock_misses(c);
        if (mb_page_free_bulk(c, v, npages) < 0) {
                fprintf(stderr, "free: %s\n", mb_last_error());
                return 3;
        }
        printf("misses=%llu batch=%u resident=%llu\n", (unsigned long long) (after - before), mb_charge_batch(c),
               (unsigned long long) resident);
        free(v);
        mb_close(c);
        return 0;
}

static int scribble(const char *tenant, unsigned long long first, unsigned long long count) {
        mb_client *c;
        int r = mb_connect(NULL, tenant, &c);

        if (r < 0) {
                fprintf(stderr, "mb_connect: %s\n", mb_last_error());
                return 2;
        }
        for (unsigned long long h = first; h < first + count; h++) {
                char *p = mb_handle_to_page(c, h);

                if (!p)
                        break;
                memset(p, 0x5a, mb_page_size(c));
        }
        mb_close(c);
        return 0;
}

static int steps(const char *tenant, char **step, int nsteps) {
        mb_client *c;
        int r = mb_connect(NULL, tenant, &c);

        if (r < 0) {
                fprintf(stderr, "mb_connect: %s\n", mb_last_error());
                return 2;
        }
        for (int i = 0; i < nsteps; i++) {
                if (strncmp(step[i], "cycle:", 6) == 0) {
                        size_t n = strtoul(step[i] + 6, NULL, 10);
                        void **v = calloc(n ? n : 1, sizeof(void *));

                        if (!v || mb_page_alloc_bulk(c, v, n) < 0) {
                                fprintf(stderr, "%s: %s\n", step[i], mb_last_error());
                                return 2;
                        }
                        for (size_t k = 0; k < n; k++)
                                memset(v[k], 0x6b, mb_page_size(c));
                        if (mb_page_free_bulk(c, v, n) < 0) {
                                fprintf(stderr, "%s: free: %s\n", step[i], mb_last_error());
                                return 2;
                        }
                        free(v);
                } else if (strncmp(step[i], "hold:", 5) == 0) {
                        size_t n = strtoul(step[i] + 5, NULL, 10);
                        void **v = calloc(n ? n : 1, sizeof(void *));

                        if (!v || mb_page_alloc_bulk(c, v, n) < 0) {
                                fprintf(stderr, "%s: %s\n", step[i], mb_last_error());
                                return 2;
                        }
                        for (size_t k = 0; k < n; k++)
                                memset(v[k], 0x6c, mb_page_size(c));
                        free(v); /* the pages stay held until mb_close() */
                } else if (strncmp(step[i], "touch:", 6) == 0) {
                        FILE *f = fopen(step[i] + 6, "w");

                        if (!f) {
                                perror(step[i]);
                                return 2;
                        }
                        fclose(f);
                } else if (strncmp(step[i], "wait:", 5) == 0) {
                        unsigned ms = 0;

                        while (access(step[i] + 5, F_OK) < 0) {
                                if (ms++ > 60000) {
                                        fprintf(stderr, "%s: timed out\n", step[i]);
                                        return 2;
                                }
                                usleep(1000);
                        }
                } else if (strncmp(step[i], "cpu:", 4) == 0) {
                        cpu_set_t set;

                        CPU_ZERO(&set);
                        CPU_SET(atoi(step[i] + 4), &set);
                        if (sched_setaffinity(0, sizeof(set), &set) < 0) {
                                perror("sched_setaffinity");
                                return 2;
                        }
                } else if (strcmp(step[i], "print") == 0) {
                        printf("batch=%u\n", mb_charge_batch(c));
                        fflush(stdout);
                } else {
                        fprintf(stderr, "unknown step %s\n", step[i]);
                        return 2;
                }
        }
        mb_close(c);
        return 0;
}

int main(int argc, char **argv) {
        if ((argc == 4 || argc == 5) && strcmp(argv[1], "stock-loop") == 0)
                return stock_loop(argv[2], strtoul(argv[3], NULL, 10), argc == 5 ? strtoul(argv[4], NULL, 10) : 0);
        if (argc == 5 && strcmp(argv[1], "churn") == 0)
                return churn(argv[2], strtoul(argv[3], NULL, 10), (unsigned) strtoul(argv[4], NULL, 10));
        if (argc == 5 && strcmp(argv[1], "scribble") == 0)
                return scribble(argv[2], strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
        if (argc >= 3 && strcmp(argv[1], "steps") == 0)
                return steps(argv[2], argv + 3, argc - 3);
        fprintf(stderr, "usage: client-tool stock-loop TENANT ITERATIONS [PREEMPTIONS] | scribble TENANT FIRST COUNT | "
                        "steps TENANT STEP... | churn TENANT PAGES PERIOD_US\n");
        return 2;
}
