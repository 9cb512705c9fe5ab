/* SPDX-License-Identifier: MIT */
/*
 * slab-bench.c - table 9, slab caches on broker pages against glibc malloc.
 *
 *   bench-slab SOCKET TENANT
 *
 * 9a: 64-byte objects, one thread: mb_cache_alloc+mb_cache_free one at a
 *     time and 64 at a time, against malloc(64)+free.
 * 9b: mixed sizes, two threads (and one, for reference): each thread keeps
 *     4,096 live objects of sizes 16..512 bytes and replaces a random one
 *     per operation (free it, allocate one of a random size).  The caches
 *     (one per size) are shared by the threads, as an application would
 *     share them.
 * Figures: ns per alloc+free pair per thread; ratios to glibc.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "macros.h"
#include "membroker.h"

#define NSIZES 6
#define LIVE_OBJECTS 4096

static const size_t mixed_sizes[NSIZES] = { 16, 32, 64, 128, 256, 512 };

static struct bench_opts opts;

enum kind {
        K_CACHE,
        K_CACHE64,
        K_MALLOC,
        K_MALLOC64,
        K_MIXED_CACHE,
        K_MIXED_MALLOC,
};

struct ctx {
        enum kind kind;
        unsigned threads;
        mb_cache *c64;
        mb_cache *caches[NSIZES];
        _Atomic int failed;
};

static inline uint64_t xorshift(uint64_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

static void mixed(struct ctx *x, unsigned tid, uint64_t iters) {
        static __thread void *obj[LIVE_OBJECTS];
        static __thread unsigned char cls[LIVE_OBJECTS];
        uint64_t rng = 0x1234567ULL + tid * 0x9e3779b97f4a7c15ULL;
        bool cache = x->kind == K_MIXED_CACHE;

        for (unsigned i = 0; i < LIVE_OBJECTS; i++) {
                unsigned k = (unsigned) (xorshift(&rng) % NSIZES);
                obj[i] = cache ? mb_cache_alloc(x->caches[k]) : malloc(mixed_sizes[k]);
                cls[i] = (unsigned char) k;
                if (!obj[i]) {
                        x->failed = 1;
                        return;
                }
        }
        for (uint64_t n = 0; n < iters; n++) {
                uint64_t r = xorshift(&rng);
                unsigned i = (unsigned) (r % LIVE_OBJECTS), k = (unsigned) ((r >> 32) % NSIZES);

                if (cache) {
                        mb_cache_free(x->caches[cls[i]], obj[i]);
                        obj[i] = mb_cache_alloc(x->caches[k]);
                } else {
                        free(obj[i]);
                        obj[i] = malloc(mixed_sizes[k]);
                }
                if (!obj[i]) {
                        x->failed = 1;
                        return;
                }
                *(volatile char *) obj[i] = 1;
                cls[i] = (unsigned char) k;
        }
        for (unsigned i = 0; i < LIVE_OBJECTS; i++) {
                if (cache)
                        mb_cache_free(x->caches[cls[i]], obj[i]);
                else
                        free(obj[i]);
        }
}

static void worker(void *arg, unsigned tid, uint64_t iters) {
        struct ctx *x = arg;
        void *p[64];

        switch (x->kind) {
        case K_CACHE:
                for (uint64_t i = 0; i < iters; i++) {
                        void *q = mb_cache_alloc(x->c64);
                        if (!q) {
                                x->failed = 1;
                                return;
                        }
                        bench_clobber(q);
                        mb_cache_free(x->c64, q);
                }
                break;
        case K_CACHE64:
                for (uint64_t i = 0; i < iters; i += 64) {
                        for (unsigned j = 0; j < 64; j++) {
                                p[j] = mb_cache_alloc(x->c64);
                                if (!p[j]) {
                                        x->failed = 1;
                                        return;
                                }
                                bench_clobber(p[j]);
                        }
                        for (unsigned j = 0; j < 64; j++)
                                mb_cache_free(x->c64, p[j]);
                }
                break;
        case K_MALLOC:
                for (uint64_t i = 0; i < iters; i++) {
                        void *q = malloc(64);
                        bench_clobber(q);
                        free(q);
                }
                break;
        case K_MALLOC64:
                for (uint64_t i = 0; i < iters; i += 64) {
                        for (unsigned j = 0; j < 64; j++) {
                                p[j] = malloc(64);
                                bench_clobber(p[j]);
                        }
                        for (unsigned j = 0; j < 64; j++)
                                free(p[j]);
                }
                break;
        case K_MIXED_CACHE:
        case K_MIXED_MALLOC:
                mixed(x, tid, iters);
                break;
        }
}

static double run(void *arg, uint64_t iters) {
        struct ctx *x = arg;
        double ns;

        iters = (iters + 63) / 64 * 64;
        ns = bench_threads(x->threads, worker, x, iters, true);
        if (x->failed) {
                fprintf(stderr, "bench-slab: allocation failed: %s\n", mb_last_error());
                return -1;
        }
        return ns / (double) iters;
}

int main(int argc, char **argv) {
        static struct ctx ctx[8];
        struct bench_case a[4], b[4];
        mb_client *c = NULL;
        mb_cache *c64, *caches[NSIZES];
        char b0[32], b1[32], b2[32];
        int r;

        if (argc != 3) {
                fprintf(stderr, "usage: bench-slab SOCKET TENANT\n");
                return 2;
        }
        bench_opts_init(&opts);
        r = mb_connect(argv[1], argv[2], &c);
        if (r < 0) {
                fprintf(stderr, "bench-slab: cannot connect: %s (%s)\n", strerror(-r), mb_last_error());
                return 2;
        }
        c64 = mb_cache_create(c, "bench-64", 64, 0, 0, NULL);
        for (unsigned k = 0; k < NSIZES; k++) {
                char name[32];
                snprintf(name, sizeof name, "bench-mixed-%zu", mixed_sizes[k]);
                caches[k] = mb_cache_create(c, name, mixed_sizes[k], 0, 0, NULL);
                if (!caches[k])
                        break;
        }
        if (!c64 || !caches[NSIZES - 1]) {
                fprintf(stderr, "bench-slab: mb_cache_create: %s\n", mb_last_error());
                return 2;
        }

        ctx[0] = (struct ctx) { .kind = K_MALLOC, .threads = 1 };
        ctx[1] = (struct ctx) { .kind = K_CACHE, .threads = 1, .c64 = c64 };
        ctx[2] = (struct ctx) { .kind = K_MALLOC64, .threads = 1 };
        ctx[3] = (struct ctx) { .kind = K_CACHE64, .threads = 1, .c64 = c64 };
        a[0] = (struct bench_case) { .name = "glibc malloc(64)+free", .run = run, .ctx = &ctx[0], .min_iters = 1024 };
        a[1] = (struct bench_case) { .name = "mb_cache_alloc+mb_cache_free (64 B)", .run = run, .ctx = &ctx[1],
                                     .min_iters = 1024 };
        a[2] = (struct bench_case) { .name = "glibc malloc(64) ×64 then free ×64", .run = run, .ctx = &ctx[2],
                                     .min_iters = 1024 };
        a[3] = (struct bench_case) { .name = "mb_cache_alloc ×64 then mb_cache_free ×64", .run = run,
                                     .ctx = &ctx[3], .min_iters = 1024 };
        for (unsigned t = 0; t < 2; t++) {
                struct ctx *m = &ctx[4 + 2 * t], *s = &ctx[5 + 2 * t];

                *m = (struct ctx) { .kind = K_MIXED_MALLOC, .threads = t + 1 };
                *s = (struct ctx) { .kind = K_MIXED_CACHE, .threads = t + 1 };
                memcpy(s->caches, caches, sizeof caches);
                b[2 * t] = (struct bench_case) { .name = t ? "2 threads: glibc malloc/free" : "1 thread: glibc malloc/free",
                                                 .run = run, .ctx = m, .min_iters = 1024 };
                b[2 * t + 1] = (struct bench_case) { .name = t ? "2 threads: mb_cache (one cache per size)"
                                                               : "1 thread: mb_cache (one cache per size)",
                                                     .run = run, .ctx = s, .min_iters = 1024 };
        }
        bench_run(a, 4, &opts);
        bench_run(b, 4, &opts);

        bench_table_begin("Table 9: slab caches",
                          "9a: 64-byte objects, one thread, ns per alloc+free pair (objects not touched).");
        bench_table_columns("allocator", "ns/pair (median)", "min–max", "ratio to glibc, same pattern", NULL);
        bench_table_row(&a[0], &a[0]);
        bench_table_row(&a[1], &a[0]);
        bench_table_row(&a[2], &a[2]);
        bench_table_row(&a[3], &a[2]);
        putchar('\n');
        bench_table_begin("Table 9b: mixed sizes",
                          "Each thread keeps 4,096 live objects of 16–512 bytes and replaces a random one per "
                          "operation (free + allocate a random size, first byte written); caches shared by "
                          "the threads. ns per replacement per thread.");
        bench_table_columns("threads: allocator", "ns/op (median)", "min–max", "ratio to glibc, same threads",
                            NULL);
        bench_table_row(&b[0], &b[0]);
        bench_table_row(&b[1], &b[0]);
        bench_table_row(&b[2], &b[2]);
        bench_table_row(&b[3], &b[2]);
        putchar('\n');
        if (!a[0].skip && !a[1].skip)
                bench_note("- 64-byte objects: mb_cache takes %s the time of glibc (%s vs %s ns); "
                           "no design.md target.",
                           bench_fmt_ratio(b0, sizeof b0, a[1].stat.median / a[0].stat.median),
                           bench_fmt(b1, sizeof b1, a[1].stat.median), bench_fmt(b2, sizeof b2, a[0].stat.median));

        mb_cache_destroy(c64);
        for (unsigned k = 0; k < NSIZES; k++)
                mb_cache_destroy(caches[k]);
        mb_close(c);
        return bench_finish();
}
