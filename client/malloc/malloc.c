/* SPDX-License-Identifier: MIT */
/*
 * malloc.c - general allocation on broker memory: mb_malloc() and friends,
 * shaped like the kernel's kmalloc() (mm/slab_common.c).
 *
 *   size <= page_size / 2   a size class on a slab cache of this client
 *                           (kmalloc-8 ... kmalloc-2k on 4 KiB pages: 8, 16,
 *                           32, 64, 96, 128, 192, 256, 512, 672, 1024, 1360,
 *                           2048), so the per-CPU lists of slab_cache.c are
 *                           the fast path; objects count in
 *                           `slab_unreclaimable`.
 *   3/4, 9/8, 5/4, 3/2 page objects on multi-page slabs that straddle page
 *                           boundaries (malloc_mid.c).
 *   size <= page_size       one page from this CPU's page stock.
 *   larger                  a run of contiguous pages charged as one extent
 *                           (Charge.contig_pages, as alloc_pages(order) takes
 *                           2^order pages at once), counted in `pages`.
 *                           Runs of up to KM_RUN_CACHE_MAX_PAGES pages are
 *                           kept on a small per-size free list when freed
 *                           (like the slabs of kmalloc-8k and up: at most
 *                           KM_RUN_CACHE_MAX_TOTAL_PAGES pages in all, still
 *                           charged; the bound rises to 4x the largest run
 *                           freed, up to KM_KEEP_MAX_PAGES, and to the most
 *                           run pages in use at once, up to
 *                           KM_KEEP_PEAK_MAX_PAGES; a longer kept run is cut
 *                           to size (best fit); and up to KM_BIG_KEEP_MAX
 *                           runs of up to KM_BIG_KEEP_MAX_PAGES are kept
 *                           too, merged with their kept neighbours, as
 *                           glibc's mmap threshold rises with the blocks
 *                           freed); larger ones go back to the daemon at
 *                           once, which hole-punches them (small runs
 *                           that find their list full wait until
 *                           KM_RUN_RETURN_PAGES pages can go back in one
 *                           Uncharge, as the page stock returns a batch).
 *                           A run that is not on its list is carved from
 *                           the rest of a chunk charged at once (one
 *                           contiguous charge of at least
 *                           KM_RUN_BATCH_PAGES pages, more as the heap
 *                           grows: 1/8 of what was charged so, at most
 *                           KM_RUN_BATCH_MAX_PAGES_ALL, as a slab of a high
 *                           order holds several objects), so a growing heap
 *                           does not make a round trip per run.  Each run
 *                           is returned on its own (the daemon owns pages,
 *                           not the extents it granted).
 *
 * mb_free() finds how a pointer was allocated from its page: one 32-bit
 * tag per arena page (an anonymous MAP_NORESERVE array: only the entries of
 * pages that were used cost memory), written when a slab cache takes a page
 * (slab_cache_set_page_tags()), when a page or a run is handed out.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/client.h"
#include "macros.h"
#include "mb_limits.h"
#include "malloc/kmalloc.h"
#include "stock/reclaim.h"
#include "session/session.h"
#include "slab/slab.h"
#include "stock/stock.h"

static pthread_mutex_t km_create_lock = PTHREAD_MUTEX_INITIALIZER;

static void km_free_ctx(struct kmalloc_ctx *k) {
        if (!k)
                return;
        if (k->shrinker_registered && !k->c->forked)
                (void) mb_unregister_shrinker(k->c, &k->shrinker);
        for (unsigned i = 0; i < k->nclasses; i++)
                if (k->cache[i])
                        (void) mb_cache_destroy(k->cache[i]);
        for (unsigned p = 0; p <= KM_RUN_CACHE_MAX_PAGES; p++) {
                if (!k->c->forked)
                        for (uint32_t i = 0; i < k->runs[p].n; i++)
                                (void) mb_page_free_contig(k->c, k->runs[p].runs[i], p);
                free(k->runs[p].runs);
        }
        km_mid_destroy(k);
        if (k->tags)
                munmap(k->tags, k->tags_bytes);
        pthread_mutex_destroy(&k->runs_lock);
        free(k);
}

void kmalloc_destroy(mb_client *c) {
        struct kmalloc_ctx *k = c->kmalloc;

        c->kmalloc = NULL;
        km_free_ctx(k);
}

static size_t km_runs_flush(struct kmalloc_ctx *k);

/* The run at page @idx of @n pages is no longer kept: its tag says so. */
static inline void km_unkeep_tags(struct kmalloc_ctx *k, uint64_t idx, uint32_t n) {
        k->tags[idx] = KM_TAG_RUN | n;
}

/* The shrinker: kept runs are charged memory nobody uses, the first to
 * go when the daemon asks for pages back (Reclaim). */
static unsigned long km_shrink_count(void *userdata) {
        struct kmalloc_ctx *k = userdata;

        return __atomic_load_n(&k->runs_pages, __ATOMIC_RELAXED) + __atomic_load_n(&k->ret_pages, __ATOMIC_RELAXED) +
               km_mid_empty_pages(k) +
               __atomic_load_n(&k->bump_left, __ATOMIC_RELAXED);
}

static unsigned long km_shrink_scan(void *userdata, unsigned long nr_to_scan) {
        (void) nr_to_scan;
        return km_mid_shrink(userdata) + km_runs_flush(userdata);
}

static int km_new_ctx(mb_client *c, struct kmalloc_ctx **ret) {
        struct kmalloc_ctx *k;
        size_t sizes[KM_MAX_CLASSES], n = 0;

        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        pthread_mutex_init(&k->runs_lock, NULL);
        k->c = c;
        k->base = c->base;
        k->npages = c->arena_pages;
        k->page_size = c->page_size;
        k->page_shift = c->page_shift;
        k->keep_max = KM_RUN_CACHE_MAX_TOTAL_PAGES;
        k->tags_bytes = (size_t) k->npages * sizeof(uint32_t);
        k->tags = mmap(NULL, k->tags_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (k->tags == MAP_FAILED) {
                k->tags = NULL;
                km_free_ctx(k);
                return -ENOMEM;
        }
        if (km_mid_init(k) < 0) {
                km_free_ctx(k);
                return -ENOMEM;
        }

        /* The kmalloc caches: powers of two from 8, plus 96 and 192; and
         * between a quarter and half a page, the sizes of which 6 and 3 fit
         * a page (672 and 1360 bytes on 4 KiB pages, 16-byte aligned), as
         * SLUB's kmalloc-96 and -192 sit between powers of two: a block of
         * a little over 1 KiB (SQLite allocates them by the ten thousand)
         * takes a third of a page, not half. */
        for (size_t sz = KM_MIN_BYTES; sz <= k->page_size / 2 && n < KM_MAX_CLASSES; sz *= 2) {
                if (sz == 128 && n < KM_MAX_CLASSES)
                        sizes[n++] = 96;
                if (sz == 256 && n < KM_MAX_CLASSES)
                        sizes[n++] = 192;
                if (sz == k->page_size / 4 && n < KM_MAX_CLASSES)
                        sizes[n++] = k->page_size / 6 / 16 * 16;
                if (sz == k->page_size / 2 && n < KM_MAX_CLASSES)
                        sizes[n++] = k->page_size / 3 / 16 * 16;
                if (n < KM_MAX_CLASSES)
                        sizes[n++] = sz;
        }
        for (size_t i = 0; i < n; i++) {
                char name[32];
                size_t sz = sizes[i];
                /* Natural alignment for powers of two, as kmalloc gives. */
                size_t align = (sz & (sz - 1)) == 0 ? sz : sz == 96 ? 32 : sz == 192 ? 64 : 16;

                snprintf(name, sizeof(name), "kmalloc-%zu", sz);
                k->cache[i] = slab_cache_create_sized(c, name, sz, align, 0, NULL, KM_CPU_LIST_BYTES);
                if (!k->cache[i]) {
                        int r = -errno;

                        k->nclasses = (unsigned) i;
                        km_free_ctx(k);
                        return r;
                }
                slab_cache_set_page_tags(k->cache[i], k->tags, (uint32_t) i + 1);
                k->class_bytes[i] = sz;
        }
        k->nclasses = (unsigned) n;
        k->shrinker = (struct mb_shrinker) { .count = km_shrink_count, .scan = km_shrink_scan, .userdata = k };
        k->shrinker_registered = mb_register_shrinker(c, &k->shrinker) == 0;
        for (size_t b = 0, ci = 0; b < ELEMENTSOF(k->small_class); b++) {
                size_t sz = MB_MAX(b * KM_MIN_BYTES, (size_t) KM_MIN_BYTES);

                while (ci + 1 < n && k->class_bytes[ci] < sz)
                        ci++;
                k->small_class[b] = (uint8_t) ci;
        }
        *ret = k;
        return 0;
}

/* km_get() the first time (and in a fork() child): out of line. */
static __attribute__((noinline)) struct kmalloc_ctx *km_get_slow(mb_client *c) {
        struct kmalloc_ctx *k;
        int r = 0;

        if (c->forked) {
                (void) session_lost(c);
                errno = ECHILD;
                return NULL;
        }
        pthread_mutex_lock(&km_create_lock);
        k = c->kmalloc;
        if (!k) {
                r = km_new_ctx(c, &k);
                if (r == 0)
                        __atomic_store_n(&c->kmalloc, k, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&km_create_lock);
        if (r < 0) {
                mb_set_error("mb_malloc: cannot set up the size classes: %s", strerror(-r));
                errno = -r;
                return NULL;
        }
        return k;
}

static inline struct kmalloc_ctx *km_get(mb_client *c) {
        struct kmalloc_ctx *k = __atomic_load_n(&c->kmalloc, __ATOMIC_ACQUIRE);

        if (_likely_(k))
                return k;
        return km_get_slow(c);
}

/* The class for @size (<= page_size / 2). */
static inline unsigned km_class(const struct kmalloc_ctx *k, size_t size) {
        unsigned ci;

        if (_likely_(size <= KM_FAST_MAX))
                return k->small_class[(size + KM_MIN_BYTES - 1) / KM_MIN_BYTES];
        ci = k->small_class[ELEMENTSOF(k->small_class) - 1];
        while (k->class_bytes[ci] < size)
                ci++;
        return ci;
}


/* ---- runs of contiguous pages ---- */

void *mb_page_alloc_contig(mb_client *c, size_t n, unsigned flags) {
        void *p = NULL;
        int r;

        if (n < 1 || n > MB_CONTIG_MAX_PAGES || (flags & ~MB_ALLOC_NORETRY)) {
                mb_set_error("mb_page_alloc_contig: %zu pages outside 1..%u or unknown flags 0x%x", n,
                             MB_CONTIG_MAX_PAGES, flags);
                errno = EINVAL;
                return NULL;
        }
        if (c->forked) {
                errno = -session_lost(c);
                return NULL;
        }
        {
                MB_LOCK_GUARD(&c->session.conn_lock);
                r = session_broken(c) ? session_lost(c) : session_charge_contig_locked(c, (uint32_t) n, flags, &p);
        }
        session_dispatch_events(c);
        if (r < 0) {
                errno = -r;
                return NULL;
        }
        mb_client_stat_add(c, MB_STAT_PAGES, (int64_t) n);
        mb_client_stat_add(c, MB_STAT_PGALLOC, (int64_t) n);
        return p;
}

int mb_page_free_contig(mb_client *c, void *first, size_t n) {
        uint64_t idx;
        int r;

        if (!client_page_valid(c, first) || n < 1 || n > MB_CONTIG_MAX_PAGES ||
            (idx = mb_page_to_handle(c, first)) + n > c->arena_pages) {
                mb_set_error("mb_page_free_contig: %p + %zu pages is not a run of the arena", first, n);
                return -EINVAL;
        }
        if (c->forked)
                return session_lost(c);
        if (session_broken(c))
                return session_lost(c);
        /* Freed by a shrinker answering a Reclaim: part of the answer. */
        if (!reclaim_running(c) || reclaim_collect_run(c, first, n) < 0) {
                r = session_uncharge_extent(c, idx, (uint32_t) n);
                if (r < 0)
                        return r;
        }
        mb_client_stat_add(c, MB_STAT_PAGES, -(int64_t) n);
        mb_client_stat_add(c, MB_STAT_PGFREE, (int64_t) n);
        return 0;
}

/* Give every kept run back (at a limit, before failing). */
static uint32_t km_run_return_all(struct kmalloc_ctx *k);

static size_t km_runs_flush(struct kmalloc_ctx *k) {
        void *batch[64];
        size_t pages = km_run_return_all(k);
        uint8_t *left;
        uint32_t nleft;

        pthread_mutex_lock(&k->runs_lock);
        left = k->bump;
        nleft = k->bump_left;
        k->bump = NULL;
        k->bump_left = 0;
        pthread_mutex_unlock(&k->runs_lock);
        if (nleft > 0) {
                k->tags[km_index(k, left)] = KM_TAG_RUN | nleft;
                (void) mb_page_free_contig(k->c, left, nleft);
                pages += nleft;
        }
        for (;;) {
                void *bp = NULL;
                uint32_t bn = 0;

                pthread_mutex_lock(&k->runs_lock);
                if (k->nbig > 0) {
                        k->nbig--;
                        bp = k->big[k->nbig].p;
                        bn = k->big[k->nbig].n;
                        k->runs_pages -= bn;
                        km_unkeep_tags(k, km_index(k, bp), bn);
                }
                pthread_mutex_unlock(&k->runs_lock);
                if (!bp)
                        break;
                (void) mb_page_free_contig(k->c, bp, bn);
                pages += bn;
        }

        for (unsigned p = 1; p <= KM_RUN_CACHE_MAX_PAGES; p++)
                for (;;) {
                        uint32_t n;

                        pthread_mutex_lock(&k->runs_lock);
                        n = MB_MIN(k->runs[p].n, (uint32_t) ELEMENTSOF(batch));
                        if (n == 0) {
                                pthread_mutex_unlock(&k->runs_lock);
                                break;
                        }
                        k->runs[p].n -= n;
                        if (k->runs[p].n == 0)
                                k->runs_nonempty[p / 64] &= ~(1ull << (p % 64));
                        memcpy(batch, k->runs[p].runs + k->runs[p].n, n * sizeof(void *));
                        k->runs_pages -= n * p;
                        for (uint32_t i = 0; i < n; i++)
                                km_unkeep_tags(k, km_index(k, batch[i]), p);
                        pthread_mutex_unlock(&k->runs_lock);
                        for (uint32_t i = 0; i < n; i++)
                                (void) mb_page_free_contig(k->c, batch[i], p);
                        pages += (size_t) n * p;
                }
        return pages;
}

/* At the tenant's limit: give back what this client keeps charged for
 * later (kept runs, empty slabs), so that a retry may fit. */
static size_t km_shrink(struct kmalloc_ctx *k) {
        size_t pages = km_mid_shrink(k) + km_runs_flush(k);

        for (unsigned i = 0; i < k->nclasses; i++)
                pages += mb_cache_shrink(k->cache[i]);
        return pages;
}

static void km_run_keep(struct kmalloc_ctx *k, void *p, size_t n);

/* The unused rest of a chunk (@n pages at @p): kept as a run, or returned. */
static void km_run_leftover(struct kmalloc_ctx *k, uint8_t *p, uint32_t n) {
        if (n == 0)
                return;
        k->tags[km_index(k, p)] = KM_TAG_RUN | n;
        if (n <= KM_RUN_CACHE_MAX_PAGES)
                km_run_keep(k, p, n);
        else
                (void) mb_page_free_contig(k->c, p, n);
}

/* Push the run @p of @n pages (1..KM_RUN_CACHE_MAX_PAGES) on its list;
 * false when its stack cannot grow.  Under runs_lock.  Its first page's
 * tag says it is kept, so that freeing it again is refused. */
static bool km_runs_push_locked(struct kmalloc_ctx *k, void *p, uint32_t n) {
        struct km_runs *r = &k->runs[n];
        uint64_t idx = km_index(k, p);

        if (r->n == r->cap) {
                uint32_t cap = MB_MAX(r->cap * 2, 8u);
                /* The library's own memory: never mb_malloc(). */
                void **v = realloc(r->runs, cap * sizeof(void *));

                if (!v)
                        return false;
                r->runs = v;
                r->cap = cap;
        }
        r->runs[r->n++] = p;
        k->runs_nonempty[n / 64] |= 1ull << (n % 64);
        k->runs_pages += n;
        k->tags[idx] = KM_TAG_RUN | KM_TAG_KEPT | n;
        return true;
}

/* A kept run of @n pages: the last freed of that size, else the smallest
 * larger one cut to size (its rest kept on the list of its size), as
 * glibc's best fit from its bins splits a larger free chunk.  Under
 * runs_lock; NULL when no kept run is that long. */
static void *km_runs_take_locked(struct kmalloc_ctx *k, uint32_t n) {
        uint32_t m = n;
        uint8_t *p;

        for (;;) {
                uint64_t bits = k->runs_nonempty[m / 64] & (~0ull << (m % 64));

                if (bits) {
                        m = (m / 64) * 64 + (uint32_t) __builtin_ctzll(bits);
                        break;
                }
                m = (m / 64 + 1) * 64;
                if (m > KM_RUN_CACHE_MAX_PAGES)
                        return NULL;
        }
        p = k->runs[m].runs[--k->runs[m].n];
        if (k->runs[m].n == 0)
                k->runs_nonempty[m / 64] &= ~(1ull << (m % 64));
        k->runs_pages -= m;
        km_unkeep_tags(k, km_index(k, p), m);
        if (m > n) {
                uint8_t *rest = p + ((size_t) n << k->page_shift);

                k->tags[km_index(k, rest)] = KM_TAG_RUN | (m - n);
                if (!km_runs_push_locked(k, rest, m - n)) {
                        /* Cannot keep the rest: hand out the whole run. */
                        k->tags[km_index(k, rest)] = 0;
                        n = m;
                }
        }
        k->tags[km_index(k, p)] = KM_TAG_RUN | n;
        k->inuse_pages += n;
        return p;
}

/* @n pages of runs were freed (runs_lock): what a program had in use at
 * once it is likely to use again, so the bound of what is kept rises to
 * that much (glibc keeps freed memory in its heap and trims only its top). */
static inline void km_inuse_free_locked(struct kmalloc_ctx *k, uint32_t n) {
        /* (Plus the first bound: room for the rests of chunks.) */
        uint64_t want = k->inuse_pages + KM_RUN_CACHE_MAX_TOTAL_PAGES;

        if (want > k->keep_max)
                k->keep_max = (uint32_t) MB_MIN(want, (uint64_t) KM_KEEP_PEAK_MAX_PAGES);
        k->inuse_pages -= n;
}

/*
 * Kept large runs (above the lists' sizes), as glibc's heap keeps the large
 * chunks it frees and tcmalloc's page heap its spans: a freed run merges
 * with the kept runs on either side of it in the arena (free()'s
 * consolidation of neighbours), and a request takes the smallest kept run
 * that holds it, cut to size (best fit), so that blocks of MiBs of any mix
 * of sizes are served from what was freed instead of charged, faulted in
 * and hole-punched again.  Under runs_lock.  A kept run's first page is
 * tagged KM_TAG_KEPT (freeing it again is refused); the first page of a
 * run merged into another is untagged.
 */
static bool km_big_put_locked(struct kmalloc_ctx *k, uint8_t *p, uint32_t n) {
        size_t bytes = (size_t) n << k->page_shift;

        for (uint32_t i = 0; i < k->nbig;) {
                uint8_t *q = k->big[i].p;
                size_t qbytes = (size_t) k->big[i].n << k->page_shift;

                if (q + qbytes == p || p + bytes == q) {
                        if (q + qbytes == p) {
                                k->tags[km_index(k, p)] = 0;
                                p = q;
                        } else
                                k->tags[km_index(k, q)] = 0;
                        n += k->big[i].n;
                        bytes += qbytes;
                        k->big[i] = k->big[--k->nbig];
                        continue;
                }
                i++;
        }
        if (k->nbig == KM_BIG_KEEP_MAX)
                return false;
        k->big[k->nbig].p = p;
        k->big[k->nbig++].n = n;
        k->tags[km_index(k, p)] = KM_TAG_RUN | KM_TAG_KEPT | n;
        return true;
}

static void *km_big_take_locked(struct kmalloc_ctx *k, uint32_t n) {
        uint32_t best = UINT32_MAX;
        uint8_t *p;

        for (uint32_t i = 0; i < k->nbig; i++)
                if (k->big[i].n >= n && (best == UINT32_MAX || k->big[i].n < k->big[best].n))
                        best = i;
        if (best == UINT32_MAX)
                return NULL;
        p = k->big[best].p;
        if (k->big[best].n == n)
                k->big[best] = k->big[--k->nbig];
        else {
                k->big[best].p = p + ((size_t) n << k->page_shift);
                k->big[best].n -= n;
                k->tags[km_index(k, k->big[best].p)] = KM_TAG_RUN | KM_TAG_KEPT | k->big[best].n;
        }
        k->runs_pages -= n;
        k->inuse_pages += n;
        return p;
}

void *km_run_alloc(struct kmalloc_ctx *k, size_t n, bool *ret_zeroed) {
        void *p = NULL;

        if (n <= KM_RUN_CACHE_MAX_PAGES) {
                pthread_mutex_lock(&k->runs_lock);
                p = km_runs_take_locked(k, (uint32_t) n);
                pthread_mutex_unlock(&k->runs_lock);
                if (p) {
                        *ret_zeroed = false;
                        return p;
                }
        }
        /* Carved from a chunk charged ahead, while the tenant's path has
         * room for it (Grant.headroom); NORETRY: a chunk that does not fit
         * must not count an `oom` when the run alone would. */
        if (n <= KM_RUN_CACHE_MAX_PAGES) {
                uint8_t *left = NULL;
                uint64_t want, room, chunk;
                uint32_t nleft = 0;

                pthread_mutex_lock(&k->runs_lock);
                if (k->bump_left >= n) {
                        p = k->bump;
                        k->bump += n << k->page_shift;
                        k->bump_left -= (uint32_t) n;
                        k->inuse_pages += n;
                }
                pthread_mutex_unlock(&k->runs_lock);
                if (p) {
                        k->tags[km_index(k, p)] = KM_TAG_RUN | (uint32_t) n;
                        *ret_zeroed = true; /* never handed out before */
                        return p;
                }
                /* A heap that keeps growing charges larger chunks, as glibc
                 * grows its heap: 1/8 of what was charged so, within half
                 * the headroom. */
                want = MB_MIN(__atomic_load_n(&k->batched_pages, __ATOMIC_RELAXED) / 8,
                              (uint64_t) KM_RUN_BATCH_MAX_PAGES_ALL);
                room = __atomic_load_n(&k->c->refill.headroom, __ATOMIC_RELAXED) / 2;
                chunk = MB_MAX(MB_MIN(want, room), (uint64_t) KM_RUN_BATCH_PAGES);
                if (chunk >= 2 * n && room >= chunk)
                        p = mb_page_alloc_contig(k->c, chunk, MB_ALLOC_NORETRY);
                if (p) {
                        /* Its runs are handed out one after the other, so
                         * fault the chunk in at once: one madvise costs
                         * less than its faults on the arena's shmem pages
                         * (as the refill populates pages charged ahead). */
                        stock_populate_range(k->c, p, chunk);
                        __atomic_add_fetch(&k->batched_pages, chunk, __ATOMIC_RELAXED);
                        k->tags[km_index(k, p)] = KM_TAG_RUN | (uint32_t) n;
                        pthread_mutex_lock(&k->runs_lock);
                        left = k->bump;
                        nleft = k->bump_left;
                        k->bump = (uint8_t *) p + (n << k->page_shift);
                        k->bump_left = (uint32_t) (chunk - n);
                        k->inuse_pages += n;
                        pthread_mutex_unlock(&k->runs_lock);
                        /* What was left of the previous chunk: a run to keep. */
                        km_run_leftover(k, left, nleft);
                        *ret_zeroed = true;
                        return p;
                }
        }
        if (n > KM_RUN_CACHE_MAX_PAGES) {
                /* A kept large run, the best fit, cut when larger. */
                pthread_mutex_lock(&k->runs_lock);
                p = km_big_take_locked(k, (uint32_t) n);
                pthread_mutex_unlock(&k->runs_lock);
                if (p) {
                        k->tags[km_index(k, p)] = KM_TAG_RUN | (uint32_t) n;
                        *ret_zeroed = false;
                        return p;
                }
        }
        p = mb_page_alloc_contig(k->c, n, 0);
        if (!p && errno == ENOMEM && km_shrink(k) > 0)
                p = mb_page_alloc_contig(k->c, n, 0);
        if (!p)
                return NULL;
        k->tags[km_index(k, p)] = KM_TAG_RUN | (uint32_t) n;
        pthread_mutex_lock(&k->runs_lock);
        k->inuse_pages += n;
        pthread_mutex_unlock(&k->runs_lock);
        /* Fresh from the daemon: a page that left a client is punched. */
        *ret_zeroed = true;
        return p;
}

/* Keep the run @p of @n pages (1..KM_RUN_CACHE_MAX_PAGES) whatever the
 * bound (the rest of a chunk: charged, never handed out), or give it back
 * when its list cannot grow. */
static void km_run_keep(struct kmalloc_ctx *k, void *p, size_t n) {
        bool kept;

        pthread_mutex_lock(&k->runs_lock);
        kept = km_runs_push_locked(k, p, (uint32_t) n);
        pthread_mutex_unlock(&k->runs_lock);
        if (!kept)
                (void) mb_page_free_contig(k->c, p, n);
}

/* Send the runs waiting to go back (taken under runs_lock). */
static void km_run_return(struct kmalloc_ctx *k, const uint64_t *start, const uint32_t *count, uint32_t n,
                          uint32_t pages) {
        if (n == 0 || k->c->forked || session_broken(k->c))
                return;
        if (session_uncharge_extents(k->c, start, count, n) == 0) {
                mb_client_stat_add(k->c, MB_STAT_PAGES, -(int64_t) pages);
                mb_client_stat_add(k->c, MB_STAT_PGFREE, (int64_t) pages);
        }
}

/* Take the waiting runs and send them; returns their pages. */
static uint32_t km_run_return_all(struct kmalloc_ctx *k) {
        uint64_t start[KM_RUN_RETURN_MAX];
        uint32_t count[KM_RUN_RETURN_MAX], n, pages;

        pthread_mutex_lock(&k->runs_lock);
        n = k->nret;
        pages = k->ret_pages;
        memcpy(start, k->ret_start, n * sizeof(*start));
        memcpy(count, k->ret_count, n * sizeof(*count));
        k->nret = k->ret_pages = 0;
        pthread_mutex_unlock(&k->runs_lock);
        km_run_return(k, start, count, n, pages);
        return pages;
}

void km_run_free(struct kmalloc_ctx *k, void *p, size_t n) {
        uint64_t start[KM_RUN_RETURN_MAX];
        uint32_t count[KM_RUN_RETURN_MAX], nsend = 0, pages = 0;
        void *back = NULL;
        uint32_t nback = 0;

        pthread_mutex_lock(&k->runs_lock);
        km_inuse_free_locked(k, (uint32_t) n);
        if (n > KM_RUN_CACHE_MAX_PAGES) {
                /* Like glibc's dynamic mmap threshold: a freed large block
                 * says the program reuses such sizes, so the bound of what
                 * is kept rises to four of it. */
                back = p;
                nback = (uint32_t) n;
                if (n <= KM_BIG_KEEP_MAX_PAGES) {
                        k->keep_max = MB_MAX(k->keep_max, (uint32_t) MB_MIN(4 * n, (size_t) KM_KEEP_MAX_PAGES));
                        if (k->runs_pages + n <= k->keep_max && km_big_put_locked(k, p, (uint32_t) n)) {
                                k->runs_pages += (uint32_t) n;
                                back = NULL;
                        }
                }
        } else if (k->runs_pages + n <= k->keep_max) {
                if (!km_runs_push_locked(k, p, (uint32_t) n)) {
                        back = p;
                        nback = (uint32_t) n;
                }
        } else {
                /* Back to the daemon with others, in one Uncharge. */
                k->ret_start[k->nret] = km_index(k, p);
                k->ret_count[k->nret++] = (uint32_t) n;
                k->ret_pages += (uint32_t) n;
                if (k->nret == KM_RUN_RETURN_MAX || k->ret_pages >= KM_RUN_RETURN_PAGES) {
                        nsend = k->nret;
                        pages = k->ret_pages;
                        memcpy(start, k->ret_start, nsend * sizeof(*start));
                        memcpy(count, k->ret_count, nsend * sizeof(*count));
                        k->nret = k->ret_pages = 0;
                }
        }
        pthread_mutex_unlock(&k->runs_lock);
        if (back)
                (void) mb_page_free_contig(k->c, back, nback);
        km_run_return(k, start, count, nsend, pages);
}

/* ---- the API ---- */

static inline __attribute__((always_inline)) void *km_alloc(mb_client *c, size_t size, bool *ret_zeroed) {
        struct kmalloc_ctx *k = km_get(c);
        void *p;

        *ret_zeroed = false;
        if (_unlikely_(!k))
                return NULL;
        if (_likely_(size <= k->page_size / 2)) {
                unsigned ci = km_class(k, size);

                p = mb_cache_alloc(k->cache[ci]);
                if (_unlikely_(!p) && errno == ENOMEM && km_shrink(k) > 0)
                        p = mb_cache_alloc(k->cache[ci]);
                return p;
        }
        if (size < 2 * k->page_size) {
                int mi = km_mid_class(k, size);

                if (mi >= 0) {
                        p = km_mid_alloc(k, (unsigned) mi);
                        if (!p && errno == ENOMEM && km_shrink(k) > 0)
                                p = km_mid_alloc(k, (unsigned) mi);
                        return p;
                }
        }
        if (size <= k->page_size) {
                p = mb_page_alloc(c);
                if (!p && errno == ENOMEM && km_shrink(k) > 0)
                        p = mb_page_alloc(c);
                if (p)
                        k->tags[km_index(k, p)] = KM_TAG_PAGE;
                return p;
        }
        if (size > (size_t) MB_CONTIG_MAX_PAGES << k->page_shift) {
                mb_set_error("mb_malloc: %zu bytes is more than the largest run (%u pages)", size,
                             MB_CONTIG_MAX_PAGES);
                errno = ENOMEM;
                return NULL;
        }
        return km_run_alloc(k, (size + k->page_size - 1) >> k->page_shift, ret_zeroed);
}

void *mb_malloc(mb_client *c, size_t size) {
        struct kmalloc_ctx *k = __atomic_load_n(&c->kmalloc, __ATOMIC_ACQUIRE);
        bool zeroed;

        if (_likely_(k)) {
                void *p = km_malloc_fast(k, size);

                if (_likely_(p))
                        return p;
        }
        return km_alloc(c, size, &zeroed);
}

void *mb_calloc(mb_client *c, size_t nmemb, size_t size) {
        size_t bytes;
        bool zeroed;
        void *p;

        if (__builtin_mul_overflow(nmemb, size, &bytes)) {
                mb_set_error("mb_calloc: %zu x %zu bytes overflows", nmemb, size);
                errno = ENOMEM;
                return NULL;
        }
        p = km_alloc(c, bytes, &zeroed);
        if (p && !zeroed)
                memset(p, 0, bytes);
        return p;
}

/* The tag of @p's page, or 0 when @p is not an allocation of @c's. */
static uint32_t km_tag(const struct kmalloc_ctx *k, const void *p) {
        uintptr_t off = (uintptr_t) p - (uintptr_t) k->base;

        if (off >= (uintptr_t) k->npages << k->page_shift)
                return 0;
        return k->tags[off >> k->page_shift];
}

void mb_free(mb_client *c, void *p) {
        struct kmalloc_ctx *k;
        uint32_t tag;

        if (!p)
                return;
        k = __atomic_load_n(&c->kmalloc, __ATOMIC_ACQUIRE);
        if (_likely_(k) && km_free_fast(k, p))
                return;
        tag = k ? km_tag(k, p) : 0;
        if (_likely_(tag >= 1 && tag <= k->nclasses))
                mb_cache_free(k->cache[tag - 1], p);
        else if (tag == KM_TAG_PAGE)
                (void) mb_page_free(c, p);
        else if ((tag & (KM_TAG_RUN | KM_TAG_KEPT)) == KM_TAG_RUN)
                km_run_free(k, p, tag & KM_TAG_LEN_MASK);
        else if (!(tag & KM_TAG_MID) || !km_mid_free(k, p, tag))
                mb_set_error("mb_free: %p was not allocated by mb_malloc() of this client", p);
}

size_t mb_malloc_usable_size(mb_client *c, const void *p) {
        struct kmalloc_ctx *k = __atomic_load_n(&c->kmalloc, __ATOMIC_ACQUIRE);
        uint32_t tag;

        if (!p || !k)
                return 0;
        tag = km_tag(k, p);
        if (tag >= 1 && tag <= k->nclasses)
                return k->class_bytes[tag - 1];
        if (tag == KM_TAG_PAGE)
                return k->page_size;
        if ((tag & (KM_TAG_RUN | KM_TAG_KEPT)) == KM_TAG_RUN)
                return (size_t) (tag & KM_TAG_LEN_MASK) << k->page_shift;
        if (tag & KM_TAG_MID)
                return km_mid_usable(k, tag);
        return 0;
}

void *mb_realloc(mb_client *c, void *p, size_t size) {
        size_t old;
        void *n;

        if (!p)
                return mb_malloc(c, size);
        if (size == 0) {
                mb_free(c, p);
                return NULL;
        }
        old = mb_malloc_usable_size(c, p);
        if (old == 0) {
                mb_set_error("mb_realloc: %p was not allocated by mb_malloc() of this client", p);
                errno = EINVAL;
                return NULL;
        }
        /* Stays where it is while it fits and uses at least half. */
        if (size <= old && size >= old / 2)
                return p;
        n = mb_malloc(c, size);
        if (!n)
                return NULL;
        memcpy(n, p, MB_MIN(old, size));
        mb_free(c, p);
        return n;
}

void *mb_aligned_alloc(mb_client *c, size_t align, size_t size) {
        struct kmalloc_ctx *k;
        size_t want;

        if (align == 0 || (align & (align - 1))) {
                mb_set_error("mb_aligned_alloc: alignment %zu is not a power of two", align);
                errno = EINVAL;
                return NULL;
        }
        if (align <= KM_MIN_BYTES)
                return mb_malloc(c, size);
        k = km_get(c);
        if (!k)
                return NULL;
        if (align > k->page_size) {
                mb_set_error("mb_aligned_alloc: alignment %zu is larger than a page (%zu)", align, k->page_size);
                errno = EINVAL;
                return NULL;
        }
        /* Powers of two up to half a page are naturally aligned (their
         * caches are), pages and runs are page aligned; the objects
         * between half a page and two pages only to 512 bytes (on 4 KiB
         * pages): a larger alignment takes whole pages. */
        want = MB_MAX(size, align);
        if (want > k->page_size / 2 && align > k->page_size / 8)
                want = (want + k->page_size - 1) & ~(k->page_size - 1);
        if (want <= k->page_size / 2) {
                size_t pow2 = KM_MIN_BYTES;

                while (pow2 < want)
                        pow2 *= 2;
                want = pow2;
        }
        return mb_malloc(c, want);
}

void mb_malloc_trim(mb_client *c) {
        struct kmalloc_ctx *k = __atomic_load_n(&c->kmalloc, __ATOMIC_ACQUIRE);

        if (k && !c->forked)
                (void) km_shrink(k);
}

int mb_malloc_class_stats(mb_client *c, struct mb_cache_stats *ret, size_t n) {
        struct kmalloc_ctx *k = __atomic_load_n(&c->kmalloc, __ATOMIC_ACQUIRE);
        size_t i;

        if (!k)
                return 0;
        for (i = 0; i < k->nclasses && i < n; i++)
                if (mb_cache_stats(k->cache[i], &ret[i]) < 0)
                        return -errno;
        return (int) i;
}
