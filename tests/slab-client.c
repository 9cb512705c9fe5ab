/* SPDX-License-Identifier: MIT */
/*
 * slab-client.c - a real client of a real membrokerd that exercises the slab
 * caches of libmembroker, for the test-slab-*.sh integration tests.
 *
 *   slab-client SOCKET TENANT COMMAND [ARGS]
 *
 * Commands (each prints "ok ..." lines and exits 0 on success, 1 on a
 * failed check, 2 on a usage or setup error):
 *   stress THREADS OPS   threads allocate/free objects of 16 sizes (8..2048)
 *                        in random order with checksummed contents; then
 *                        live objects must not overlap, contents must be
 *                        intact, slab stats exact; everything freed from
 *                        the main thread (remote frees) returns to zero
 *   stats                slab_reclaimable/slab_unreclaimable in the stats
 *                        region equal the live object bytes after drain
 *   shrink               mb_cache_shrink() gives the empty slabs back: the
 *                        client's `pages` go down by as much
 *   debug-double-free | debug-wrong-cache | debug-not-object | debug-redzone |
 *   debug-use-after-free
 *                        commit the error on a debug cache (the address the
 *                        report must name is printed as "reported=ADDR"),
 *                        then check the process
 *                        goes on with an intact cache
 *   destroy-live         destroy a cache with live objects, print "live=N"
 *   hold                 keep objects live in a reclaimable and an
 *                        unreclaimable cache, print the slab_* figures the
 *                        tenant must show, wait until stdin closes
 *   serve                a scriptable client for the reclaim tests: reads
 *                        one command a line on stdin, answers one line on
 *                        stdout (see "serve" below)
 *
 * Every command prints "debug=0|1": whether its caches run in debug mode
 * (MEMBROKER_SLAB_DEBUG=1 turns it on everywhere).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "core/mb_internal.h"
#include "membroker.h"

#define CHECK(cond, ...)                                                  \
        do {                                                              \
                if (!(cond)) {                                            \
                        fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
                        fprintf(stderr, __VA_ARGS__);                     \
                        fputc('\n', stderr);                              \
                        exit(1);                                          \
                }                                                         \
        } while (0)

static mb_client *client;

static const size_t sizes[] = { 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048 };
#define NSIZES ELEMENTSOF(sizes)

/* Sum of @item over the CPU slots this client wrote. */
static int64_t region_stat(enum mb_stat_item item) {
        const struct mb_stats_region *r = mb_client_stats_region(client);
        int64_t sum = 0;

        for (uint32_t i = 0; i < r->nslots; i++)
                sum += __atomic_load_n(&r->slot[i].v[item], __ATOMIC_RELAXED);
        return sum;
}

static void print_debug_flag(mb_cache *s) {
        struct mb_cache_stats st;

        CHECK(mb_cache_stats(s, &st) == 0, "mb_cache_stats");
        printf("debug=%d\n", !!(st.flags & MB_CACHE_DEBUG));
}

/* Expected slab_* figures from the caches' own counts, checked against the
 * region after mb_slab_drain(). */
static void check_stats_exact(mb_cache **caches, size_t n, uint64_t want_recl, uint64_t want_unrecl) {
        uint64_t recl = 0, unrecl = 0;
        struct mb_slab_stats ss;

        for (size_t i = 0; i < n; i++) {
                struct mb_cache_stats st;

                CHECK(mb_cache_stats(caches[i], &st) == 0, "mb_cache_stats");
                if (st.flags & MB_CACHE_RECLAIMABLE)
                        recl += st.live_objects * st.object_bytes;
                else
                        unrecl += st.live_objects * st.object_bytes;
        }
        CHECK(recl == want_recl, "caches count %" PRIu64 " reclaimable bytes, the test %" PRIu64, recl, want_recl);
        CHECK(unrecl == want_unrecl, "caches count %" PRIu64 " unreclaimable bytes, the test %" PRIu64, unrecl,
              want_unrecl);

        mb_slab_drain(client);
        CHECK(region_stat(MB_STAT_SLAB_RECLAIMABLE) == (int64_t) recl, "region slab_reclaimable %" PRId64
              " != %" PRIu64, region_stat(MB_STAT_SLAB_RECLAIMABLE), recl);
        CHECK(region_stat(MB_STAT_SLAB_UNRECLAIMABLE) == (int64_t) unrecl, "region slab_unreclaimable %" PRId64
              " != %" PRIu64, region_stat(MB_STAT_SLAB_UNRECLAIMABLE), unrecl);
        CHECK(mb_slab_stats(client, &ss) == 0, "mb_slab_stats");
        CHECK((ss.charged_pages - ss.uncharged_pages) * mb_page_size(client) == recl + unrecl + ss.stock_bytes,
              "byte stock: charged %" PRIu64 " - uncharged %" PRIu64 " pages vs %" PRIu64 " live + %" PRIu64
              " stocked bytes", ss.charged_pages, ss.uncharged_pages, recl + unrecl, ss.stock_bytes);
        printf("ok stats exact: slab_reclaimable=%" PRIu64 " slab_unreclaimable=%" PRIu64 " charged_pages=%" PRIu64
               " uncharged_pages=%" PRIu64 " stock_bytes=%" PRIu64 "\n",
               recl, unrecl, ss.charged_pages, ss.uncharged_pages, ss.stock_bytes);
}

/* ---- stress ---- */

struct live {
        uint64_t *obj; /* NULL when the slot is empty */
        uint32_t cache;
        uint64_t tag;
};

struct worker {
        mb_cache **caches;
        unsigned id;
        unsigned long ops;
        size_t nslots;
        struct live *slots;
        unsigned long allocs, frees;
        bool failed;
};

static uint64_t fill(uint64_t *w, size_t size, uint64_t tag) {
        for (size_t i = 0; i < size / 8; i++)
                w[i] = (tag + i) * UINT64_C(0x9e3779b97f4a7c15);
        return tag;
}

static bool intact(const uint64_t *w, size_t size, uint64_t tag) {
        for (size_t i = 0; i < size / 8; i++)
                if (w[i] != (tag + i) * UINT64_C(0x9e3779b97f4a7c15))
                        return false;
        return true;
}

static void *worker_run(void *arg) {
        struct worker *w = arg;
        unsigned seed = w->id * 2654435761u + 17;

        for (unsigned long op = 0; op < w->ops; op++) {
                struct live *l = &w->slots[(size_t) rand_r(&seed) % w->nslots];

                if (l->obj) {
                        if (!intact(l->obj, sizes[l->cache], l->tag)) {
                                fprintf(stderr, "thread %u: object %p of %zu bytes corrupted\n", w->id,
                                        (void *) l->obj, sizes[l->cache]);
                                w->failed = true;
                        }
                        mb_cache_free(w->caches[l->cache], l->obj);
                        l->obj = NULL;
                        w->frees++;
                } else {
                        l->cache = (uint32_t) ((unsigned) rand_r(&seed) % NSIZES);
                        l->obj = mb_cache_alloc(w->caches[l->cache]);
                        if (!l->obj) {
                                fprintf(stderr, "thread %u: mb_cache_alloc: %s\n", w->id, mb_last_error());
                                w->failed = true;
                                return NULL;
                        }
                        l->tag = fill(l->obj, sizes[l->cache], ((uint64_t) w->id << 48) ^ op);
                        w->allocs++;
                }
        }
        return NULL;
}

struct span {
        uintptr_t start;
        size_t len;
};

static int span_cmp(const void *a, const void *b) {
        const struct span *x = a, *y = b;

        return x->start < y->start ? -1 : x->start > y->start;
}

/* While the workers run: drain CPU lists, shrink and read stats from
 * another thread, so that the per-CPU locks are taken remotely while their
 * owners take them on the fast path. */
struct drainer {
        mb_cache **caches;
        bool stop;
        unsigned long rounds;
};

static void *drainer_run(void *arg) {
        struct drainer *d = arg;
        unsigned seed = 99;

        while (!__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE)) {
                mb_cache *s = d->caches[(size_t) rand_r(&seed) % NSIZES];
                struct mb_cache_stats st;
                struct mb_slab_stats ss;

                if (rand_r(&seed) % 2)
                        mb_cache_shrink(s);
                else
                        CHECK(mb_cache_stats(s, &st) == 0 && mb_slab_stats(client, &ss) == 0, "stats");
                d->rounds++;
        }
        return NULL;
}

static int cmd_stress(unsigned nthreads, unsigned long ops) {
        mb_cache *caches[NSIZES];
        struct worker *w = calloc(nthreads, sizeof(*w));
        pthread_t *t = calloc(nthreads, sizeof(*t));
        struct span *spans;
        size_t nspans = 0, nslots = 2048;
        uint64_t recl = 0, unrecl = 0, total_ops = 0;
        struct drainer drainer = { .caches = caches };
        pthread_t drainer_thread;

        CHECK(w && t, "out of memory");
        for (size_t i = 0; i < NSIZES; i++) {
                char name[32];

                snprintf(name, sizeof(name), "stress-%zu", sizes[i]);
                caches[i] = mb_cache_create(client, name, sizes[i], 0, i % 2 ? MB_CACHE_RECLAIMABLE : 0, NULL);
                CHECK(caches[i], "mb_cache_create(%zu): %s", sizes[i], mb_last_error());
        }
        print_debug_flag(caches[0]);

        CHECK(pthread_create(&drainer_thread, NULL, drainer_run, &drainer) == 0, "pthread_create");
        for (unsigned i = 0; i < nthreads; i++) {
                w[i] = (struct worker) { .caches = caches, .id = i, .ops = ops, .nslots = nslots };
                w[i].slots = calloc(nslots, sizeof(struct live));
                CHECK(w[i].slots, "out of memory");
                CHECK(pthread_create(&t[i], NULL, worker_run, &w[i]) == 0, "pthread_create");
        }
        for (unsigned i = 0; i < nthreads; i++) {
                CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
                CHECK(!w[i].failed, "thread %u failed", i);
                total_ops += w[i].allocs + w[i].frees;
        }
        __atomic_store_n(&drainer.stop, true, __ATOMIC_RELEASE);
        CHECK(pthread_join(drainer_thread, NULL) == 0, "pthread_join");
        printf("ok %u threads, %" PRIu64 " operations, contents intact; %lu concurrent shrinks and stats reads\n",
               nthreads, total_ops, drainer.rounds);

        /* No two live objects overlap, and all are inside the arena. */
        spans = calloc((size_t) nthreads * nslots, sizeof(*spans));
        CHECK(spans, "out of memory");
        for (unsigned i = 0; i < nthreads; i++)
                for (size_t k = 0; k < nslots; k++) {
                        struct live *l = &w[i].slots[k];

                        if (!l->obj)
                                continue;
                        /* (The arena is mapped page-aligned.) */
                        CHECK(mb_page_to_handle(client, (void *) ((uintptr_t) l->obj & ~(mb_page_size(client) - 1)))
                              != MB_HANDLE_INVALID, "%p is not in the arena", (void *) l->obj);
                        CHECK(intact(l->obj, sizes[l->cache], l->tag), "object %p corrupted", (void *) l->obj);
                        spans[nspans++] = (struct span) { (uintptr_t) l->obj, sizes[l->cache] };
                }
        qsort(spans, nspans, sizeof(*spans), span_cmp);
        for (size_t i = 1; i < nspans; i++)
                CHECK(spans[i - 1].start + spans[i - 1].len <= spans[i].start, "objects %#" PRIxPTR "+%zu and %#"
                      PRIxPTR " overlap", spans[i - 1].start, spans[i - 1].len, spans[i].start);
        printf("ok %zu live objects, no overlap\n", nspans);
        free(spans);

        /* The test's own tally of live bytes, in the caches' object_bytes. */
        for (unsigned i = 0; i < nthreads; i++)
                for (size_t k = 0; k < nslots; k++) {
                        struct live *l = &w[i].slots[k];
                        struct mb_cache_stats st;

                        if (!l->obj)
                                continue;
                        CHECK(mb_cache_stats(caches[l->cache], &st) == 0, "mb_cache_stats");
                        if (l->cache % 2)
                                recl += st.object_bytes;
                        else
                                unrecl += st.object_bytes;
                }
        check_stats_exact(caches, NSIZES, recl, unrecl);

        /* Free everything from this thread: remote frees for the others. */
        for (unsigned i = 0; i < nthreads; i++) {
                for (size_t k = 0; k < nslots; k++)
                        if (w[i].slots[k].obj)
                                mb_cache_free(caches[w[i].slots[k].cache], w[i].slots[k].obj);
                free(w[i].slots);
        }
        check_stats_exact(caches, NSIZES, 0, 0);
        for (size_t i = 0; i < NSIZES; i++) {
                struct mb_cache_stats st;

                mb_cache_shrink(caches[i]);
                CHECK(mb_cache_stats(caches[i], &st) == 0, "mb_cache_stats");
                CHECK(st.slabs == 0 && st.live_objects == 0, "cache %s keeps %" PRIu64 " slabs", st.name, st.slabs);
                CHECK(st.errors == 0, "cache %s reported %" PRIu64 " errors", st.name, st.errors);
                CHECK(mb_cache_destroy(caches[i]) == 0, "live objects at destroy");
        }
        CHECK(region_stat(MB_STAT_PAGES) == 0, "%" PRId64 " pages still in use", region_stat(MB_STAT_PAGES));
        CHECK(region_stat(MB_STAT_SLAB_RECLAIMABLE) == 0 && region_stat(MB_STAT_SLAB_UNRECLAIMABLE) == 0,
              "slab stat not back to zero");
        printf("ok all objects freed, all slab pages returned, slab stats zero\n");
        free(w);
        free(t);
        return 0;
}

/* ---- stats ---- */

static int cmd_stats(void) {
        mb_cache *caches[2];
        enum { N = 5000 };
        void **a = calloc(N, sizeof(void *)), **b = calloc(N, sizeof(void *));
        struct mb_cache_stats sa, sb;
        unsigned seed = 42;
        size_t na = 0, nb = 0;

        CHECK(a && b, "out of memory");
        caches[0] = mb_cache_create(client, "dentry", 192, 0, MB_CACHE_RECLAIMABLE, NULL);
        caches[1] = mb_cache_create(client, "kmalloc-40", 40, 0, 0, NULL);
        CHECK(caches[0] && caches[1], "mb_cache_create: %s", mb_last_error());
        print_debug_flag(caches[0]);
        CHECK(mb_cache_stats(caches[0], &sa) == 0 && mb_cache_stats(caches[1], &sb) == 0, "stats");

        for (size_t i = 0; i < N; i++) {
                a[i] = mb_cache_alloc(caches[0]);
                b[i] = mb_cache_alloc(caches[1]);
                CHECK(a[i] && b[i], "mb_cache_alloc: %s", mb_last_error());
        }
        for (size_t i = 0; i < N; i++) {
                if (rand_r(&seed) % 3 == 0) {
                        mb_cache_free(caches[0], a[i]);
                        a[i] = NULL;
                } else
                        na++;
                if (rand_r(&seed) % 2 == 0) {
                        mb_cache_free(caches[1], b[i]);
                        b[i] = NULL;
                } else
                        nb++;
        }
        check_stats_exact(caches, 2, na * sa.object_bytes, nb * sb.object_bytes);
        printf("ok %zu reclaimable objects of %zu bytes, %zu unreclaimable of %zu bytes\n", na, sa.object_bytes,
               nb, sb.object_bytes);
        for (size_t i = 0; i < N; i++) {
                mb_cache_free(caches[0], a[i]);
                mb_cache_free(caches[1], b[i]);
        }
        check_stats_exact(caches, 2, 0, 0);
        CHECK(mb_cache_destroy(caches[0]) == 0 && mb_cache_destroy(caches[1]) == 0, "live objects");
        free(a);
        free(b);
        return 0;
}

/* ---- shrink ---- */

static int cmd_shrink(void) {
        mb_cache *s = mb_cache_create(client, "inode", 512, 0, MB_CACHE_RECLAIMABLE, NULL);
        struct mb_cache_stats st;
        enum { N = 8 * 100 };
        void **o = calloc(N, sizeof(void *));
        int64_t pages_full, pages_freed;
        size_t released;

        CHECK(s && o, "mb_cache_create: %s", mb_last_error());
        print_debug_flag(s);
        for (size_t i = 0; i < N; i++)
                CHECK(o[i] = mb_cache_alloc(s), "mb_cache_alloc: %s", mb_last_error());
        CHECK(mb_cache_stats(s, &st) == 0, "stats");
        pages_full = region_stat(MB_STAT_PAGES);
        CHECK(pages_full == (int64_t) st.slabs, "pages %" PRId64 " != slabs %" PRIu64, pages_full, st.slabs);
        printf("ok %zu objects in %" PRIu64 " slab pages\n", (size_t) N, st.slabs);

        for (size_t i = 0; i < N; i++)
                mb_cache_free(s, o[i]);
        pages_freed = region_stat(MB_STAT_PAGES);
        CHECK(pages_freed < pages_full, "freeing did not return any page past the threshold");
        CHECK(mb_cache_stats(s, &st) == 0, "stats");
        CHECK(st.slabs > 0, "no slab kept");
        released = mb_cache_shrink(s);
        CHECK(released == st.slabs, "mb_cache_shrink released %zu of %" PRIu64 " slabs", released, st.slabs);
        CHECK(region_stat(MB_STAT_PAGES) == pages_freed - (int64_t) released, "pages %" PRId64 ", expected %" PRId64,
              region_stat(MB_STAT_PAGES), pages_freed - (int64_t) released);
        CHECK(region_stat(MB_STAT_PAGES) == 0, "pages left: %" PRId64, region_stat(MB_STAT_PAGES));
        printf("ok pages in use: %" PRId64 " full, %" PRId64 " after free, 0 after mb_cache_shrink (%zu released)\n",
               pages_full, pages_freed, released);
        CHECK(mb_cache_destroy(s) == 0, "live objects");
        free(o);
        return 0;
}

/* ---- debug ---- */

static mb_cache *debug_cache(const char *name, size_t size) {
        mb_cache *s = mb_cache_create(client, name, size, 0, MB_CACHE_DEBUG, NULL);

        CHECK(s, "mb_cache_create: %s", mb_last_error());
        return s;
}

/* After the bad operation: the cache still hands out distinct, usable
 * objects and has nothing live left. */
static void check_cache_sane(mb_cache *s, size_t size) {
        void *o[64];

        for (size_t i = 0; i < ELEMENTSOF(o); i++) {
                CHECK(o[i] = mb_cache_alloc(s), "mb_cache_alloc: %s", mb_last_error());
                memset(o[i], (int) i, size);
        }
        for (size_t i = 0; i < ELEMENTSOF(o); i++)
                for (size_t k = 0; k < size; k++)
                        CHECK(((uint8_t *) o[i])[k] == (uint8_t) i, "object %p changed: two objects overlap", o[i]);
        for (size_t i = 0; i < ELEMENTSOF(o); i++)
                mb_cache_free(s, o[i]);
}

static int cmd_debug(const char *what) {
        mb_cache *s = debug_cache("victim", 100), *other = NULL;
        uint8_t *obj = mb_cache_alloc(s);
        struct mb_cache_stats st;
        size_t expect_errors = 1;

        CHECK(obj, "mb_cache_alloc: %s", mb_last_error());
        print_debug_flag(s);
        /* The address the report must name. */
        printf("reported=%p\n", strcmp(what, "not-object") == 0 ? (void *) (obj + 4) : (void *) obj);
        fflush(stdout);
        if (strcmp(what, "double-free") == 0) {
                mb_cache_free(s, obj);
                mb_cache_free(s, obj);
        } else if (strcmp(what, "wrong-cache") == 0) {
                other = debug_cache("bystander", 100);
                mb_cache_free(other, obj); /* ignored */
                mb_cache_free(s, obj);
                expect_errors = 0;
                CHECK(mb_cache_stats(other, &st) == 0 && st.errors == 1, "no error counted in the wrong cache");
        } else if (strcmp(what, "not-object") == 0) {
                mb_cache_free(s, obj + 4); /* ignored */
                mb_cache_free(s, obj);
        } else if (strcmp(what, "redzone") == 0) {
                obj[100] = 'x'; /* one byte past the end */
                mb_cache_free(s, obj);
        } else if (strcmp(what, "use-after-free") == 0) {
                mb_cache_free(s, obj);
                obj[7] = 'x';
                CHECK(mb_cache_alloc(s) == obj, "LIFO reuse expected");
                mb_cache_free(s, obj);
        } else {
                fprintf(stderr, "unknown debug case %s\n", what);
                return 2;
        }
        CHECK(mb_cache_stats(s, &st) == 0, "stats");
        CHECK(st.errors == expect_errors, "%" PRIu64 " errors counted, expected %zu", st.errors, expect_errors);
        CHECK(st.live_objects == 0, "%" PRIu64 " live objects", st.live_objects);
        check_cache_sane(s, 100);
        printf("ok %s reported and survived\n", what);
        CHECK(mb_cache_destroy(s) == 0, "live objects");
        if (other)
                CHECK(mb_cache_destroy(other) == 0, "live objects");
        return 0;
}

static int cmd_destroy_live(void) {
        mb_cache *s = mb_cache_create(client, "leaky", 64, 0, 0, NULL);
        void *o[20];
        size_t live;

        CHECK(s, "mb_cache_create: %s", mb_last_error());
        print_debug_flag(s);
        for (size_t i = 0; i < ELEMENTSOF(o); i++)
                CHECK(o[i] = mb_cache_alloc(s), "mb_cache_alloc: %s", mb_last_error());
        for (size_t i = 0; i < ELEMENTSOF(o); i += 2)
                mb_cache_free(s, o[i]);
        printf("first-live=%p\n", o[1]);
        fflush(stdout);
        live = mb_cache_destroy(s);
        printf("live=%zu\n", live);
        return 0;
}

/* Hold live objects in a reclaimable and an unreclaimable cache, write the
 * stats out, print the expected figures, and wait for stdin to close (the
 * test reads the tenant's stat meanwhile). */
static int cmd_hold(void) {
        mb_cache *caches[2];
        struct mb_cache_stats sa, sb;
        void *o[3000];
        int ch;

        caches[0] = mb_cache_create(client, "held-reclaimable", 200, 0, MB_CACHE_RECLAIMABLE, NULL);
        caches[1] = mb_cache_create(client, "held-unreclaimable", 72, 0, 0, NULL);
        CHECK(caches[0] && caches[1], "mb_cache_create: %s", mb_last_error());
        print_debug_flag(caches[0]);
        for (size_t i = 0; i < ELEMENTSOF(o); i++)
                CHECK(o[i] = mb_cache_alloc(caches[i % 3 == 0 ? 0 : 1]), "mb_cache_alloc: %s", mb_last_error());
        mb_slab_drain(client);
        CHECK(mb_cache_stats(caches[0], &sa) == 0 && mb_cache_stats(caches[1], &sb) == 0, "stats");
        printf("slab_reclaimable=%" PRIu64 " slab_unreclaimable=%" PRIu64 " slab=%" PRIu64 "\n",
               sa.live_objects * sa.object_bytes, sb.live_objects * sb.object_bytes,
               sa.live_objects * sa.object_bytes + sb.live_objects * sb.object_bytes);
        fflush(stdout);
        while ((ch = getchar()) != EOF)
                ;
        for (size_t i = 0; i < ELEMENTSOF(o); i++)
                mb_cache_free(caches[i % 3 == 0 ? 0 : 1], o[i]);
        CHECK(mb_cache_destroy(caches[0]) == 0 && mb_cache_destroy(caches[1]) == 0, "live objects");
        return 0;
}

/* ---- serve: a scriptable client for the reclaim tests ----
 *
 * Three families of caches: "r", four MB_CACHE_RECLAIMABLE caches of the
 * sizes in small_sizes[] (the library registers their slab shrinkers), "u",
 * four unreclaimable caches of the same sizes, and "b", one unreclaimable
 * cache of objects above half a page (one object per slab page, so N new
 * objects take N new pages).  Objects are spread round-robin over a
 * family's caches and filled with a checksummed pattern.  Commands (one a
 * line on stdin, one answer line on stdout):
 *
 *   fill r|u|b N  allocate N objects -> "fill ok N" | "fill ENOMEM K <reason>"
 *   free r|u|b N  free the N most recently allocated -> "free ok N"
 *   lru N         allocate N objects of the "r" caches onto an LRU that an
 *                 application shrinker frees oldest first (a dentry-like
 *                 cache: its objects are live, the shrinker frees them, and
 *                 the slabs they empty go back) -> "lru ok N" | "lru ENOMEM ..."
 *   pages N       allocate N whole pages, pattern-filled
 *                 -> "pages ok N" | "pages ENOMEM K <reason>"
 *   unpages N     free the N most recently allocated pages -> "unpages ok N"
 *   drain         mb_slab_drain(): the slab stat becomes exact -> "drain ok"
 *   report        -> "report KEY=VALUE ...":
 *                 r_live, u_live, b_live, lru
 *                                         live objects (lru: those on the LRU)
 *                 r_bytes, u_bytes        live object bytes (what the slab
 *                                         stat must show after a drain)
 *                 r_slabs, u_slabs, b_slabs
 *                                         slab pages the caches hold
 *                 r_pinned, u_pinned      distinct slab pages that hold a live
 *                                         object (what no shrinker can free)
 *                 r_empty, u_empty        empty slabs on the caches' lists
 *                 r_cpu, u_cpu            free objects on per-CPU lists
 *                 r_freed, u_freed        slabs given back since creation
 *                 app                     whole pages held
 *                 pages, stock            MB_STAT_PAGES / MB_STAT_STOCK of the
 *                                         stats region
 *                 slab_r, slab_u          slab bytes written to the region
 *                 lru_scans, lru_freed    application shrinker calls, objects
 *                 max, oom                events the callback received
 *                 verify                  ok | FAILED: every live object and
 *                                         page still holds its pattern
 *   quit          free everything, destroy the caches (none may report live
 *                 objects or errors) -> "bye verify=ok|FAILED"
 */
#define NFAMILY 4 /* caches of a family, at most */
static const size_t small_sizes[NFAMILY] = { 64, 192, 512, 1024 };
static const size_t big_sizes[] = { 3000 };

struct sobj {
        uint64_t *p;
        uint64_t tag;
        uint32_t cache;
};

struct family {
        char name;
        const size_t *sizes;
        size_t ncaches;
        mb_cache *caches[NFAMILY];
        struct sobj *v;
        size_t n, alloc;
        size_t next_cache;
};

static struct family fam_r = { .name = 'r', .sizes = small_sizes, .ncaches = ELEMENTSOF(small_sizes) },
                     fam_u = { .name = 'u', .sizes = small_sizes, .ncaches = ELEMENTSOF(small_sizes) },
                     fam_b = { .name = 'b', .sizes = big_sizes, .ncaches = ELEMENTSOF(big_sizes) };
static uint64_t serve_tag = 1;
static unsigned long verify_failures;

/* The LRU: objects of fam_r's caches, oldest first; lru_lock is taken by
 * the application shrinker (library thread), so nothing allocates broker
 * pages while holding it. */
static pthread_mutex_t lru_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sobj *lru;
static size_t lru_head, lru_n, lru_alloc;
static unsigned long lru_scans, lru_freed;
static struct mb_shrinker lru_shrinker;

static unsigned long ev_max, ev_oom;

struct wpage {
        uint64_t *p;
        uint64_t tag;
};
static struct wpage *wpages;
static size_t nwpages, wpages_alloc;


static int sobj_push(struct sobj **v, size_t *n, size_t *alloc, struct sobj o) {
        if (*n == *alloc) {
                size_t a = *alloc ? *alloc * 2 : 1024;
                struct sobj *nv = realloc(*v, a * sizeof(*nv));

                if (!nv)
                        return -ENOMEM;
                *v = nv;
                *alloc = a;
        }
        (*v)[(*n)++] = o;
        return 0;
}

static void check_obj(const struct family *f, const struct sobj *o) {
        if (!intact(o->p, f->sizes[o->cache], o->tag) && verify_failures++ == 0)
                fprintf(stderr, "slab-client: object %p of %zu bytes holds the wrong data\n", (void *) o->p,
                        f->sizes[o->cache]);
}

/* Allocate one object of @f (no lock held: may wait for the daemon). */
static int family_alloc(struct family *f, struct sobj *ret) {
        uint32_t k = (uint32_t) (f->next_cache++ % f->ncaches);
        uint64_t *p = mb_cache_alloc(f->caches[k]);

        if (!p)
                return -errno;
        *ret = (struct sobj) { .p = p, .cache = k, .tag = serve_tag++ << 20 };
        fill(p, f->sizes[k], ret->tag);
        return 0;
}

static void print_enomem(const char *what, size_t got) {
        printf("%s %s %zu %s\n", what, errno == ENOMEM ? "ENOMEM" : strerror(errno), got, mb_last_error());
}

static void serve_fill(struct family *f, size_t n) {
        for (size_t i = 0; i < n; i++) {
                struct sobj o;

                if (family_alloc(f, &o) < 0) {
                        print_enomem("fill", i);
                        return;
                }
                CHECK(sobj_push(&f->v, &f->n, &f->alloc, o) == 0, "out of memory");
        }
        printf("fill ok %zu\n", n);
}

static size_t family_free(struct family *f, size_t n) {
        size_t done = 0;

        for (; done < n && f->n > 0; done++) {
                struct sobj *o = &f->v[--f->n];

                check_obj(f, o);
                mb_cache_free(f->caches[o->cache], o->p);
        }
        return done;
}

static void serve_lru(size_t n) {
        for (size_t i = 0; i < n; i++) {
                struct sobj o;
                int r;

                if (family_alloc(&fam_r, &o) < 0) {
                        print_enomem("lru", i);
                        return;
                }
                pthread_mutex_lock(&lru_lock);
                if (lru_head > 0 && lru_head == lru_n) /* drained: start over */
                        lru_head = lru_n = 0;
                r = sobj_push(&lru, &lru_n, &lru_alloc, o);
                pthread_mutex_unlock(&lru_lock);
                CHECK(r == 0, "out of memory");
        }
        printf("lru ok %zu\n", n);
}

static size_t r_objects_per_slab[NFAMILY];

static size_t objects_per_slab(uint32_t cache) {
        return r_objects_per_slab[cache];
}

/* count_objects(): the pages the LRU's objects fill. */
static unsigned long lru_count(void *userdata) {
        unsigned long per[NFAMILY] = {}, pages = 0;

        (void) userdata;
        pthread_mutex_lock(&lru_lock);
        for (size_t i = lru_head; i < lru_n; i++)
                per[lru[i].cache]++;
        pthread_mutex_unlock(&lru_lock);
        for (uint32_t k = 0; k < NFAMILY; k++)
                pages += per[k] / objects_per_slab(k);
        return pages;
}

/* scan_objects(): free the oldest objects, @nr pages' worth; the slabs they
 * empty go back through the caches (past their empty_keep at once, the
 * others through the slab shrinkers). */
static unsigned long lru_scan(void *userdata, unsigned long nr) {
        unsigned long pages = 0;
        size_t per[NFAMILY] = {};

        (void) userdata;
        pthread_mutex_lock(&lru_lock);
        lru_scans++;
        while (lru_head < lru_n && pages < nr) {
                struct sobj *o = &lru[lru_head++];

                check_obj(&fam_r, o);
                mb_cache_free(fam_r.caches[o->cache], o->p);
                lru_freed++;
                if (++per[o->cache] == objects_per_slab(o->cache)) {
                        per[o->cache] = 0;
                        pages++;
                }
        }
        pthread_mutex_unlock(&lru_lock);
        return pages;
}

static void serve_pages(size_t n) {
        for (size_t i = 0; i < n; i++) {
                uint64_t *p = mb_page_alloc(client);

                if (!p) {
                        print_enomem("pages", i);
                        return;
                }
                if (nwpages == wpages_alloc) {
                        size_t a = wpages_alloc ? wpages_alloc * 2 : 256;
                        struct wpage *v = realloc(wpages, a * sizeof(*v));

                        CHECK(v, "out of memory");
                        wpages = v;
                        wpages_alloc = a;
                }
                wpages[nwpages] = (struct wpage) { .p = p, .tag = serve_tag++ << 20 };
                fill(p, mb_page_size(client), wpages[nwpages].tag);
                nwpages++;
        }
        printf("pages ok %zu\n", n);
}

static void serve_unpages(size_t n) {
        size_t done = 0;

        for (; done < n && nwpages > 0; done++) {
                struct wpage *w = &wpages[--nwpages];

                if (!intact(w->p, mb_page_size(client), w->tag) && verify_failures++ == 0)
                        fprintf(stderr, "slab-client: page %p holds the wrong data\n", (void *) w->p);
                CHECK(mb_page_free(client, w->p) == 0, "mb_page_free: %s", mb_last_error());
        }
        printf("unpages ok %zu\n", done);
}

static int uintptr_cmp(const void *a, const void *b) {
        uintptr_t x = *(const uintptr_t *) a, y = *(const uintptr_t *) b;

        return x < y ? -1 : x > y;
}

/* Distinct slab pages among @n objects (and @m more). */
static size_t distinct_pages(const struct sobj *v, size_t n, const struct sobj *w, size_t m) {
        uintptr_t *pg = calloc(n + m + 1, sizeof(*pg));
        uintptr_t mask = ~((uintptr_t) mb_page_size(client) - 1);
        size_t d = 0;

        CHECK(pg, "out of memory");
        for (size_t i = 0; i < n; i++)
                pg[i] = (uintptr_t) v[i].p & mask;
        for (size_t i = 0; i < m; i++)
                pg[n + i] = (uintptr_t) w[i].p & mask;
        qsort(pg, n + m, sizeof(*pg), uintptr_cmp);
        for (size_t i = 0; i < n + m; i++)
                if (i == 0 || pg[i] != pg[i - 1])
                        d++;
        free(pg);
        return d;
}

struct family_stats {
        uint64_t slabs, empty, cpu, freed, bytes;
};

static void family_stats(const struct family *f, struct family_stats *ret) {
        struct family_stats fs = {};

        for (uint32_t k = 0; k < f->ncaches; k++) {
                struct mb_cache_stats st;

                CHECK(mb_cache_stats(f->caches[k], &st) == 0, "mb_cache_stats");
                CHECK(st.errors == 0, "cache %s reported %" PRIu64 " errors", st.name, st.errors);
                fs.slabs += st.slabs;
                fs.empty += st.empty_slabs;
                fs.cpu += st.cpu_free_objects;
                fs.freed += st.slabs_freed;
                fs.bytes += st.live_objects * st.object_bytes;
        }
        *ret = fs;
}

static void serve_verify(void) {
        for (size_t i = 0; i < fam_r.n; i++)
                check_obj(&fam_r, &fam_r.v[i]);
        for (size_t i = 0; i < fam_u.n; i++)
                check_obj(&fam_u, &fam_u.v[i]);
        for (size_t i = 0; i < fam_b.n; i++)
                check_obj(&fam_b, &fam_b.v[i]);
        for (size_t i = lru_head; i < lru_n; i++)
                check_obj(&fam_r, &lru[i]);
        for (size_t i = 0; i < nwpages; i++)
                if (!intact(wpages[i].p, mb_page_size(client), wpages[i].tag) && verify_failures++ == 0)
                        fprintf(stderr, "slab-client: page %p holds the wrong data\n", (void *) wpages[i].p);
}

static void serve_report(void) {
        struct family_stats r, u, b;
        size_t r_pinned, nlru;

        pthread_mutex_lock(&lru_lock);
        serve_verify();
        nlru = lru_n - lru_head;
        r_pinned = distinct_pages(fam_r.v, fam_r.n, lru ? lru + lru_head : NULL, nlru);
        family_stats(&fam_r, &r);
        family_stats(&fam_u, &u);
        family_stats(&fam_b, &b);
        printf("report r_live=%zu u_live=%zu b_live=%zu b_slabs=%" PRIu64 " lru=%zu r_bytes=%" PRIu64 " u_bytes=%" PRIu64 " r_slabs=%" PRIu64
               " u_slabs=%" PRIu64 " r_pinned=%zu u_pinned=%zu r_empty=%" PRIu64 " u_empty=%" PRIu64
               " r_cpu=%" PRIu64 " u_cpu=%" PRIu64 " r_freed=%" PRIu64 " u_freed=%" PRIu64 " app=%zu pages=%" PRId64
               " stock=%" PRId64 " slab_r=%" PRId64 " slab_u=%" PRId64 " lru_scans=%lu lru_freed=%lu max=%lu oom=%lu"
               " verify=%s\n",
               fam_r.n, fam_u.n, fam_b.n, b.slabs, nlru, r.bytes, u.bytes, r.slabs, u.slabs, r_pinned,
               distinct_pages(fam_u.v, fam_u.n, NULL, 0), r.empty, u.empty, r.cpu, u.cpu, r.freed, u.freed,
               nwpages, region_stat(MB_STAT_PAGES), region_stat(MB_STAT_STOCK),
               region_stat(MB_STAT_SLAB_RECLAIMABLE), region_stat(MB_STAT_SLAB_UNRECLAIMABLE), lru_scans, lru_freed,
               __atomic_load_n(&ev_max, __ATOMIC_RELAXED), __atomic_load_n(&ev_oom, __ATOMIC_RELAXED),
               verify_failures ? "FAILED" : "ok");
        pthread_mutex_unlock(&lru_lock);
}

static void serve_event(mb_client *c, const char *event, uint64_t count, void *userdata) {
        (void) c;
        (void) count;
        (void) userdata;
        if (strcmp(event, "max") == 0)
                __atomic_fetch_add(&ev_max, 1, __ATOMIC_RELAXED);
        else if (strcmp(event, "oom") == 0)
                __atomic_fetch_add(&ev_oom, 1, __ATOMIC_RELAXED);
}

static void family_create(struct family *f, unsigned flags) {
        for (uint32_t k = 0; k < f->ncaches; k++) {
                char name[32];

                snprintf(name, sizeof(name), "%c-%zu", f->name, f->sizes[k]);
                f->caches[k] = mb_cache_create(client, name, f->sizes[k], 0, flags, NULL);
                CHECK(f->caches[k], "mb_cache_create(%s): %s", name, mb_last_error());
        }
}

static void family_destroy(struct family *f) {
        for (uint32_t k = 0; k < f->ncaches; k++) {
                struct mb_cache_stats st;

                CHECK(mb_cache_stats(f->caches[k], &st) == 0, "mb_cache_stats");
                CHECK(st.errors == 0, "cache %s reported %" PRIu64 " errors", st.name, st.errors);
                CHECK(mb_cache_destroy(f->caches[k]) == 0, "cache %s destroyed with live objects", st.name);
        }
        free(f->v);
}

static int cmd_serve(void) {
        char line[256];

        CHECK(mb_set_event_callback(client, serve_event, NULL) == 0, "mb_set_event_callback");
        family_create(&fam_r, MB_CACHE_RECLAIMABLE);
        family_create(&fam_u, 0);
        family_create(&fam_b, 0);
        for (uint32_t k = 0; k < NFAMILY; k++) {
                struct mb_cache_stats st;

                CHECK(mb_cache_stats(fam_r.caches[k], &st) == 0, "mb_cache_stats");
                r_objects_per_slab[k] = st.objects_per_slab;
        }
        lru_shrinker = (struct mb_shrinker) { .count = lru_count, .scan = lru_scan };
        CHECK(mb_register_shrinker(client, &lru_shrinker) == 0, "mb_register_shrinker: %s", mb_last_error());
        print_debug_flag(fam_r.caches[0]);
        printf("ready\n");
        fflush(stdout);

        while (fgets(line, sizeof(line), stdin)) {
                char cmd[16] = "", which[4] = "";
                unsigned long n = 0;
                struct family *f;

                if (sscanf(line, "%15s %3s %lu", cmd, which, &n) == 3 &&
                    (strcmp(cmd, "fill") == 0 || strcmp(cmd, "free") == 0) &&
                    (strcmp(which, "r") == 0 || strcmp(which, "u") == 0 || strcmp(which, "b") == 0)) {
                        f = which[0] == 'r' ? &fam_r : which[0] == 'u' ? &fam_u : &fam_b;
                        if (cmd[1] == 'i')
                                serve_fill(f, n);
                        else
                                printf("free ok %zu\n", family_free(f, n));
                } else if (sscanf(line, "lru %lu", &n) == 1)
                        serve_lru(n);
                else if (sscanf(line, "pages %lu", &n) == 1)
                        serve_pages(n);
                else if (sscanf(line, "unpages %lu", &n) == 1)
                        serve_unpages(n);
                else if (strcmp(line, "drain\n") == 0) {
                        mb_slab_drain(client);
                        printf("drain ok\n");
                } else if (strcmp(line, "report\n") == 0)
                        serve_report();
                else if (strcmp(line, "quit\n") == 0)
                        break;
                else
                        printf("error unknown command %s", line);
                fflush(stdout);
        }

        CHECK(mb_unregister_shrinker(client, &lru_shrinker) == 0, "mb_unregister_shrinker");
        serve_verify();
        while (lru_head < lru_n) {
                struct sobj *o = &lru[lru_head++];

                mb_cache_free(fam_r.caches[o->cache], o->p);
        }
        free(lru);
        (void) family_free(&fam_r, SIZE_MAX);
        (void) family_free(&fam_u, SIZE_MAX);
        (void) family_free(&fam_b, SIZE_MAX);
        family_destroy(&fam_r);
        family_destroy(&fam_u);
        family_destroy(&fam_b);
        for (size_t i = 0; i < nwpages; i++)
                CHECK(mb_page_free(client, wpages[i].p) == 0, "mb_page_free: %s", mb_last_error());
        free(wpages);
        printf("bye verify=%s\n", verify_failures ? "FAILED" : "ok");
        fflush(stdout);
        return verify_failures ? 1 : 0;
}

int main(int argc, char **argv) {
        const char *cmd;
        int r;

        if (argc < 4) {
                fprintf(stderr, "usage: %s SOCKET TENANT COMMAND [ARGS]\n", argv[0]);
                return 2;
        }
        cmd = argv[3];
        r = mb_connect(argv[1], argv[2], &client);
        if (r < 0) {
                fprintf(stderr, "mb_connect: %s (%s)\n", mb_last_error(), strerror(-r));
                return 2;
        }
        if (strcmp(cmd, "stress") == 0 && argc == 6)
                r = cmd_stress((unsigned) strtoul(argv[4], NULL, 10), strtoul(argv[5], NULL, 10));
        else if (strcmp(cmd, "stats") == 0)
                r = cmd_stats();
        else if (strcmp(cmd, "shrink") == 0)
                r = cmd_shrink();
        else if (strncmp(cmd, "debug-", 6) == 0)
                r = cmd_debug(cmd + 6);
        else if (strcmp(cmd, "hold") == 0)
                r = cmd_hold();
        else if (strcmp(cmd, "destroy-live") == 0)
                r = cmd_destroy_live();
        else if (strcmp(cmd, "serve") == 0)
                r = cmd_serve();
        else {
                fprintf(stderr, "unknown command %s\n", cmd);
                r = 2;
        }
        mb_close(client);
        return r;
}
