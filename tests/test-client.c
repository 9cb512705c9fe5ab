/* SPDX-License-Identifier: MIT */
/*
 * test-client.c - libmembroker against the real membrokerd.
 *
 * Run by the tests/test-client-*.sh wrappers, which start the daemon on a
 * temporary socket ($MEMBROKER_SOCKET) with these tenants (ChargeBatch=8):
 *   app     no limit
 *   small   MemoryMax=240K (60 pages: not a multiple of the batch)
 *   grp     a parent (grp/leaf under it)
 *   locked  AllowUsers=root
 * and select one test case with CK_RUN_CASE.
 */
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macros.h"
#include "core/mb_internal.h"
#include "membroker.h"

#define BATCH 8u
#define SMALL_MAX_PAGES 60u
#define PAGE_BYTES 4096u

static mb_client *connect_or_die(const char *tenant) {
        mb_client *c = NULL;
        int r = mb_connect(NULL, tenant, &c);

        ck_assert_msg(r == 0, "mb_connect(%s): %d %s", tenant, r, mb_last_error());
        return c;
}

static uint64_t pattern(uint64_t a, uint64_t b) {
        uint64_t x = a * UINT64_C(0x9E3779B97F4A7C15) ^ (b + UINT64_C(0xBF58476D1CE4E5B9));

        return x ^ (x >> 29);
}

static void fill(void *page, uint64_t a, uint64_t b) {
        uint64_t *w = page;

        for (size_t i = 0; i < PAGE_BYTES / 8; i++)
                w[i] = pattern(a, b) + i;
}

static bool check_fill(const void *page, uint64_t a, uint64_t b) {
        const uint64_t *w = page;

        for (size_t i = 0; i < PAGE_BYTES / 8; i++)
                if (w[i] != pattern(a, b) + i)
                        return false;
        return true;
}

/* Sum of @item over every slot of the client's stats region. */
static int64_t stat_sum(const mb_client *c, enum mb_stat_item item) {
        const struct mb_stats_region *r = mb_client_stats_region(c);
        int64_t sum = 0;

        for (uint32_t i = 0; i < r->nslots; i++)
                sum += __atomic_load_n(&r->slot[i].v[item], __ATOMIC_RELAXED);
        return sum;
}

/* Pin the calling thread to the CPU it runs on; returns that CPU. */
static unsigned pin_here(void) {
        cpu_set_t set;
        int cpu = sched_getcpu();

        ck_assert_int_ge(cpu, 0);
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        ck_assert_int_eq(sched_setaffinity(0, sizeof(set), &set), 0);
        return (unsigned) cpu;
}

/* ---- basic ---- */

START_TEST(test_connect_alloc_write_free_close) {
        enum { N = 100 };
        mb_client *c = connect_or_die("app");
        void *pages[N];

        ck_assert_str_eq(mb_tenant_path(c), "app");
        ck_assert_uint_eq(mb_page_size(c), PAGE_BYTES);
        ck_assert_uint_eq(mb_charge_batch(c), BATCH);

        for (unsigned i = 0; i < N; i++) {
                pages[i] = mb_page_alloc(c);
                ck_assert_msg(pages[i], "alloc %u: %s", i, mb_last_error());
                ck_assert_uint_eq((uintptr_t) pages[i] % PAGE_BYTES, 0);
                fill(pages[i], 1, i);
        }
        for (unsigned i = 0; i < N; i++) {
                ck_assert_msg(check_fill(pages[i], 1, i), "page %u overwritten", i);
                for (unsigned k = 0; k < i; k++)
                        ck_assert_ptr_ne(pages[i], pages[k]);
        }
        for (unsigned i = 0; i < N; i++)
                ck_assert_int_eq(mb_page_free(c, pages[i]), 0);
        mb_close(c);
}
END_TEST

/* mb_close() returns everything: a tenant at its max is usable in full
 * again by the next client. */
START_TEST(test_close_returns_everything) {
        void *pages[SMALL_MAX_PAGES];

        for (int round = 0; round < 3; round++) {
                mb_client *c = connect_or_die("small");

                ck_assert_msg(mb_page_alloc_bulk(c, pages, SMALL_MAX_PAGES) == 0, "round %d: %s", round,
                              mb_last_error());
                /* Freed pages stay charged in the stock; close returns them. */
                ck_assert_int_eq(mb_page_free_bulk(c, pages, 10), 0);
                mb_close(c);
        }
}
END_TEST

START_TEST(test_handle_pointer) {
        mb_client *c = connect_or_die("app");
        char *p = mb_page_alloc(c), *q = mb_page_alloc(c);
        mb_handle_t h;
        int local;

        ck_assert_ptr_nonnull(p);
        ck_assert_ptr_nonnull(q);
        h = mb_page_to_handle(c, p);
        ck_assert_uint_ne(h, MB_HANDLE_INVALID);
        ck_assert_ptr_eq(mb_handle_to_page(c, h), p);
        ck_assert_ptr_eq(mb_handle_to_page(c, mb_page_to_handle(c, q)), q);
        ck_assert_uint_ne(mb_page_to_handle(c, q), h);

        ck_assert_uint_eq(mb_page_to_handle(c, p + 1), MB_HANDLE_INVALID);
        ck_assert_uint_eq(mb_page_to_handle(c, &local), MB_HANDLE_INVALID);
        errno = 0;
        ck_assert_ptr_null(mb_handle_to_page(c, MB_HANDLE_INVALID - 1));
        ck_assert_int_eq(errno, EINVAL);

        /* A pointer that is not a page of the arena is refused, and a bulk
         * free with one such pointer frees nothing. */
        ck_assert_int_eq(mb_page_free(c, p + 8), -EINVAL);
        ck_assert_ptr_nonnull(strstr(mb_last_error(), "not a page"));
        {
                void *v[3] = { p, &local, q };
                int64_t stock = stat_sum(c, MB_STAT_STOCK), inuse = stat_sum(c, MB_STAT_PAGES);

                ck_assert_int_eq(mb_page_free_bulk(c, v, 3), -EINVAL);
                ck_assert_int_eq(stat_sum(c, MB_STAT_STOCK), stock);
                ck_assert_int_eq(stat_sum(c, MB_STAT_PAGES), inuse);
        }
        ck_assert_int_eq(mb_page_free(c, p), 0);
        ck_assert_int_eq(mb_page_free(c, q), 0);
        mb_close(c);
}
END_TEST

/* ---- limits ---- */

START_TEST(test_bulk_all_or_nothing) {
        mb_client *c = connect_or_die("small");
        void *pages[SMALL_MAX_PAGES + 1];
        void *one;

        ck_assert_int_eq(mb_page_alloc_bulk(c, pages, SMALL_MAX_PAGES + 1), -ENOMEM);
        ck_assert_msg(strstr(mb_last_error(), "max"), "message: %s", mb_last_error());
        ck_assert_int_eq(stat_sum(c, MB_STAT_PAGES), 0);
        ck_assert_int_eq(stat_sum(c, MB_STAT_PGALLOC), 0);

        /* Nothing leaked: the whole max is still there. */
        ck_assert_msg(mb_page_alloc_bulk(c, pages, SMALL_MAX_PAGES) == 0, "%s", mb_last_error());
        for (unsigned i = 0; i < SMALL_MAX_PAGES; i++)
                fill(pages[i], 2, i);

        errno = 0;
        one = mb_page_alloc(c);
        ck_assert_ptr_null(one);
        ck_assert_int_eq(errno, ENOMEM);
        ck_assert_int_eq(mb_page_alloc_bulk(c, pages + SMALL_MAX_PAGES, 1), -ENOMEM);

        /* A failed bulk with part of it in the stock gives the stock back. */
        ck_assert_int_eq(mb_page_free_bulk(c, pages, 5), 0);
        ck_assert_int_eq(mb_page_alloc_bulk(c, pages, 6), -ENOMEM);
        ck_assert_int_eq(mb_page_alloc_bulk(c, pages, 5), 0);
        for (unsigned i = 5; i < SMALL_MAX_PAGES; i++)
                ck_assert(check_fill(pages[i], 2, i));
        mb_close(c);
}
END_TEST

/* Single allocations reach exactly the max, though it is not a multiple of
 * the batch: the library falls back from a batch to what is missing, and
 * takes pages of other CPUs' stocks, before failing. */
START_TEST(test_single_allocs_reach_max) {
        mb_client *c = connect_or_die("small");
        void *pages[SMALL_MAX_PAGES];
        unsigned n = 0;

        for (;;) {
                void *p = mb_page_alloc(c);

                if (!p) {
                        ck_assert_int_eq(errno, ENOMEM);
                        break;
                }
                ck_assert_uint_lt(n, SMALL_MAX_PAGES);
                pages[n++] = p;
        }
        ck_assert_uint_eq(n, SMALL_MAX_PAGES);
        ck_assert_msg(strstr(mb_last_error(), "small"), "message: %s", mb_last_error());
        ck_assert_int_eq(mb_page_free(c, pages[0]), 0);
        ck_assert_ptr_nonnull(mb_page_alloc(c));
        mb_close(c);
}
END_TEST

/* ---- sharing a page between two processes of one tenant ---- */

START_TEST(test_share_handle_between_processes) {
        static const char secret[] = "written by the parent";
        mb_client *c = connect_or_die("app");
        char *p = mb_page_alloc(c);
        mb_handle_t h;
        pid_t pid;
        int status;

        ck_assert_ptr_nonnull(p);
        fill(p, 3, 3);
        memcpy(p, secret, sizeof(secret));
        h = mb_page_to_handle(c, p);

        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                mb_client *c2 = NULL, *other = NULL;
                const char *q;
                int ok;

                /* A second client of the same tenant maps the same arena. */
                if (mb_connect(NULL, "app", &c2) < 0)
                        _exit(10);
                q = mb_handle_to_page(c2, h);
                ok = q && memcmp(q, secret, sizeof(secret)) == 0 &&
                     ((const uint64_t *) q)[PAGE_BYTES / 8 - 1] == pattern(3, 3) + PAGE_BYTES / 8 - 1;
                if (!ok)
                        _exit(11);
                strcpy((char *) q + 2048, "answer from the child");
                /* Another tenant's arena does not hold it. */
                if (mb_connect(NULL, "small", &other) < 0)
                        _exit(12);
                q = mb_handle_to_page(other, h);
                if (q && memcmp(q, secret, sizeof(secret)) == 0)
                        _exit(13);
                mb_close(other);
                mb_close(c2);
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
        ck_assert_str_eq(p + 2048, "answer from the child");
        ck_assert_int_eq(mb_page_free(c, p), 0);
        mb_close(c);
}
END_TEST

/* ---- fork ---- */

START_TEST(test_fork_child_cannot_use_parent_connection) {
        mb_client *c = connect_or_die("app");
        void *p = mb_page_alloc(c), *pages[3 * BATCH];
        pid_t pid;
        int status;

        ck_assert_ptr_nonnull(p);
        fill(p, 4, 4);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                mb_client *c2 = NULL;
                void *q;

                errno = 0;
                if (mb_page_alloc(c) || errno != ECHILD)
                        _exit(10);
                if (!strstr(mb_last_error(), "fork"))
                        _exit(11);
                if (mb_page_free(c, p) != -ECHILD)
                        _exit(12);
                if (mb_process(c) != -ECHILD)
                        _exit(13);
                mb_close(c); /* releases only the child's copy */
                if (mb_connect(NULL, "app", &c2) < 0)
                        _exit(14);
                q = mb_page_alloc(c2);
                if (!q || q == p)
                        _exit(15);
                mb_close(c2);
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);

        /* The parent's session is intact, slow path included. */
        ck_assert(check_fill(p, 4, 4));
        ck_assert_msg(mb_page_alloc_bulk(c, pages, 3 * BATCH) == 0, "%s", mb_last_error());
        ck_assert_int_eq(mb_page_free_bulk(c, pages, 3 * BATCH), 0);
        ck_assert_int_eq(mb_page_free(c, p), 0);
        mb_close(c);
}
END_TEST

/* ---- threads ---- */

#define THREADS 8
#define THREAD_ITERATIONS 20000
#define THREAD_HOLD_MAX 40

struct thread_arg {
        mb_client *c;
        unsigned id;
        unsigned bad;
        unsigned failed;
        unsigned enomem; /* allocations refused at the limit */
        unsigned iterations;
        pthread_barrier_t *filled; /* all threads hold their first pages */
};

/* Pages each thread holds before any frees (at the barrier): together more
 * than `small` allows (60 pages), so that there the threads meet the limit
 * whatever the scheduling, and far below what `app` allows. */
#define THREAD_HOLD_FIRST (THREAD_HOLD_MAX / 4)
#define SMALL_MAX_PAGES 60u /* client-env.sh: MemoryMax=240K */
_Static_assert(THREADS * THREAD_HOLD_FIRST > SMALL_MAX_PAGES, "the threads' first pages must exceed small's limit");

static void *thread_run(void *userdata) {
        struct thread_arg *a = userdata;
        void *held[THREAD_HOLD_MAX];
        uint64_t gen[THREAD_HOLD_MAX];
        unsigned n = 0;
        uint64_t rng = a->id + 1;
        int br;

        /* Fill up to THREAD_HOLD_FIRST pages, or until the limit refuses,
         * then wait for the others: nobody frees before every thread
         * holds its share, so at a limit below THREADS *
         * THREAD_HOLD_FIRST pages some thread's allocation fails. */
        while (n < THREAD_HOLD_FIRST) {
                void *p = mb_page_alloc(a->c);

                if (!p) {
                        if (errno == ENOMEM)
                                a->enomem++;
                        else
                                a->failed++;
                        break;
                }
                gen[n] = (uint64_t) n << 8;
                fill(p, a->id, gen[n]);
                held[n++] = p;
        }
        br = pthread_barrier_wait(a->filled);
        if (br != 0 && br != PTHREAD_BARRIER_SERIAL_THREAD)
                a->failed++;
        for (unsigned it = 0; it < a->iterations; it++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                if (n < THREAD_HOLD_MAX && (n == 0 || (rng >> 33) % 2)) {
                        void *v[4];
                        unsigned k = (rng >> 40) % 4 + 1;

                        if (n + k > THREAD_HOLD_MAX)
                                k = 1;
                        if (k == 1) {
                                v[0] = mb_page_alloc(a->c);
                                if (!v[0]) {
                                        if (errno == ENOMEM)
                                                a->enomem++;
                                        else
                                                a->failed++;
                                        continue;
                                }
                        } else {
                                int r = mb_page_alloc_bulk(a->c, v, k);

                                if (r == -ENOMEM) {
                                        a->enomem++;
                                        continue;
                                }
                                if (r < 0) {
                                        a->failed++;
                                        continue;
                                }
                        }
                        for (unsigned j = 0; j < k; j++) {
                                gen[n] = (uint64_t) it << 8 | j;
                                fill(v[j], a->id, gen[n]);
                                held[n++] = v[j];
                        }
                } else {
                        unsigned i = (unsigned) ((rng >> 40) % n);

                        if (!check_fill(held[i], a->id, gen[i]))
                                a->bad++;
                        if (mb_page_free(a->c, held[i]) < 0)
                                a->failed++;
                        held[i] = held[--n];
                        gen[i] = gen[n];
                }
        }
        for (unsigned i = 0; i < n; i++) {
                if (!check_fill(held[i], a->id, gen[i]))
                        a->bad++;
        }
        if (n > 0 && mb_page_free_bulk(a->c, held, n) < 0)
                a->failed++;
        return NULL;
}

static void run_threads(const char *tenant, unsigned iterations, bool expect_enomem) {
        mb_client *c = connect_or_die(tenant);
        struct thread_arg args[THREADS];
        pthread_t t[THREADS];
        pthread_barrier_t filled;
        unsigned enomem = 0;

        ck_assert_int_eq(pthread_barrier_init(&filled, NULL, THREADS), 0);
        for (unsigned i = 0; i < THREADS; i++) {
                args[i] = (struct thread_arg) { .c = c, .id = i + 100, .iterations = iterations, .filled = &filled };
                ck_assert_int_eq(pthread_create(&t[i], NULL, thread_run, &args[i]), 0);
        }
        for (unsigned i = 0; i < THREADS; i++) {
                ck_assert_int_eq(pthread_join(t[i], NULL), 0);
                ck_assert_msg(args[i].bad == 0, "thread %u found %u pages with foreign data", i, args[i].bad);
                ck_assert_msg(args[i].failed == 0, "thread %u: %u calls failed", i, args[i].failed);
                enomem += args[i].enomem;
        }
        ck_assert_int_eq(pthread_barrier_destroy(&filled), 0);
        if (expect_enomem)
                ck_assert_uint_gt(enomem, 0);
        else
                ck_assert_uint_eq(enomem, 0);
        /* Quiescent: every page is back in some stock. */
        ck_assert_int_eq(stat_sum(c, MB_STAT_PAGES), 0);
        ck_assert_int_eq(stat_sum(c, MB_STAT_PGALLOC), stat_sum(c, MB_STAT_PGFREE));
        ck_assert_int_gt(stat_sum(c, MB_STAT_PGALLOC), THREADS * iterations / 8);
        ck_assert_int_ge(stat_sum(c, MB_STAT_STOCK), 0);
        /* The precision bound: the stocks, and the spill between them (a
         * batch per CPU, or far from every limit up to 16 MiB). */
        ck_assert_int_le(stat_sum(c, MB_STAT_STOCK),
                         (int64_t) mb_client_ncpus(c) * 2 * BATCH +
                                 MB_MAX((int64_t) mb_client_ncpus(c) * BATCH,
                                        (int64_t) ((16u << 20) / mb_page_size(c))));
        mb_close(c);
}

START_TEST(test_threads_alloc_free_verify) {
        run_threads("app", THREAD_ITERATIONS, false);
}
END_TEST

/* The same at a limit (8 threads want up to 320 pages of 60): allocations
 * fail with ENOMEM only, while the failing threads take the other CPUs'
 * stocks (the remote stock locks) under the others' fast paths. */
START_TEST(test_threads_at_limit) {
        run_threads("small", THREAD_ITERATIONS / 4, true);
}
END_TEST

/* ---- a charge ahead that meets the limit after all ---- */

/* Wait until no stock of @c has a charge ahead pending. */
static void wait_refill_idle(mb_client *c) {
        for (unsigned i = 0; i < 20000 && !mb_client_refill_idle(c); i++)
                usleep(1000);
        ck_assert(mb_client_refill_idle(c));
}

/* Two clients of `mid` (100 pages): A charges and refills its stock far
 * from the limit (its last Grant's headroom says so), B fills the tenant,
 * then A's next pop makes its library thread charge ahead on that stale
 * headroom.  That charge fails at the limit, and the daemon first drains
 * the clients of the tenant, A included, whose only answering thread is
 * the one waiting for that charge.  The script checks that the daemon
 * never had to give up waiting for A (its log). */
START_TEST(test_refill_at_limit) {
        mb_client *a = connect_or_die("mid"), *b = connect_or_die("mid");
        void *pa[16], *pb[128];
        unsigned na = 0, nb = 0;

        pa[na++] = mb_page_alloc(a);
        ck_assert_ptr_nonnull(pa[0]);
        wait_refill_idle(a);
        for (unsigned i = 0; i < BATCH / 2 + 1; i++) {
                pa[na] = mb_page_alloc(a);
                ck_assert_ptr_nonnull(pa[na]);
                na++;
        }
        wait_refill_idle(a);
        for (;;) {
                void *p = mb_page_alloc(b);

                if (!p) {
                        ck_assert_int_eq(errno, ENOMEM);
                        break;
                }
                ck_assert_uint_lt(nb, ELEMENTSOF(pb));
                pb[nb++] = p;
        }
        /* A's stock was drained by B's charges at the limit: this pop
         * finds the page just freed and asks for a charge ahead. */
        ck_assert_int_eq(mb_page_free(a, pa[--na]), 0);
        pa[na] = mb_page_alloc(a);
        ck_assert_ptr_nonnull(pa[na]);
        na++;
        wait_refill_idle(a);
        /* Both still work at the limit. */
        ck_assert_ptr_null(mb_page_alloc(b));
        ck_assert_int_eq(errno, ENOMEM);
        ck_assert_int_eq(mb_page_free_bulk(b, pb, nb), 0);
        ck_assert_int_eq(mb_page_free_bulk(a, pa, na), 0);
        mb_close(b);
        mb_close(a);
}
END_TEST

/* ---- remote drains against the fast path on every CPU ---- */

#define STRESS_PER_CPU 2
#define STRESS_ROUNDS 50000
#define STRESS_HOLD_MAX 14
#define STRESS_UNPINNED UINT_MAX

struct stress_arg {
        mb_client *c;
        unsigned id, cpu;
        unsigned bad, failed, enomem, pinned;
        char first_error[200];  /* mb_last_error() of the first failed call */
};

/* A call of @a failed with @r (a negative errno): count it, keep the first
 * reason.  ENOMEM at MemoryMax is expected. */
static void stress_failed(struct stress_arg *a, int r) {
        if (r == -ENOMEM) {
                a->enomem++;
                return;
        }
        if (a->failed++ == 0)
                snprintf(a->first_error, sizeof(a->first_error), "%s (%s)", strerror(-r), mb_last_error());
}

static _Atomic bool stress_stop;
static _Atomic unsigned stress_running; /* workers not finished */

/* One thread pinned to @a->cpu: single and bulk allocs and frees from this
 * CPU's stock, every page filled with the thread's pattern and checked
 * before it goes back (a page handed out twice, or stocked twice, shows as
 * foreign data). */
static void *stress_worker(void *userdata) {
        struct stress_arg *a = userdata;
        void *held[STRESS_HOLD_MAX];
        uint64_t gen[STRESS_HOLD_MAX];
        unsigned n = 0;
        uint64_t rng = a->id * 7919u + 1;
        cpu_set_t set;

        if (a->cpu == STRESS_UNPINNED)
                a->pinned = 1; /* free to migrate: aborted sequences settle elsewhere */
        else {
                CPU_ZERO(&set);
                CPU_SET(a->cpu, &set);
                if (sched_setaffinity(0, sizeof(set), &set) == 0)
                        a->pinned = 1;
        }
        for (unsigned it = 0; it < STRESS_ROUNDS; it++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                if (n < STRESS_HOLD_MAX && (n == 0 || (rng >> 33) % 2)) {
                        void *v[2];
                        unsigned k = n + 2 <= STRESS_HOLD_MAX && (rng >> 40) % 4 == 0 ? 2 : 1;

                        if (k == 1) {
                                v[0] = mb_page_alloc(a->c);
                                if (!v[0]) {
                                        stress_failed(a, -errno);
                                        continue;
                                }
                        } else {
                                int r = mb_page_alloc_bulk(a->c, v, 2);

                                if (r < 0) {
                                        stress_failed(a, r);
                                        continue;
                                }
                        }
                        for (unsigned j = 0; j < k; j++) {
                                gen[n] = (uint64_t) it << 8 | j;
                                fill(v[j], a->id, gen[n]);
                                held[n++] = v[j];
                        }
                } else {
                        unsigned i = (unsigned) ((rng >> 40) % n);
                        int r;

                        if (!check_fill(held[i], a->id, gen[i]))
                                a->bad++;
                        r = mb_page_free(a->c, held[i]);
                        if (r < 0)
                                stress_failed(a, r);
                        held[i] = held[--n];
                        gen[i] = gen[n];
                }
        }
        for (unsigned i = 0; i < n; i++)
                if (!check_fill(held[i], a->id, gen[i]))
                        a->bad++;
        if (n > 0) {
                int r = mb_page_free_bulk(a->c, held, n);

                if (r < 0)
                        stress_failed(a, r);
        }
        atomic_fetch_sub(&stress_running, 1);
        return NULL;
}

/* A second client of the same tenant takes everything up to the limit
 * over and over: each charge that fails at MemoryMax makes the daemon
 * drain the first client's stocks (drain_all_stock()), which its library
 * thread does from whatever CPU it runs on, while the workers run. */
static void *stress_drainer(void *userdata) {
        mb_client *d = userdata;
        void *v[SMALL_MAX_PAGES];
        unsigned rounds = 0;

        while (!atomic_load(&stress_stop) || rounds < 8) {
                unsigned n = 0;

                while (n < SMALL_MAX_PAGES && (v[n] = mb_page_alloc(d)) != NULL)
                        n++;
                if (n > 0)
                        ck_assert_int_eq(mb_page_free_bulk(d, v, n), 0);
                rounds++;
        }
        return NULL;
}

/* The same from inside the process, as fast as it goes: every stocked page
 * of every CPU back to the daemon (the remote way), from an unpinned
 * thread. */
static void *stress_remote_drainer(void *userdata) {
        mb_client *c = userdata;
        long calls = 0;

        while (!atomic_load(&stress_stop)) {
                ck_assert_int_ge(mb_client_drain_stocks(c), 0);
                calls++;
        }
        return (void *) calls;
}

/* Signals abort the sequences in flight (the kernel restarts them at their
 * abort handler before the handler runs): a storm of them on the workers
 * makes restarts, before and after a sequence's slot stores, common. */
static _Atomic long stress_signals;

static void stress_signal_handler(int sig) {
        (void) sig;
        atomic_fetch_add(&stress_signals, 1);
}

struct stress_signaller {
        pthread_t *threads;
        unsigned n;
        long sent;
};

static void *stress_signaller(void *userdata) {
        struct stress_signaller *g = userdata;

        /* Until every worker is done: none has exited (they are joined
         * after this thread). */
        while (atomic_load(&stress_running) > 0) {
                for (unsigned i = 0; i < g->n; i++)
                        if (pthread_kill(g->threads[i], SIGUSR1) == 0)
                                g->sent++;
                sched_yield();
        }
        return NULL;
}

static int cmp_ptr(const void *a, const void *b) {
        uintptr_t x = (uintptr_t) *(void *const *) a, y = (uintptr_t) *(void *const *) b;

        return x < y ? -1 : x > y;
}

START_TEST(test_drain_stress) {
        mb_client *c = connect_or_die("small"), *d = connect_or_die("small");
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned ncpu = online > 0 ? (unsigned) MB_MIN(online, 64) : 1, nthreads = ncpu * STRESS_PER_CPU + 1, got = 0;
        struct sigaction sa = { .sa_handler = stress_signal_handler, .sa_flags = SA_RESTART };
        struct stress_signaller sig = { 0 };
        pthread_t signaller;
        struct stress_arg *args = calloc(nthreads, sizeof(*args));
        pthread_t *t = calloc(nthreads, sizeof(*t)), drainer, remote;
        void *all[SMALL_MAX_PAGES + 1], *calls;
        unsigned pinned = 0;

        ck_assert_ptr_nonnull(args);
        ck_assert_ptr_nonnull(t);
        atomic_store(&stress_stop, false);
        ck_assert_int_eq(pthread_create(&drainer, NULL, stress_drainer, d), 0);
        ck_assert_int_eq(pthread_create(&remote, NULL, stress_remote_drainer, c), 0);
        ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
        atomic_store(&stress_running, nthreads);
        for (unsigned i = 0; i < nthreads; i++) {
                /* One per CPU pinned, STRESS_PER_CPU times, and one free to migrate. */
                args[i] = (struct stress_arg) { .c = c, .id = i + 1000,
                                                .cpu = i + 1 < nthreads ? i % ncpu : STRESS_UNPINNED };
                ck_assert_int_eq(pthread_create(&t[i], NULL, stress_worker, &args[i]), 0);
        }
        sig = (struct stress_signaller) { .threads = t, .n = nthreads };
        ck_assert_int_eq(pthread_create(&signaller, NULL, stress_signaller, &sig), 0);
        ck_assert_int_eq(pthread_join(signaller, NULL), 0);
        ck_assert_int_gt(atomic_load(&stress_signals), 0);
        printf("drain-stress: %ld signals sent, %ld handled by the workers\n", sig.sent, atomic_load(&stress_signals));
        for (unsigned i = 0; i < nthreads; i++) {
                ck_assert_int_eq(pthread_join(t[i], NULL), 0);
                ck_assert_msg(args[i].bad == 0, "thread %u found %u pages with foreign data", i, args[i].bad);
                ck_assert_msg(args[i].failed == 0, "thread %u: %u calls failed, the first: %s", i, args[i].failed,
                              args[i].first_error);
                pinned += args[i].pinned;
        }
        atomic_store(&stress_stop, true);
        ck_assert_int_eq(pthread_join(drainer, NULL), 0);
        ck_assert_int_eq(pthread_join(remote, &calls), 0);
        ck_assert_int_gt((long) calls, 0);
        ck_assert_msg(pinned == nthreads, "only %u of %u threads could be pinned", pinned, nthreads);
        mb_close(d);

        /* Quiescent: every page the workers had is back in some stock, and
         * the slots say so exactly. */
        ck_assert_int_eq(stat_sum(c, MB_STAT_PAGES), 0);
        ck_assert_int_eq(stat_sum(c, MB_STAT_PGALLOC), stat_sum(c, MB_STAT_PGFREE));
        ck_assert_int_ge(stat_sum(c, MB_STAT_PGALLOC), (int64_t) nthreads * STRESS_ROUNDS / 8);

        /* Nothing lost, nothing twice: stocked + charged now == MemoryMax,
         * every page once.  The last allocations take the other CPUs'
         * stocks (the local drain_all_stock()) before failing. */
        while (got <= SMALL_MAX_PAGES && (all[got] = mb_page_alloc(c)) != NULL)
                got++;
        ck_assert_int_eq(errno, ENOMEM);
        ck_assert_uint_eq(got, SMALL_MAX_PAGES);
        qsort(all, got, sizeof(all[0]), cmp_ptr);
        for (unsigned i = 1; i < got; i++)
                ck_assert_msg(all[i] != all[i - 1], "page %p handed out twice", all[i]);
        ck_assert_int_eq(stat_sum(c, MB_STAT_PAGES), (int64_t) SMALL_MAX_PAGES);
        ck_assert_int_eq(stat_sum(c, MB_STAT_STOCK), 0);
        ck_assert_int_eq(mb_page_free_bulk(c, all, got), 0);
        ck_assert_int_eq(stat_sum(c, MB_STAT_PAGES), 0);
        ck_assert_int_eq(stat_sum(c, MB_STAT_PGALLOC), stat_sum(c, MB_STAT_PGFREE));
        free(args);
        free(t);
        mb_close(c);
}
END_TEST

/* ---- the stats region ---- */

START_TEST(test_stats_slot_after_quiescence) {
        unsigned cpu = pin_here();
        mb_client *c = connect_or_die("app");
        const struct mb_stats_region *r = mb_client_stats_region(c);
        void *pages[20 + 10];

        ck_assert_uint_eq(r->magic, MB_STATS_MAGIC);
        ck_assert_uint_eq(r->nslots, mb_client_ncpus(c));
        ck_assert_uint_lt(cpu, r->nslots);
        ck_assert_uint_eq(mb_client_cpu(c), cpu);

        /* 10 single allocations: two batches charged (1 + 7, then 1 + 7). */
        for (unsigned i = 0; i < 10; i++)
                ck_assert_ptr_nonnull(pages[i] = mb_page_alloc(c));
        for (unsigned i = 0; i < 3; i++)
                ck_assert_int_eq(mb_page_free(c, pages[i]), 0);
        ck_assert_int_eq(r->slot[cpu].v[MB_STAT_PAGES], 7);
        ck_assert_int_eq(r->slot[cpu].v[MB_STAT_PGALLOC], 10);
        ck_assert_int_eq(r->slot[cpu].v[MB_STAT_PGFREE], 3);
        ck_assert_int_eq(r->slot[cpu].v[MB_STAT_STOCK], 2 * BATCH - 7);

        /* Bulk: 20 more (9 from the stock, 11 charged in one request), then
         * all 27 back: the stock would hold 27 > 2 * BATCH, so two batches
         * go back to the daemon. */
        ck_assert_int_eq(mb_page_alloc_bulk(c, pages + 10, 20), 0);
        ck_assert_int_eq(r->slot[cpu].v[MB_STAT_PAGES], 27);
        ck_assert_int_eq(r->slot[cpu].v[MB_STAT_PGALLOC], 30);
        ck_assert_int_eq(r->slot[cpu].v[MB_STAT_STOCK], 0);
        ck_assert_int_eq(mb_page_free_bulk(c, pages + 3, 27), 0);
        ck_assert_int_eq(r->slot[cpu].v[MB_STAT_PAGES], 0);
        ck_assert_int_eq(r->slot[cpu].v[MB_STAT_PGFREE], 30);
        ck_assert_int_eq(r->slot[cpu].v[MB_STAT_STOCK], 27 - 2 * BATCH);

        /* mb_client_stat_add() (the slab allocator's entry) lands there too. */
        mb_client_stat_add(c, MB_STAT_SLAB_UNRECLAIMABLE, 4096);
        ck_assert_int_eq(r->slot[cpu].v[MB_STAT_SLAB_UNRECLAIMABLE], 4096);
        ck_assert_uint_gt(r->slot[cpu].updates, 0);

        /* Nothing on other CPUs, nothing in the daemon's items. */
        for (uint32_t i = 0; i < r->nslots; i++) {
                for (int item = 0; item < _MB_STAT_NR; item++) {
                        if (i == cpu && (item == MB_STAT_PAGES || item == MB_STAT_STOCK ||
                                         item == MB_STAT_PGALLOC || item == MB_STAT_PGFREE ||
                                         item == MB_STAT_SLAB_UNRECLAIMABLE))
                                continue;
                        ck_assert_msg(r->slot[i].v[item] == 0, "slot %u item %d = %lld", i, item,
                                      (long long) r->slot[i].v[item]);
                }
                if (i != cpu)
                        ck_assert_uint_eq(r->slot[i].updates, 0);
        }
        mb_close(c);
}
END_TEST

/* ---- refusals ---- */

START_TEST(test_refused_tenants) {
        mb_client *c = NULL;
        pid_t pid;
        int status;

        ck_assert_int_eq(mb_connect(NULL, "nosuch", &c), -ENOENT);
        ck_assert_msg(strstr(mb_last_error(), "nosuch"), "message: %s", mb_last_error());

        ck_assert_int_eq(mb_connect(NULL, "grp", &c), -EISDIR);
        ck_assert_msg(strstr(mb_last_error(), "grp") && strstr(mb_last_error(), "children"), "message: %s",
                      mb_last_error());

        ck_assert_int_eq(mb_connect("/nonexistent/membroker.sock", "app", &c), -ECONNREFUSED);
        ck_assert_msg(strstr(mb_last_error(), "/nonexistent/membroker.sock"), "message: %s", mb_last_error());

        /* A uid the tenant does not allow. */
        if (geteuid() != 0)
                return;
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int r;

                if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(10);
                r = mb_connect(NULL, "locked", &c);
                if (r != -EACCES)
                        _exit(11);
                if (!strstr(mb_last_error(), "65534") || !strstr(mb_last_error(), "locked") ||
                    !strstr(mb_last_error(), "not allowed"))
                        _exit(12);
                /* A tenant without AllowUsers=/AllowGroups=/Cgroup= admits
                 * only root. */
                r = mb_connect(NULL, "app", &c);
                if (r != -EACCES)
                        _exit(13);
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
}
END_TEST

static void *thread_error(void *userdata) {
        mb_client *c = NULL;

        (void) mb_connect(NULL, "nosuch-in-thread", &c);
        return strdup(mb_last_error());
}

START_TEST(test_last_error_is_per_thread) {
        mb_client *c = NULL;
        pthread_t t;
        char *other;

        ck_assert_int_eq(mb_connect(NULL, "nosuch", &c), -ENOENT);
        ck_assert_int_eq(pthread_create(&t, NULL, thread_error, NULL), 0);
        ck_assert_int_eq(pthread_join(t, (void **) &other), 0);
        ck_assert_ptr_nonnull(strstr(other, "nosuch-in-thread"));
        ck_assert_ptr_null(strstr(mb_last_error(), "nosuch-in-thread"));
        ck_assert_ptr_nonnull(strstr(mb_last_error(), "nosuch"));
        free(other);
}
END_TEST

static Suite *client_suite(void) {
        Suite *s = suite_create("client");
        struct {
                const char *name;
                const TTest *test;
        } cases[] = {
                { "basic", test_connect_alloc_write_free_close },
                { "close", test_close_returns_everything },
                { "handle", test_handle_pointer },
                { "bulk-limit", test_bulk_all_or_nothing },
                { "single-limit", test_single_allocs_reach_max },
                { "share", test_share_handle_between_processes },
                { "fork", test_fork_child_cannot_use_parent_connection },
                { "threads", test_threads_alloc_free_verify },
                { "threads-limit", test_threads_at_limit },
                { "refill-limit", test_refill_at_limit },
                { "drain-stress", test_drain_stress },
                { "stats", test_stats_slot_after_quiescence },
                { "refused", test_refused_tenants },
                { "last-error", test_last_error_is_per_thread },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                TCase *tc = tcase_create(cases[i].name);

                tcase_set_timeout(tc, 60);
                tcase_add_test(tc, cases[i].test);
                suite_add_tcase(s, tc);
        }
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(client_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
