/* SPDX-License-Identifier: MIT */
/*
 * kmalloc.h - what malloc.c (sizes classes, pages, runs) and malloc_mid.c
 * (the classes between half a page and two pages, on multi-page slabs)
 * share (not installed).
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macros.h"
#include "slab/slab.h"

#include "core/client.h"
#include "session/session.h"

#define KM_MIN_BYTES 8u
#define KM_MAX_CLASSES 24u
#define KM_CPU_LIST_BYTES (256u * 1024u) /* what a CPU's list of a class may park: with 13
                                            * classes about the 3 MiB of tcmalloc's per-CPU cache */
#define KM_FAST_MAX 2048u                /* sizes the class table covers (<= any page / 2) */
#define KM_TAG_PAGE 0x100u               /* one page from the stock */
#define KM_TAG_RUN 0x80000000u           /* | pages: the first page of a run */
#define KM_RUN_CACHE_MAX_PAGES 128u      /* runs kept when freed: 2..this pages */
#define KM_RUN_CACHE_MAX_TOTAL_PAGES 2048u /* pages all kept runs may hold, at first */
#define KM_BIG_KEEP_MAX 128u              /* larger runs kept when freed (a few) ... */
#define KM_BIG_KEEP_MAX_PAGES 8192u       /* ... of up to 32 MiB, glibc's largest mmap threshold */
#define KM_KEEP_MAX_PAGES 16384u          /* the bound rises with the largest run freed (4x) up to this */
#define KM_KEEP_PEAK_MAX_PAGES 262144u    /* ... and with the most run pages in use at once, up to
                                           * this (1 GiB): glibc keeps what a program freed in its heap */
#define KM_RUN_BATCH_PAGES 64u           /* runs are carved from chunks of at least this
                                          * many pages charged at once, */
#define KM_RUN_BATCH_MAX_PAGES_ALL 1024u /* growing with the heap (1/8 of what was
                                          * charged so) up to this many */
#define KM_RUN_RETURN_PAGES 64u          /* runs that do not fit the lists go back together,
                                          * in one Uncharge, once this many pages wait */
#define KM_RUN_RETURN_MAX SESSION_UNCHARGE_EXTENTS_MAX

struct km_runs {
        void **runs;                     /* stack of free runs of one size */
        uint32_t n, cap;
};

#define KM_TAG_MID 0x40000000u           /* a page of a multi-page slab (malloc_mid.c) */
#define KM_TAG_KEPT 0x20000000u          /* with KM_TAG_RUN: the first page of a kept run */
#define KM_TAG_LEN_MASK 0x0fffffffu      /* the pages of a run in its tags */
#define KM_MID_CLASSES 4u                /* 3/4, 9/8, 5/4 and 3/2 of a page */

/* One class of objects between half a page and two pages, on slabs of a
 * few contiguous pages whose objects straddle page boundaries (as SLUB's
 * kmalloc-96k... use order-1+ slabs): a 4.5 KiB object touches 1.125 pages
 * on average, not the 2 of a run. */
struct km_mid {
        pthread_mutex_t lock;
        size_t obj_bytes;
        uint32_t slab_pages;             /* KM_MID_OBJS objects fill them exactly */
        uint64_t partial;                /* page index + 1 of the first slab with a free object, 0: none */
        uint32_t nempty;                 /* slabs on the list with every object free */
};

struct kmalloc_ctx {
        mb_client *c;
        uint8_t *base;
        uint64_t npages;
        size_t page_size;
        unsigned page_shift;
        uint32_t *tags;                  /* [npages] */
        size_t tags_bytes;
        unsigned nclasses;
        size_t class_bytes[KM_MAX_CLASSES];
        mb_cache *cache[KM_MAX_CLASSES];
        uint8_t small_class[(KM_FAST_MAX / KM_MIN_BYTES) + 1]; /* (size + 7) / 8 -> class */

        pthread_mutex_t runs_lock;
        struct km_runs runs[KM_RUN_CACHE_MAX_PAGES + 1];
        uint32_t runs_pages;             /* pages on all run stacks */
        uint64_t ret_start[KM_RUN_RETURN_MAX]; /* runs waiting to go back */
        uint32_t ret_count[KM_RUN_RETURN_MAX];
        uint32_t nret, ret_pages;
        uint64_t batched_pages;          /* pages charged in chunks so far (atomic) */
        struct { void *p; uint32_t n; } big[KM_BIG_KEEP_MAX]; /* kept runs above the lists' sizes */
        uint32_t nbig;
        uint32_t keep_max;               /* bound of runs_pages (runs_lock) */
        uint64_t runs_nonempty[(KM_RUN_CACHE_MAX_PAGES + 64) / 64]; /* bit n: runs[n].n > 0 (runs_lock) */
        uint64_t inuse_pages;            /* pages of runs handed out and not freed (runs_lock) */
        uint8_t *bump;                   /* the rest of the last chunk: runs are carved */
        uint32_t bump_left;              /* from it (pages; runs_lock) */
        struct km_mid mid[KM_MID_CLASSES];
        uint64_t *mid_link;              /* [npages]: a slab's next and previous on its class's list */
        size_t mid_link_bytes;
        struct mb_shrinker shrinker;     /* gives the kept runs back under pressure */
        bool shrinker_registered;
};

/* A run of @n pages (see malloc.c); *@ret_zeroed tells whether it was
 * never handed out before. */
void *km_run_alloc(struct kmalloc_ctx *k, size_t n, bool *ret_zeroed);
/* Free the run @p of @n pages: kept for reuse or given back. */
void km_run_free(struct kmalloc_ctx *k, void *p, size_t n);

static inline uint64_t km_index(const struct kmalloc_ctx *k, const void *p) {
        return (uint64_t) ((const uint8_t *) p - k->base) >> k->page_shift;
}

/*
 * The front end's fast paths, inline for mb_malloc()/mb_free() and the
 * preload shim: a size up to KM_FAST_MAX is one table lookup for its class
 * and one restartable pop off this CPU's list of that class's cache
 * (tcmalloc's per-CPU fast path: the class from a table, the object from
 * the CPU's slots); a free is the page's tag (the class, as tcmalloc's
 * pagemap gives the size class) and one push.  NULL or false where the
 * sequence did not commit (an empty or full list, the lock held, another
 * kind of block, a debug or inherited cache): the caller takes the whole
 * path.  No errno, no lock, no call.
 */
static inline __attribute__((always_inline)) void *km_malloc_fast(struct kmalloc_ctx *k, size_t size) {
        void *p;

        if (_likely_(size <= KM_FAST_MAX) &&
            _likely_(slab_cache_alloc_fast(k->cache[k->small_class[(size + KM_MIN_BYTES - 1) / KM_MIN_BYTES]],
                                           &p) == SLAB_RSEQ_DONE))
                return p;
        return NULL;
}

static inline __attribute__((always_inline)) bool km_free_fast(struct kmalloc_ctx *k, void *p) {
        uintptr_t off = (uintptr_t) p - (uintptr_t) k->base;
        uint32_t tag;

        if (_unlikely_(off >= (uintptr_t) k->npages << k->page_shift))
                return false;
        tag = k->tags[off >> k->page_shift] - 1;
        return _likely_(tag < k->nclasses) && _likely_(slab_cache_free_fast(k->cache[tag], p) == SLAB_RSEQ_DONE);
}

/* Set up the mid classes of @k (after k->tags); negative errno. */
int km_mid_init(struct kmalloc_ctx *k);
/* Tear them down (the slabs go with the client's pages). */
void km_mid_destroy(struct kmalloc_ctx *k);
/* The mid class for @size, or -1 when no mid class serves it. */
int km_mid_class(const struct kmalloc_ctx *k, size_t size);
/* An object of mid class @ci; NULL with errno set when no slab can be had. */
void *km_mid_alloc(struct kmalloc_ctx *k, unsigned ci);
/* Free @p, whose page carries @tag (KM_TAG_MID); false when @p is not an
 * object of that slab or is free already. */
bool km_mid_free(struct kmalloc_ctx *k, void *p, uint32_t tag);
/* The object size of the slab page tagged @tag. */
size_t km_mid_usable(const struct kmalloc_ctx *k, uint32_t tag);
/* Give every slab whose objects are all free back; returns the pages. */
size_t km_mid_shrink(struct kmalloc_ctx *k);
/* Pages held by slabs whose objects are all free. */
size_t km_mid_empty_pages(const struct kmalloc_ctx *k);

/* Destroy mb_malloc()'s caches and runs of @c (mb_close()). */
void kmalloc_destroy(mb_client *c);
