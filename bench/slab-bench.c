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
 *     share them.  The live objects are made once (in the calibration, which
 *     warms up) and kept from one sample to the next, so that a sample times
 *     replacements only, not the filling and emptying of the set.
 *     "Shared": the two threads replace objects of one set of 8,192 slots,
 *     so half the frees are of objects the other thread allocated (a
 *     request made on one thread and retired on another).
 * Peers: tcmalloc, jemalloc and mimalloc, each preloaded (LD_PRELOAD) into
 * a bench-malloc child running the same pattern (9a, and 9b with own
 * objects).
 * Figures: ns per alloc+free pair per thread; ratios to glibc.
 */
#include <errno.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "macros.h"
#include "membroker.h"

#define NSIZES 6
#define LIVE_OBJECTS 4096
#define MAX_THREADS 2
#define MIXED_SAMPLE_MIN_NSEC (200ULL * 1000000ULL) /* steady state: see main() */
#define CLASS_MASK ((uintptr_t) 7) /* a shared slot keeps the size class in the low bits */

static const size_t mixed_sizes[NSIZES] = { 16, 32, 64, 128, 256, 512 };

static struct bench_opts opts;

enum kind {
        K_CACHE,
        K_CACHE64,
        K_MALLOC,
        K_MALLOC64,
        K_MIXED_CACHE,
        K_MIXED_MALLOC,
        K_SHARED_CACHE,
        K_SHARED_MALLOC,
        K_PEER,          /* bench-malloc with a peer preloaded (mode, size) */
};

struct ctx {
        enum kind kind;
        unsigned threads;
        mb_cache *c64;
        mb_cache *caches[NSIZES];
        _Atomic int failed;
        /* 9b: the live objects, kept across samples */
        void *obj[MAX_THREADS][LIVE_OBJECTS];
        unsigned char cls[MAX_THREADS][LIVE_OBJECTS];
        bool filled[MAX_THREADS];
        _Atomic uintptr_t shared[MAX_THREADS * LIVE_OBJECTS];
        _Atomic bool shared_filled;
        /* K_PEER */
        const struct bench_peer *peer;
        const char *mode;
};

static char peer_prog[4096];

static inline uint64_t xorshift(uint64_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

static inline void *obj_alloc(struct ctx *x, bool cache, unsigned k) {
        return cache ? mb_cache_alloc(x->caches[k]) : malloc(mixed_sizes[k]);
}

static inline void obj_free(struct ctx *x, bool cache, unsigned k, void *p) {
        if (cache)
                mb_cache_free(x->caches[k], p);
        else
                free(p);
}

static void mixed(struct ctx *x, unsigned tid, uint64_t iters) {
        void **obj = x->obj[tid];
        unsigned char *cls = x->cls[tid];
        uint64_t rng = 0x1234567ULL + tid * 0x9e3779b97f4a7c15ULL + iters;
        bool cache = x->kind == K_MIXED_CACHE;

        if (!x->filled[tid]) {
                for (unsigned i = 0; i < LIVE_OBJECTS; i++) {
                        unsigned k = (unsigned) (xorshift(&rng) % NSIZES);

                        obj[i] = obj_alloc(x, cache, k);
                        cls[i] = (unsigned char) k;
                        if (!obj[i]) {
                                x->failed = 1;
                                return;
                        }
                }
                x->filled[tid] = true;
        }
        for (uint64_t n = 0; n < iters; n++) {
                uint64_t r = xorshift(&rng);
                unsigned i = (unsigned) (r % LIVE_OBJECTS), k = (unsigned) ((r >> 32) % NSIZES);

                obj_free(x, cache, cls[i], obj[i]);
                obj[i] = obj_alloc(x, cache, k);
                if (!obj[i]) {
                        x->failed = 1;
                        return;
                }
                *(volatile char *) obj[i] = 1;
                cls[i] = (unsigned char) k;
        }
}

/* Both threads replace objects of one set: a slot is taken with an atomic
 * exchange, so an object is freed by whichever thread meets it. */
static void shared(struct ctx *x, unsigned tid, uint64_t iters) {
        const unsigned nslots = MAX_THREADS * LIVE_OBJECTS;
        uint64_t rng = 0x7654321ULL + tid * 0x9e3779b97f4a7c15ULL + iters;
        bool cache = x->kind == K_SHARED_CACHE;

        if (!atomic_load(&x->shared_filled)) {
                /* Thread 0 fills the set while thread 1 waits. */
                if (tid == 0) {
                        for (unsigned i = 0; i < nslots; i++) {
                                unsigned k = (unsigned) (xorshift(&rng) % NSIZES);
                                void *p = obj_alloc(x, cache, k);

                                if (!p) {
                                        x->failed = 1;
                                        break;
                                }
                                if ((uintptr_t) p & CLASS_MASK) { /* needs 8-byte alignment */
                                        x->failed = 1;
                                        break;
                                }
                                atomic_store(&x->shared[i], (uintptr_t) p | k);
                        }
                        atomic_store(&x->shared_filled, true);
                } else {
                        while (!atomic_load(&x->shared_filled) && !x->failed)
                                ;
                }
        }
        for (uint64_t n = 0; n < iters && !x->failed; n++) {
                uint64_t r = xorshift(&rng);
                unsigned i = (unsigned) (r % nslots), k = (unsigned) ((r >> 32) % NSIZES);
                uintptr_t old = atomic_exchange(&x->shared[i], 0);
                void *p;

                if (old)
                        obj_free(x, cache, (unsigned) (old & CLASS_MASK), (void *) (old & ~CLASS_MASK));
                p = obj_alloc(x, cache, k);
                if (!p) {
                        x->failed = 1;
                        return;
                }
                *(volatile char *) p = 1;
                old = atomic_exchange(&x->shared[i], (uintptr_t) p | k);
                if (old) /* the other thread refilled the slot meanwhile */
                        obj_free(x, cache, (unsigned) (old & CLASS_MASK), (void *) (old & ~CLASS_MASK));
        }
}

/* Free what 9b kept alive. */
static void live_free(struct ctx *x) {
        bool cache = x->kind == K_MIXED_CACHE || x->kind == K_SHARED_CACHE;

        for (unsigned t = 0; t < MAX_THREADS; t++) {
                if (!x->filled[t])
                        continue;
                for (unsigned i = 0; i < LIVE_OBJECTS; i++)
                        obj_free(x, cache, x->cls[t][i], x->obj[t][i]);
                x->filled[t] = false;
        }
        for (unsigned i = 0; i < MAX_THREADS * LIVE_OBJECTS; i++) {
                uintptr_t old = atomic_exchange(&x->shared[i], 0);

                if (old)
                        obj_free(x, cache, (unsigned) (old & CLASS_MASK), (void *) (old & ~CLASS_MASK));
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
        case K_SHARED_CACHE:
        case K_SHARED_MALLOC:
                shared(x, tid, iters);
                break;
        case K_PEER:
                abort();
        }
}

/* One sample of a peer allocator: bench-malloc in a child, the peer
 * preloaded. */
static double run_peer(struct ctx *x, uint64_t iters) {
        char out[128], it[32], th[16];
        char *argv[] = { peer_prog, (char *) "--mode", (char *) x->mode, (char *) "--threads", th,
                         (char *) "--iters", it, (char *) "--size", (char *) "64",
                         (char *) "--expect", (char *) x->peer->symbol, NULL };

        snprintf(it, sizeof it, "%llu", (unsigned long long) iters);
        snprintf(th, sizeof th, "%u", x->threads);
        if (bench_spawn_preload(x->peer->soname, argv, out, sizeof out) < 0) {
                fprintf(stderr, "bench-slab: %s (%s) did not run: is it installed?\n", x->peer->name,
                        x->peer->soname);
                return -1;
        }
        return strtod(out, NULL);
}

static double run(void *arg, uint64_t iters) {
        struct ctx *x = arg;
        double ns;

        iters = (iters + 63) / 64 * 64;
        if (x->kind == K_PEER)
                return run_peer(x, iters);
        ns = bench_threads(x->threads, worker, x, iters, true);
        if (x->failed) {
                fprintf(stderr, "bench-slab: allocation failed: %s\n", mb_last_error());
                return -1;
        }
        return ns / (double) iters;
}

int main(int argc, char **argv) {
        static struct ctx ctx[10], pctx[3 * BENCH_NPEERS + BENCH_NPEERS];
        struct bench_case a[4 + 2 * BENCH_NPEERS], b[6 + 2 * BENCH_NPEERS];
        char pnames[4 * BENCH_NPEERS][96];
        const char *dir = getenv("MB_BENCH_DIR");
        bool have_peers;
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
        ctx[8] = (struct ctx) { .kind = K_SHARED_MALLOC, .threads = 2 };
        ctx[9] = (struct ctx) { .kind = K_SHARED_CACHE, .threads = 2 };
        memcpy(ctx[9].caches, caches, sizeof caches);
        b[4] = (struct bench_case) { .name = "2 threads, shared objects: glibc malloc/free", .run = run,
                                     .ctx = &ctx[8], .min_iters = 1024 };
        b[5] = (struct bench_case) { .name = "2 threads, shared objects: mb_cache", .run = run, .ctx = &ctx[9],
                                     .min_iters = 1024 };
        snprintf(peer_prog, sizeof peer_prog, "%s/bench-malloc", dir ? dir : ".");
        have_peers = access(peer_prog, X_OK) == 0;
        for (unsigned p = 0; p < BENCH_NPEERS; p++) {
                const struct bench_peer *pe = &bench_peers[p];
                struct ctx *one = &pctx[4 * p], *many = &pctx[4 * p + 1];

                *one = (struct ctx) { .kind = K_PEER, .threads = 1, .peer = pe, .mode = "one" };
                *many = (struct ctx) { .kind = K_PEER, .threads = 1, .peer = pe, .mode = "64" };
                snprintf(pnames[4 * p], sizeof pnames[0], "%s malloc(64)+free (LD_PRELOAD)", pe->name);
                snprintf(pnames[4 * p + 1], sizeof pnames[0], "%s malloc(64) ×64 then free ×64 (LD_PRELOAD)",
                         pe->name);
                a[4 + 2 * p] = (struct bench_case) { .name = pnames[4 * p], .run = run, .ctx = one,
                                                     .min_iters = 1024, .ns_per_iter = true };
                a[5 + 2 * p] = (struct bench_case) { .name = pnames[4 * p + 1], .run = run, .ctx = many,
                                                     .min_iters = 1024, .ns_per_iter = true };
                for (unsigned t = 0; t < 2; t++) {
                        struct ctx *m = &pctx[4 * p + 2 + t];

                        *m = (struct ctx) { .kind = K_PEER, .threads = t + 1, .peer = pe, .mode = "mixed" };
                        snprintf(pnames[4 * p + 2 + t], sizeof pnames[0], "%u thread%s: %s malloc/free (LD_PRELOAD)",
                                 t + 1, t ? "s" : "", pe->name);
                        b[6 + 2 * p + t] = (struct bench_case) { .name = pnames[4 * p + 2 + t], .run = run,
                                                                 .ctx = m, .min_iters = 1024, .ns_per_iter = true };
                }
        }
        for (unsigned i = 4; i < 4 + 2 * BENCH_NPEERS; i++)
                if (!have_peers) {
                        a[i].skip = true;
                        a[i].skip_reason = "bench-malloc not built (sanitizer build)";
                }
        for (unsigned i = 6; i < 6 + 2 * BENCH_NPEERS; i++)
                if (!have_peers) {
                        b[i].skip = true;
                        b[i].skip_reason = "bench-malloc not built (sanitizer build)";
                }
        bench_run(a, 4 + 2 * BENCH_NPEERS, &opts);
        /* 9b samples last at least 200 ms: each sample starts new threads,
         * and in 20 ms glibc's fresh per-thread caches and its arena
         * trimming (faults on regrowth) weigh several times the
         * replacements themselves, which is not what 9b asks. */
        struct bench_opts ob = opts;
        if (!ob.quick && ob.sample_ns < MIXED_SAMPLE_MIN_NSEC)
                ob.sample_ns = MIXED_SAMPLE_MIN_NSEC;
        bench_run(b, 6 + 2 * BENCH_NPEERS, &ob);
        for (unsigned i = 4; i < 10; i++)
                live_free(&ctx[i]);

        bench_table_begin("Table 9: slab caches",
                          "9a: 64-byte objects, one thread, ns per alloc+free pair (objects not touched).");
        bench_table_columns("allocator", "ns/pair (median)", "min–max", "ratio to glibc, same pattern", NULL);
        bench_table_row(&a[0], &a[0]);
        bench_table_row(&a[1], &a[0]);
        bench_table_row(&a[2], &a[2]);
        bench_table_row(&a[3], &a[2]);
        for (unsigned p = 0; p < BENCH_NPEERS; p++) {
                bench_table_row(&a[4 + 2 * p], &a[0]);
                bench_table_row(&a[5 + 2 * p], &a[2]);
        }
        putchar('\n');
        bench_table_begin("Table 9b: mixed sizes",
                          "Each thread keeps 4,096 live objects of 16–512 bytes and replaces a random one per "
                          "operation (free + allocate a random size, first byte written); caches shared by "
                          "the threads. The live set is made once, before the samples, which time "
                          "replacements only, for at least 200 ms each. Shared objects: both threads replace objects of one set of "
                          "8,192, so half the frees are of the other thread's objects. CPU ns per replacement "
                          "per thread.");
        bench_table_columns("threads: allocator", "ns/op (median)", "min–max", "ratio to glibc, same threads",
                            NULL);
        bench_table_row(&b[0], &b[0]);
        bench_table_row(&b[1], &b[0]);
        bench_table_row(&b[2], &b[2]);
        bench_table_row(&b[3], &b[2]);
        bench_table_row(&b[4], &b[4]);
        bench_table_row(&b[5], &b[4]);
        for (unsigned p = 0; p < BENCH_NPEERS; p++)
                for (unsigned t = 0; t < 2; t++)
                        bench_table_row(&b[6 + 2 * p + t], &b[2 * t]);
        putchar('\n');
        bench_note("Peers: each allocator preloaded (LD_PRELOAD) into a child process of its own running the "
                   "same pattern (own objects only); ratios in the tables are to glibc.");
        bench_note_round_trip();
        /* The targets of the slab issue ("much faster" read as at most
         * half the time). */
        if (!a[0].skip && !a[1].skip)
                bench_target(a[1].stat.median <= 2 * a[0].stat.median, "64-byte alloc+free within 2× of glibc",
                             "%s: %s vs %s ns",
                             bench_fmt_ratio(b0, sizeof b0, a[1].stat.median / a[0].stat.median),
                             bench_fmt(b1, sizeof b1, a[1].stat.median), bench_fmt(b2, sizeof b2, a[0].stat.median));
        for (unsigned i = 2; i < 6; i += 2)
                if (!b[i].skip && !b[i + 1].skip)
                        bench_target(b[i + 1].stat.median <= 0.5 * b[i].stat.median,
                                     i == 2 ? "mixed sizes, 2 threads, own objects: ≤ 0.5× glibc"
                                            : "mixed sizes, 2 threads, shared objects: ≤ 0.5× glibc",
                                     "%s: %s vs %s ns",
                                     bench_fmt_ratio(b0, sizeof b0, b[i + 1].stat.median / b[i].stat.median),
                                     bench_fmt(b1, sizeof b1, b[i + 1].stat.median),
                                     bench_fmt(b2, sizeof b2, b[i].stat.median));

        {
                const struct bench_case *fast = NULL, *je = NULL;

                for (unsigned p = 0; p < BENCH_NPEERS; p++) {
                        const struct bench_case *pc = &a[4 + 2 * p];

                        if (!pc->skip && (!fast || pc->stat.median < fast->stat.median))
                                fast = pc;
                        if (strcmp(bench_peers[p].name, "jemalloc") == 0 && !b[6 + 2 * p + 1].skip)
                                je = &b[6 + 2 * p + 1];
                        if (!pc->skip && !a[1].skip)
                                bench_note("64 B: mb_cache takes %s the time of %s.",
                                           bench_fmt_ratio(b0, sizeof b0, a[1].stat.median / pc->stat.median),
                                           bench_peers[p].name);
                }
                if (fast && !a[1].skip)
                        bench_target(a[1].stat.median <= fast->stat.median,
                                     "64 B alloc+free ≤ 1.0× the fastest of tcmalloc, jemalloc, mimalloc",
                                     "%s: %s vs %s ns (%s)",
                                     bench_fmt_ratio(b0, sizeof b0, a[1].stat.median / fast->stat.median),
                                     bench_fmt(b1, sizeof b1, a[1].stat.median),
                                     bench_fmt(b2, sizeof b2, fast->stat.median), fast->name);
                if (je && !b[3].skip)
                        bench_target(b[3].stat.median <= je->stat.median,
                                     "mixed sizes, 2 threads, own objects: ≤ 1.0× jemalloc", "%s: %s vs %s ns",
                                     bench_fmt_ratio(b0, sizeof b0, b[3].stat.median / je->stat.median),
                                     bench_fmt(b1, sizeof b1, b[3].stat.median),
                                     bench_fmt(b2, sizeof b2, je->stat.median));
        }

        mb_cache_destroy(c64);
        for (unsigned k = 0; k < NSIZES; k++)
                mb_cache_destroy(caches[k]);
        mb_close(c);
        return bench_finish();
}
