/* SPDX-License-Identifier: MIT */
/*
 * test-slab.c - unit tests of client/slab/slab.h, linked against a fake client
 * (tests/slab-fake-client.c) so that layouts, the byte stock, the shrinker
 * callbacks and forced remote frees can be checked exactly.  The
 * integration tests (test-slab-*.sh) run the same code in the real library
 * against a real daemon.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macros.h"
#include "membroker.h"
#include "slab-fake-client.h"

#define PAGE_BYTES 4096u
#define NPAGES 8192u
#define NCPUS 4u

static mb_client *client;

static void setup(void) {
        unsetenv(MB_SLAB_DEBUG_ENV);
        client = fake_client_new(NPAGES, PAGE_BYTES, NCPUS);
        fake_client_set_cpu(0);
}

static void teardown(void) {
        fake_client_free(client);
        client = NULL;
}

/* ---- stderr capture ---- */

struct capture {
        int saved;
        FILE *f;
};

static void capture_start(struct capture *cap) {
        fflush(stderr);
        cap->f = tmpfile();
        ck_assert_ptr_nonnull(cap->f);
        cap->saved = dup(STDERR_FILENO);
        ck_assert_int_ge(cap->saved, 0);
        ck_assert_int_ge(dup2(fileno(cap->f), STDERR_FILENO), 0);
}

/* Returns the captured text (malloc'ed). */
static char *capture_end(struct capture *cap) {
        char *buf;
        long n;

        fflush(stderr);
        dup2(cap->saved, STDERR_FILENO);
        close(cap->saved);
        n = ftell(cap->f);
        buf = calloc(1, (size_t) n + 1);
        ck_assert_ptr_nonnull(buf);
        rewind(cap->f);
        if (n > 0)
                ck_assert_int_eq(fread(buf, 1, (size_t) n, cap->f), n);
        fclose(cap->f);
        return buf;
}

static uint64_t live_bytes(mb_cache *s) {
        struct mb_cache_stats st;

        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        return st.live_objects * st.object_bytes;
}

/* Bytes of the objects on @s's per-CPU lists: charged, not live. */
static uint64_t list_bytes(mb_cache *s) {
        struct mb_cache_stats st;

        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        return st.cpu_free_objects * st.object_bytes;
}

/* The byte stock invariant and the stat: see client/slab/slab.h.  @listed: the
 * bytes on the caches' per-CPU lists (list_bytes()), which stock_bytes
 * includes beside the byte stocks proper (each below a page). */
static void check_charging(uint64_t live_reclaimable, uint64_t live_unreclaimable, uint64_t listed) {
        struct mb_slab_stats ss;

        ck_assert_int_eq(mb_slab_stats(client, &ss), 0);
        ck_assert_uint_eq((ss.charged_pages - ss.uncharged_pages) * PAGE_BYTES,
                          live_reclaimable + live_unreclaimable + ss.stock_bytes);
        ck_assert_uint_ge(ss.stock_bytes, listed);
        ck_assert_uint_le(ss.stock_bytes - listed, (uint64_t) NCPUS * PAGE_BYTES);
        ck_assert_int_eq(ss.reclaimable_bytes + ss.pending_reclaimable_bytes, (int64_t) live_reclaimable);
        ck_assert_int_eq(ss.unreclaimable_bytes + ss.pending_unreclaimable_bytes, (int64_t) live_unreclaimable);
        ck_assert_int_eq(fake_client_stat(client, MB_STAT_SLAB_RECLAIMABLE), ss.reclaimable_bytes);
        ck_assert_int_eq(fake_client_stat(client, MB_STAT_SLAB_UNRECLAIMABLE), ss.unreclaimable_bytes);
}

START_TEST(test_layout_and_alignment) {
        static const size_t sizes[] = { 1, 8, 13, 24, 64, 100, 512, 1000, 2048, 3000, 4096 };
        static const size_t aligns[] = { 0, 8, 16, 64, 256, 4096 };

        for (size_t i = 0; i < ELEMENTSOF(sizes); i++)
                for (size_t j = 0; j < ELEMENTSOF(aligns); j++) {
                        mb_cache *s = mb_cache_create(client, "layout", sizes[i], aligns[j], 0, NULL);
                        size_t a = aligns[j] ? aligns[j] : 8;
                        struct mb_cache_stats st;
                        void *o[4];

                        ck_assert_ptr_nonnull(s);
                        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
                        ck_assert_uint_ge(st.object_bytes, sizes[i] < 8 ? 8 : sizes[i]);
                        ck_assert_uint_eq(st.object_bytes % a, 0);
                        ck_assert_uint_eq(st.objects_per_slab, PAGE_BYTES / st.object_bytes);
                        ck_assert(st.overhead_bytes_per_object >= 0.0);
                        for (size_t k = 0; k < 4; k++) {
                                o[k] = mb_cache_alloc(s);
                                ck_assert_ptr_nonnull(o[k]);
                                ck_assert_uint_eq((uintptr_t) o[k] % a, 0);
                                memset(o[k], 0xee, sizes[i]);
                        }
                        for (size_t k = 0; k < 4; k++)
                                mb_cache_free(s, o[k]);
                        ck_assert_uint_eq(mb_cache_destroy(s), 0);
                }
        ck_assert_uint_eq(fake_client_pages_in_use(client), 0);
}
END_TEST

START_TEST(test_sizes_sharing_a_slab) {
        /* Up to half a page objects share slabs; the overhead of a 64-byte
         * object is a byte of metadata, nothing in the slab. */
        mb_cache *s = mb_cache_create(client, "s64", 64, 0, 0, NULL);
        struct mb_cache_stats st;

        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        ck_assert_uint_eq(st.object_bytes, 64);
        ck_assert_uint_eq(st.objects_per_slab, 64);
        ck_assert(st.overhead_bytes_per_object > 0.5 && st.overhead_bytes_per_object < 2.0);
        mb_cache_destroy(s);

        s = mb_cache_create(client, "s2048", 2048, 0, 0, NULL);
        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        ck_assert_uint_eq(st.objects_per_slab, 2);
        mb_cache_destroy(s);
}
END_TEST

START_TEST(test_create_rejects) {
        errno = 0;
        ck_assert_ptr_null(mb_cache_create(client, "big", PAGE_BYTES + 1, 0, 0, NULL));
        ck_assert_int_eq(errno, EINVAL);
        ck_assert_ptr_nonnull(strstr(mb_last_error(), "mb_page_alloc_bulk"));
        ck_assert_ptr_null(mb_cache_create(client, "align", 64, 24, 0, NULL));
        ck_assert_int_eq(errno, EINVAL);
        ck_assert_ptr_null(mb_cache_create(client, "zero", 0, 0, 0, NULL));
        ck_assert_int_eq(errno, EINVAL);
        ck_assert_ptr_null(mb_cache_create(client, "flags", 64, 0, 0x80, NULL));
        ck_assert_int_eq(errno, EINVAL);
        ck_assert_uint_eq(fake_client_nshrinkers(client), 0);
}
END_TEST

START_TEST(test_whole_page_objects) {
        mb_cache *s = mb_cache_create(client, "page", 3000, 0, 0, NULL);
        void *a, *b;

        ck_assert_ptr_nonnull(s);
        a = mb_cache_alloc(s);
        b = mb_cache_alloc(s);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_uint_eq((uintptr_t) a % PAGE_BYTES, 0);
        ck_assert_uint_eq((uintptr_t) b % PAGE_BYTES, 0);
        ck_assert_uint_eq(fake_client_pages_in_use(client), 2);
        memset(a, 1, 3000);
        memset(b, 2, 3000);
        mb_cache_free(s, a);
        mb_cache_free(s, b);
        ck_assert_uint_eq(mb_cache_shrink(s), 2);
        ck_assert_uint_eq(fake_client_pages_in_use(client), 0);
        mb_cache_destroy(s);
}
END_TEST

static unsigned ctor_calls;

static void ctor_fill(void *obj) {
        __atomic_fetch_add(&ctor_calls, 1, __ATOMIC_RELAXED);
        memset(obj, 0xc7, 40);
}

START_TEST(test_ctor_once_per_object) {
        mb_cache *s = mb_cache_create(client, "ctor", 40, 0, 0, ctor_fill);
        struct mb_cache_stats st;
        void *o[300];

        ctor_calls = 0;
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        for (size_t i = 0; i < ELEMENTSOF(o); i++) {
                uint8_t *p = o[i] = mb_cache_alloc(s);

                ck_assert_ptr_nonnull(p);
                for (size_t k = 0; k < 40; k++)
                        ck_assert_uint_eq(p[k], 0xc7);
        }
        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        ck_assert_uint_eq(ctor_calls, st.slabs * st.objects_per_slab);
        /* Freed in the constructed state; the constructed state survives
         * free and reallocation, no constructor runs again. */
        for (size_t i = 0; i < ELEMENTSOF(o); i++)
                mb_cache_free(s, o[i]);
        for (size_t i = 0; i < ELEMENTSOF(o); i++) {
                uint8_t *p = o[i] = mb_cache_alloc(s);

                for (size_t k = 0; k < 40; k++)
                        ck_assert_uint_eq(p[k], 0xc7);
        }
        ck_assert_uint_eq(ctor_calls, st.slabs * st.objects_per_slab);
        for (size_t i = 0; i < ELEMENTSOF(o); i++)
                mb_cache_free(s, o[i]);
        ck_assert_uint_eq(mb_cache_destroy(s), 0);
}
END_TEST

START_TEST(test_distinct_objects_and_reuse) {
        mb_cache *s = mb_cache_create(client, "distinct", 24, 0, 0, NULL);
        enum { N = 5000 };
        uint8_t **o = calloc(N, sizeof(*o));

        ck_assert_ptr_nonnull(s);
        for (size_t i = 0; i < N; i++) {
                o[i] = mb_cache_alloc(s);
                ck_assert_ptr_nonnull(o[i]);
                memset(o[i], (int) (i & 0xff), 24);
        }
        for (size_t i = 0; i < N; i++)
                for (size_t k = 0; k < 24; k++)
                        ck_assert_uint_eq(o[i][k], i & 0xff);
        for (size_t i = 0; i < N; i += 2)
                mb_cache_free(s, o[i]);
        for (size_t i = 0; i < N; i += 2) {
                o[i] = mb_cache_alloc(s);
                memset(o[i], (int) (i & 0xff), 24);
        }
        for (size_t i = 0; i < N; i++)
                for (size_t k = 0; k < 24; k++)
                        ck_assert_uint_eq(o[i][k], i & 0xff);
        for (size_t i = 0; i < N; i++)
                mb_cache_free(s, o[i]);
        ck_assert_uint_eq(mb_cache_destroy(s), 0);
        ck_assert_uint_eq(fake_client_pages_in_use(client), 0);
        free(o);
}
END_TEST

START_TEST(test_byte_stock_and_stat_exact) {
        mb_cache *r = mb_cache_create(client, "recl", 200, 0, MB_CACHE_RECLAIMABLE, NULL);
        mb_cache *u = mb_cache_create(client, "unrecl", 56, 0, 0, NULL);
        enum { N = 3000 };
        void **a = calloc(N, sizeof(void *)), **b = calloc(N, sizeof(void *));
        struct mb_slab_stats ss;
        unsigned seed = 7;

        ck_assert_ptr_nonnull(r);
        ck_assert_ptr_nonnull(u);
        for (unsigned round = 0; round < 20; round++) {
                fake_client_set_cpu((int) (round % NCPUS));
                for (size_t i = 0; i < N; i++) {
                        if (rand_r(&seed) % 2) {
                                if (a[i]) {
                                        mb_cache_free(r, a[i]);
                                        a[i] = NULL;
                                } else
                                        a[i] = mb_cache_alloc(r);
                        } else {
                                if (b[i]) {
                                        mb_cache_free(u, b[i]);
                                        b[i] = NULL;
                                } else
                                        b[i] = mb_cache_alloc(u);
                        }
                }
                check_charging(live_bytes(r), live_bytes(u), list_bytes(r) + list_bytes(u));
        }
        ck_assert_int_eq(mb_slab_stats(client, &ss), 0);
        ck_assert_uint_gt(ss.charged_pages, 0);

        /* After the drain the stats region holds the exact figures. */
        mb_slab_drain(client);
        ck_assert_int_eq(mb_slab_stats(client, &ss), 0);
        ck_assert_int_eq(ss.pending_reclaimable_bytes, 0);
        ck_assert_int_eq(ss.pending_unreclaimable_bytes, 0);
        ck_assert_uint_lt(ss.stock_bytes - list_bytes(r) - list_bytes(u), (uint64_t) NCPUS * PAGE_BYTES);
        ck_assert_int_eq(fake_client_stat(client, MB_STAT_SLAB_RECLAIMABLE), (int64_t) live_bytes(r));
        ck_assert_int_eq(fake_client_stat(client, MB_STAT_SLAB_UNRECLAIMABLE), (int64_t) live_bytes(u));
        check_charging(live_bytes(r), live_bytes(u), list_bytes(r) + list_bytes(u));

        for (size_t i = 0; i < N; i++) {
                mb_cache_free(r, a[i]);
                mb_cache_free(u, b[i]);
        }
        /* Lists past cpu_max went back to the slabs: their bytes were
         * uncharged (refill_obj_stock() of whole pages' worth). */
        ck_assert_int_eq(mb_slab_stats(client, &ss), 0);
        ck_assert_uint_gt(ss.uncharged_pages, 0);
        mb_slab_drain(client);
        ck_assert_int_eq(fake_client_stat(client, MB_STAT_SLAB_RECLAIMABLE), 0);
        ck_assert_int_eq(fake_client_stat(client, MB_STAT_SLAB_UNRECLAIMABLE), 0);
        check_charging(0, 0, list_bytes(r) + list_bytes(u));
        ck_assert_uint_eq(mb_cache_destroy(r), 0);
        ck_assert_uint_eq(mb_cache_destroy(u), 0);
        free(a);
        free(b);
}
END_TEST

START_TEST(test_stat_written_in_page_batches) {
        /* Deltas stay in the per-CPU stock until they pass a page's worth,
         * as __account_obj_stock() does. */
        mb_cache *s = mb_cache_create(client, "batch", 64, 0, 0, NULL);
        void *o[100];

        for (size_t i = 0; i < 64; i++)
                o[i] = mb_cache_alloc(s);
        ck_assert_int_eq(fake_client_stat(client, MB_STAT_SLAB_UNRECLAIMABLE), 0);
        for (size_t i = 64; i < 100; i++)
                o[i] = mb_cache_alloc(s);
        ck_assert_int_gt(fake_client_stat(client, MB_STAT_SLAB_UNRECLAIMABLE), PAGE_BYTES);
        for (size_t i = 0; i < 100; i++)
                mb_cache_free(s, o[i]);
        mb_cache_destroy(s);
        /* The last cache's destruction writes everything out. */
        ck_assert_int_eq(fake_client_stat(client, MB_STAT_SLAB_UNRECLAIMABLE), 0);
}
END_TEST

START_TEST(test_shrink_gives_empty_slabs_back) {
        mb_cache *s = mb_cache_create(client, "shrink", 128, 0, 0, NULL);
        enum { N = 32 * 40 };
        void **o = calloc(N, sizeof(void *));
        struct mb_cache_stats st;
        size_t pages;

        for (size_t i = 0; i < N; i++)
                o[i] = mb_cache_alloc(s);
        pages = fake_client_pages_in_use(client);
        ck_assert_uint_eq(pages, 40);
        /* Keep one object in the first and the last slab. */
        for (size_t i = 1; i < N - 1; i++)
                mb_cache_free(s, o[i]);
        /* Past the threshold empty slabs went back already. */
        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        ck_assert_uint_le(st.empty_slabs, 10);
        ck_assert_uint_lt(fake_client_pages_in_use(client), pages);
        mb_cache_shrink(s);
        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        ck_assert_uint_eq(st.empty_slabs, 0);
        ck_assert_uint_eq(st.cpu_free_objects, 0);
        ck_assert_uint_eq(st.slabs, 2);
        ck_assert_uint_eq(fake_client_pages_in_use(client), 2);
        mb_cache_free(s, o[0]);
        mb_cache_free(s, o[N - 1]);
        ck_assert_uint_eq(mb_cache_shrink(s), 2);
        ck_assert_uint_eq(fake_client_pages_in_use(client), 0);
        ck_assert_uint_eq(mb_cache_destroy(s), 0);
        free(o);
}
END_TEST

START_TEST(test_shrinker_callbacks) {
        mb_cache *u = mb_cache_create(client, "plain", 64, 0, 0, NULL);
        mb_cache *r = mb_cache_create(client, "cache", 64, 0, MB_CACHE_RECLAIMABLE, NULL);
        const struct mb_shrinker *sh;
        enum { N = 64 * 20 };
        void **o = calloc(N, sizeof(void *));
        unsigned long count, freed;

        /* Only the reclaimable cache registers a shrinker. */
        ck_assert_uint_eq(fake_client_nshrinkers(client), 1);
        sh = fake_client_shrinker(client, 0);
        ck_assert_uint_eq(sh->count(sh->userdata), 0);
        for (size_t i = 0; i < N; i++)
                o[i] = mb_cache_alloc(r);
        ck_assert_uint_eq(fake_client_pages_in_use(client), 20);
        ck_assert_uint_eq(sh->count(sh->userdata), 0);
        for (size_t i = 0; i < N; i++)
                mb_cache_free(r, o[i]);
        count = sh->count(sh->userdata);
        ck_assert_uint_gt(count, 0);
        freed = sh->scan(sh->userdata, 1);
        ck_assert_uint_ge(freed, 1);
        freed += sh->scan(sh->userdata, 1000);
        ck_assert_uint_ge(freed, count);
        ck_assert_uint_eq(sh->count(sh->userdata), 0);
        ck_assert_uint_eq(fake_client_pages_in_use(client), 0);
        ck_assert_uint_eq(mb_cache_destroy(r), 0);
        ck_assert_uint_eq(fake_client_nshrinkers(client), 0);
        mb_cache_destroy(u);
        free(o);
}
END_TEST

/* Large pages: a slab of 8-byte objects holds more than cpu_max (1024)
 * objects, so a refill brings more than cpu_max to a CPU's list at once
 * (the list's slots have room for it: cpu_cap). */
START_TEST(test_slab_larger_than_cpu_list) {
        enum { BIG_PAGE = 65536, N = 20000 };
        mb_client *big = fake_client_new(64, BIG_PAGE, NCPUS);
        mb_cache *s = mb_cache_create(big, "tiny-on-big-pages", 8, 0, 0, NULL);
        void **o = calloc(N, sizeof(void *));
        struct mb_cache_stats st;
        struct mb_slab_stats ss;

        ck_assert_ptr_nonnull(s);
        ck_assert_ptr_nonnull(o);
        for (unsigned round = 0; round < 3; round++) {
                fake_client_set_cpu((int) (round % NCPUS));
                for (size_t i = 0; i < N; i++) {
                        o[i] = mb_cache_alloc(s);
                        ck_assert_ptr_nonnull(o[i]);
                        *(uint64_t *) o[i] = i;
                }
                fake_client_set_cpu((int) ((round + 1) % NCPUS));
                for (size_t i = 0; i < N; i++) {
                        ck_assert_uint_eq(*(uint64_t *) o[i], i);
                        mb_cache_free(s, o[i]);
                }
        }
        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        ck_assert_uint_gt(st.objects_per_slab, 1024);
        ck_assert_uint_eq(st.live_objects, 0);
        ck_assert_uint_eq(st.allocs, 3 * N);
        ck_assert_int_eq(mb_slab_stats(big, &ss), 0);
        ck_assert_uint_eq((ss.charged_pages - ss.uncharged_pages) * BIG_PAGE, ss.stock_bytes);
        ck_assert_uint_eq(mb_cache_shrink(s) > 0, 1);
        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        ck_assert_uint_eq(st.slabs, 0);
        ck_assert_uint_eq(mb_cache_destroy(s), 0);
        ck_assert_uint_eq(fake_client_pages_in_use(big), 0);
        fake_client_set_cpu(-1);
        free(o);
        fake_client_free(big);
}
END_TEST

START_TEST(test_enomem_at_page_limit) {
        mb_cache *s = mb_cache_create(client, "limited", 1024, 0, 0, NULL);
        void *o[9];
        struct mb_slab_stats ss;

        fake_client_set_page_limit(client, 2);
        for (size_t i = 0; i < 8; i++)
                ck_assert_ptr_nonnull(o[i] = mb_cache_alloc(s));
        errno = 0;
        ck_assert_ptr_null(mb_cache_alloc(s));
        ck_assert_int_eq(errno, ENOMEM);
        check_charging(0, live_bytes(s), list_bytes(s));
        ck_assert_uint_eq(live_bytes(s), 8 * 1024);
        for (size_t i = 0; i < 8; i++)
                mb_cache_free(s, o[i]);
        ck_assert_ptr_nonnull(o[8] = mb_cache_alloc(s));
        mb_cache_free(s, o[8]);
        ck_assert_int_eq(mb_slab_stats(client, &ss), 0);
        ck_assert_uint_eq(mb_cache_destroy(s), 0);
}
END_TEST

/* ---- remote frees and concurrency ---- */

struct handoff {
        mb_cache *cache;
        void **objs;
        size_t n;
        int cpu;
};

static void *free_on_cpu(void *arg) {
        struct handoff *h = arg;

        fake_client_set_cpu(h->cpu);
        for (size_t i = 0; i < h->n; i++)
                mb_cache_free(h->cache, h->objs[i]);
        return NULL;
}

START_TEST(test_remote_free) {
        mb_cache *s = mb_cache_create(client, "remote", 96, 0, 0, NULL);
        enum { N = 4000 };
        struct handoff h = { .cache = s, .objs = calloc(N, sizeof(void *)), .n = N, .cpu = 3 };
        struct mb_cache_stats st;
        pthread_t t;

        fake_client_set_cpu(1);
        for (size_t i = 0; i < N; i++)
                h.objs[i] = mb_cache_alloc(s);
        ck_assert_int_eq(pthread_create(&t, NULL, free_on_cpu, &h), 0);
        ck_assert_int_eq(pthread_join(t, NULL), 0);
        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        ck_assert_uint_eq(st.live_objects, 0);
        check_charging(0, 0, list_bytes(s));
        /* CPU 1 gets them back through the slabs. */
        for (size_t i = 0; i < N; i++)
                ck_assert_ptr_nonnull(h.objs[i] = mb_cache_alloc(s));
        for (size_t i = 0; i < N; i++)
                mb_cache_free(s, h.objs[i]);
        ck_assert_uint_gt(mb_cache_shrink(s), 0);
        ck_assert_uint_eq(fake_client_pages_in_use(client), 0);
        ck_assert_uint_eq(mb_cache_destroy(s), 0);
        free(h.objs);
}
END_TEST

#define STRESS_CACHES 6
static const size_t stress_sizes[STRESS_CACHES] = { 8, 40, 64, 200, 1024, 2048 };

struct stress {
        mb_cache **caches;
        unsigned id;
        unsigned long ops;
        bool failed;
};

static uint64_t checksum_fill(void *obj, size_t size, uint64_t tag) {
        uint64_t *w = obj;

        for (size_t i = 0; i < size / 8; i++)
                w[i] = tag * 0x9e3779b97f4a7c15ull + i;
        return tag;
}

static bool checksum_ok(const void *obj, size_t size, uint64_t tag) {
        const uint64_t *w = obj;

        for (size_t i = 0; i < size / 8; i++)
                if (w[i] != tag * 0x9e3779b97f4a7c15ull + i)
                        return false;
        return true;
}

static void *stress_thread(void *arg) {
        struct stress *st = arg;
        enum { SLOTS = 512 };
        void *obj[SLOTS] = {};
        unsigned cache_of[SLOTS] = {};
        uint64_t tag[SLOTS] = {};
        unsigned seed = st->id * 7919 + 1;

        for (unsigned long op = 0; op < st->ops; op++) {
                unsigned i = (unsigned) rand_r(&seed) % SLOTS;

                /* Hop between CPU slots now and then: remote frees. */
                if (op % 1000 == 0)
                        fake_client_set_cpu((int) ((unsigned) rand_r(&seed) % NCPUS));
                if (obj[i]) {
                        if (!checksum_ok(obj[i], stress_sizes[cache_of[i]], tag[i]))
                                st->failed = true;
                        mb_cache_free(st->caches[cache_of[i]], obj[i]);
                        obj[i] = NULL;
                } else {
                        unsigned c = (unsigned) rand_r(&seed) % STRESS_CACHES;

                        obj[i] = mb_cache_alloc(st->caches[c]);
                        if (!obj[i]) {
                                st->failed = true;
                                continue;
                        }
                        cache_of[i] = c;
                        tag[i] = checksum_fill(obj[i], stress_sizes[c], ((uint64_t) st->id << 40) | op);
                }
        }
        for (unsigned i = 0; i < SLOTS; i++)
                if (obj[i]) {
                        if (!checksum_ok(obj[i], stress_sizes[cache_of[i]], tag[i]))
                                st->failed = true;
                        mb_cache_free(st->caches[cache_of[i]], obj[i]);
                }
        return NULL;
}

START_TEST(test_concurrent_stress) {
        enum { THREADS = 4 };
        mb_cache *caches[STRESS_CACHES];
        struct stress st[THREADS];
        pthread_t t[THREADS];

        for (unsigned c = 0; c < STRESS_CACHES; c++) {
                caches[c] = mb_cache_create(client, "stress", stress_sizes[c], 0,
                                            c % 2 ? MB_CACHE_RECLAIMABLE : 0, NULL);
                ck_assert_ptr_nonnull(caches[c]);
        }
        for (unsigned i = 0; i < THREADS; i++) {
                st[i] = (struct stress) { .caches = caches, .id = i, .ops = 200000 };
                ck_assert_int_eq(pthread_create(&t[i], NULL, stress_thread, &st[i]), 0);
        }
        for (unsigned i = 0; i < THREADS; i++) {
                ck_assert_int_eq(pthread_join(t[i], NULL), 0);
                ck_assert(!st[i].failed);
        }
        {
                uint64_t listed = 0;

                for (unsigned c = 0; c < STRESS_CACHES; c++)
                        listed += list_bytes(caches[c]);
                check_charging(0, 0, listed);
        }
        for (unsigned c = 0; c < STRESS_CACHES; c++) {
                mb_cache_shrink(caches[c]);
                ck_assert_uint_eq(mb_cache_destroy(caches[c]), 0);
        }
        ck_assert_uint_eq(fake_client_pages_in_use(client), 0);
        ck_assert_int_eq(fake_client_stat(client, MB_STAT_SLAB_RECLAIMABLE), 0);
        ck_assert_int_eq(fake_client_stat(client, MB_STAT_SLAB_UNRECLAIMABLE), 0);
}
END_TEST

/* ---- debug mode ---- */

static mb_cache *debug_cache(const char *name, size_t size) {
        mb_cache *s = mb_cache_create(client, name, size, 0, MB_CACHE_DEBUG, NULL);
        struct mb_cache_stats st;

        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        ck_assert(st.flags & MB_CACHE_DEBUG);
        return s;
}

static uint64_t cache_errors(mb_cache *s) {
        struct mb_cache_stats st;

        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        return st.errors;
}

START_TEST(test_debug_double_free) {
        mb_cache *s = debug_cache("dbl", 48);
        void *a = mb_cache_alloc(s), *b, *c;
        struct capture cap;
        char *out, want[128];

        mb_cache_free(s, a);
        capture_start(&cap);
        mb_cache_free(s, a);
        out = capture_end(&cap);
        snprintf(want, sizeof(want), "cache \"dbl\": double free of object %p", a);
        ck_assert_msg(strstr(out, want), "stderr: %s", out);
        ck_assert_uint_eq(cache_errors(s), 1);
        /* Ignored: the object is handed out once, not twice. */
        b = mb_cache_alloc(s);
        c = mb_cache_alloc(s);
        ck_assert_ptr_ne(b, c);
        mb_cache_free(s, b);
        mb_cache_free(s, c);
        ck_assert_uint_eq(cache_errors(s), 1);
        ck_assert_uint_eq(mb_cache_destroy(s), 0);
        free(out);
}
END_TEST

START_TEST(test_debug_wrong_cache) {
        mb_cache *s = debug_cache("left", 48), *t = debug_cache("right", 48);
        void *a = mb_cache_alloc(s);
        struct capture cap;
        char *out, want[160];
        char stack_obj[64];

        capture_start(&cap);
        mb_cache_free(t, a);
        mb_cache_free(t, stack_obj);
        mb_cache_free(s, (char *) a + 8);
        out = capture_end(&cap);
        snprintf(want, sizeof(want), "cache \"right\": free of %p into the wrong cache: it belongs to cache \"left\"", a);
        ck_assert_msg(strstr(out, want), "stderr: %s", out);
        snprintf(want, sizeof(want), "cache \"right\": free of %p: not an object of any slab cache", (void *) stack_obj);
        ck_assert_msg(strstr(out, want), "stderr: %s", out);
        snprintf(want, sizeof(want), "cache \"left\": free of %p: not the start of an object", (void *) ((char *) a + 8));
        ck_assert_msg(strstr(out, want), "stderr: %s", out);
        /* All ignored: a is still live and freeable once. */
        mb_cache_free(s, a);
        ck_assert_uint_eq(cache_errors(s), 1);
        ck_assert_uint_eq(cache_errors(t), 2);
        ck_assert_uint_eq(mb_cache_destroy(s), 0);
        ck_assert_uint_eq(mb_cache_destroy(t), 0);
        free(out);
}
END_TEST

START_TEST(test_debug_redzone) {
        mb_cache *s = debug_cache("rz", 50);
        uint8_t *a = mb_cache_alloc(s);
        struct capture cap;
        char *out, want[160];

        a[50] = 0; /* one byte past the end */
        a[-1] = 0; /* one byte before */
        capture_start(&cap);
        mb_cache_free(s, a);
        out = capture_end(&cap);
        snprintf(want, sizeof(want), "cache \"rz\": red zone of object %p overwritten at %p (object+50)", (void *) a,
                 (void *) (a + 50));
        ck_assert_msg(strstr(out, want), "stderr: %s", out);
        snprintf(want, sizeof(want), "red zone of object %p overwritten at %p (object-1)", (void *) a,
                 (void *) (a - 1));
        ck_assert_msg(strstr(out, want), "stderr: %s", out);
        ck_assert_uint_eq(cache_errors(s), 2);
        /* Repaired: the next life of the object is clean. */
        ck_assert_ptr_eq(mb_cache_alloc(s), a);
        mb_cache_free(s, a);
        ck_assert_uint_eq(cache_errors(s), 2);
        ck_assert_uint_eq(mb_cache_destroy(s), 0);
        free(out);
}
END_TEST

START_TEST(test_debug_use_after_free) {
        mb_cache *s = debug_cache("uaf", 64);
        uint8_t *a = mb_cache_alloc(s), *b;
        struct capture cap;
        char *out, want[160];

        mb_cache_free(s, a);
        a[10] = 42; /* write after free */
        capture_start(&cap);
        b = mb_cache_alloc(s); /* LIFO: the same object */
        out = capture_end(&cap);
        ck_assert_ptr_eq(a, b);
        snprintf(want, sizeof(want), "cache \"uaf\": use after free: object %p was written after it was freed (offset 10",
                 (void *) a);
        ck_assert_msg(strstr(out, want), "stderr: %s", out);
        mb_cache_free(s, b);
        ck_assert_uint_eq(mb_cache_destroy(s), 0);
        free(out);
}
END_TEST

START_TEST(test_debug_env) {
        mb_cache *s;
        struct mb_cache_stats st;

        setenv(MB_SLAB_DEBUG_ENV, "1", 1);
        s = mb_cache_create(client, "env", 64, 0, 0, NULL);
        unsetenv(MB_SLAB_DEBUG_ENV);
        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        ck_assert(st.flags & MB_CACHE_DEBUG);
        ck_assert_uint_gt(st.object_bytes, 64);
        mb_cache_destroy(s);
        s = mb_cache_create(client, "noenv", 64, 0, 0, NULL);
        ck_assert_int_eq(mb_cache_stats(s, &st), 0);
        ck_assert(!(st.flags & MB_CACHE_DEBUG));
        ck_assert_uint_eq(st.object_bytes, 64);
        mb_cache_destroy(s);
}
END_TEST

START_TEST(test_destroy_reports_live) {
        mb_cache *s = mb_cache_create(client, "leaky", 32, 0, 0, NULL);
        void *o[10];
        struct capture cap;
        char *out, want[64];
        size_t live;

        for (size_t i = 0; i < 10; i++)
                o[i] = mb_cache_alloc(s);
        for (size_t i = 0; i < 10; i += 3)
                mb_cache_free(s, o[i]); /* 0 3 6 9 freed; 6 live */
        capture_start(&cap);
        live = mb_cache_destroy(s);
        out = capture_end(&cap);
        ck_assert_uint_eq(live, 6);
        ck_assert_msg(strstr(out, "cache \"leaky\": destroyed with 6 live objects:"), "stderr: %s", out);
        snprintf(want, sizeof(want), " %p", o[1]);
        ck_assert_msg(strstr(out, want), "stderr: %s", out);
        ck_assert_msg(strstr(out, "(1 slab page left allocated)"), "stderr: %s", out);
        /* The page with live objects stays allocated. */
        ck_assert_uint_eq(fake_client_pages_in_use(client), 1);
        free(out);
}
END_TEST

START_TEST(test_fork_child_cannot_use_inherited_cache) {
        mb_cache *s = mb_cache_create(client, "forked", 64, 0, 0, NULL);
        struct mb_cache_stats before, after;
        uint8_t *obj = mb_cache_alloc(s);
        void *spare = mb_cache_alloc(s);
        int status;
        pid_t pid;

        mb_cache_free(s, spare); /* a free object on this CPU's list */
        memset(obj, 0x11, 64);
        ck_assert_int_eq(mb_cache_stats(s, &before), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                /* The objects are the parent's: nothing is handed out or
                 * taken back. */
                errno = 0;
                if (mb_cache_alloc(s) != NULL || errno != ECHILD)
                        _exit(1);
                mb_cache_free(s, obj);
                if (mb_cache_shrink(s) != 0)
                        _exit(2);
                if (mb_cache_destroy(s) != 0)
                        _exit(3);
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
        ck_assert_int_eq(mb_cache_stats(s, &after), 0);
        ck_assert_uint_eq(after.live_objects, before.live_objects);
        ck_assert_ptr_eq(mb_cache_alloc(s), spare);
        mb_cache_free(s, spare);
        mb_cache_free(s, obj);
        ck_assert_uint_eq(mb_cache_destroy(s), 0);
}
END_TEST

static Suite *slab_suite(void) {
        Suite *s = suite_create("slab");
        TCase *tc = tcase_create("core");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_layout_and_alignment);
        tcase_add_test(tc, test_sizes_sharing_a_slab);
        tcase_add_test(tc, test_create_rejects);
        tcase_add_test(tc, test_whole_page_objects);
        tcase_add_test(tc, test_ctor_once_per_object);
        tcase_add_test(tc, test_distinct_objects_and_reuse);
        tcase_add_test(tc, test_byte_stock_and_stat_exact);
        tcase_add_test(tc, test_stat_written_in_page_batches);
        tcase_add_test(tc, test_shrink_gives_empty_slabs_back);
        tcase_add_test(tc, test_shrinker_callbacks);
        tcase_add_test(tc, test_slab_larger_than_cpu_list);
        tcase_add_test(tc, test_enomem_at_page_limit);
        tcase_add_test(tc, test_remote_free);
        tcase_add_test(tc, test_concurrent_stress);
        tcase_add_test(tc, test_debug_double_free);
        tcase_add_test(tc, test_debug_wrong_cache);
        tcase_add_test(tc, test_debug_redzone);
        tcase_add_test(tc, test_debug_use_after_free);
        tcase_add_test(tc, test_debug_env);
        tcase_add_test(tc, test_destroy_reports_live);
        tcase_add_test(tc, test_fork_child_cannot_use_inherited_cache);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(slab_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
