/* SPDX-License-Identifier: MIT */
/*
 * malloc_mid.c - mb_malloc()'s classes between half a page and two pages:
 * objects of 3/4, 9/8, 5/4 and 3/2 of a page (3072, 4608, 5120 and 6144
 * bytes on 4 KiB pages), KM_MID_OBJS of them on a slab of 6, 9, 10 or 12
 * contiguous pages that they fill exactly, straddling page boundaries.
 *
 * The kernel serves such sizes from slabs of a higher order (SLUB's
 * kmalloc-4k ... kmalloc-8k sit on order-1 to order-3 slabs, calculate_order()),
 * so that an object of a page and a bit does not take two whole pages.  A
 * run would: a 4.5 KiB object touches (and faults in) 2 pages as a run,
 * 1.125 on average here, which is what SQLite's page cache allocates.
 *
 * A slab is a run (km_run_alloc(): charged, counted in `pages`, from the
 * chunks charged at once), so every page of it counts in the tenant's
 * usage as a run's would.  Metadata lives outside the slab: the 32-bit tag
 * of each of its pages says KM_TAG_MID, the class and the page's offset in
 * the slab (so a pointer finds its slab's first page), and the first
 * page's tag also holds the bitmap of free objects; a slab with a free
 * object is on its class's doubly linked list, whose links live in an
 * anonymous MAP_NORESERVE array of 8 bytes per arena page (touched only
 * for slabs' first pages).  A slab whose objects are all free goes back as
 * a run once more than KM_MID_EMPTY_KEEP such slabs wait in its class (as
 * SLUB keeps min_partial empty slabs, discard_slab()), and at the limit or
 * on Reclaim (km_mid_shrink()).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "malloc/kmalloc.h"
#include "macros.h"

#define KM_MID_OBJS 8u                   /* objects per slab: bits 0..7 of the first page's tag */
#define KM_MID_ALL_FREE ((1u << KM_MID_OBJS) - 1)
#define KM_MID_EMPTY_KEEP 2u             /* slabs with every object free kept per class */
#define KM_MID_CLASS_SHIFT 24
#define KM_MID_OFF_SHIFT 16
#define KM_MID_OFF_MASK 0xffu

/* Object sizes in eighths of a page. */
static const unsigned km_mid_eighths[KM_MID_CLASSES] = { 6, 9, 10, 12 };

static inline unsigned mid_tag_class(uint32_t tag) {
        return (tag >> KM_MID_CLASS_SHIFT) & 0x3fu;
}

static inline unsigned mid_tag_off(uint32_t tag) {
        return (tag >> KM_MID_OFF_SHIFT) & KM_MID_OFF_MASK;
}

int km_mid_init(struct kmalloc_ctx *k) {
        k->mid_link_bytes = (size_t) k->npages * sizeof(uint64_t);
        k->mid_link = mmap(NULL, k->mid_link_bytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (k->mid_link == MAP_FAILED) {
                k->mid_link = NULL;
                return -ENOMEM;
        }
        for (unsigned i = 0; i < KM_MID_CLASSES; i++) {
                struct km_mid *m = &k->mid[i];

                pthread_mutex_init(&m->lock, NULL);
                m->obj_bytes = k->page_size / 8 * km_mid_eighths[i];
                m->slab_pages = km_mid_eighths[i]; /* 8 objects of n/8 pages: n pages */
        }
        return 0;
}

void km_mid_destroy(struct kmalloc_ctx *k) {
        if (!k->mid_link)
                return;
        for (unsigned i = 0; i < KM_MID_CLASSES; i++)
                pthread_mutex_destroy(&k->mid[i].lock);
        munmap(k->mid_link, k->mid_link_bytes);
        k->mid_link = NULL;
}

int km_mid_class(const struct kmalloc_ctx *k, size_t size) {
        if (!k->mid_link || size <= k->page_size / 2 || size >= 2 * k->page_size)
                return -1;
        for (unsigned i = 0; i < KM_MID_CLASSES; i++)
                if (size <= k->mid[i].obj_bytes)
                        /* A page serves (3/4, 1] page from the stock. */
                        return i == 1 && size <= k->page_size ? -1 : (int) i;
        return -1;
}

/* ---- the list of slabs with a free object (m->lock) ---- */

static inline uint64_t link_next(const struct kmalloc_ctx *k, uint64_t idx) {
        return k->mid_link[idx] & 0xffffffffu;
}

static inline uint64_t link_prev(const struct kmalloc_ctx *k, uint64_t idx) {
        return k->mid_link[idx] >> 32;
}

static inline void link_set(struct kmalloc_ctx *k, uint64_t idx, uint64_t next1, uint64_t prev1) {
        k->mid_link[idx] = next1 | (prev1 << 32);
}

static void mid_link_head(struct kmalloc_ctx *k, struct km_mid *m, uint64_t idx) {
        uint64_t head1 = m->partial;

        link_set(k, idx, head1, 0);
        if (head1)
                link_set(k, head1 - 1, link_next(k, head1 - 1), idx + 1);
        m->partial = idx + 1;
}

static void mid_unlink(struct kmalloc_ctx *k, struct km_mid *m, uint64_t idx) {
        uint64_t next1 = link_next(k, idx), prev1 = link_prev(k, idx);

        if (prev1)
                link_set(k, prev1 - 1, next1, link_prev(k, prev1 - 1));
        else
                m->partial = next1;
        if (next1)
                link_set(k, next1 - 1, link_next(k, next1 - 1), prev1);
        link_set(k, idx, 0, 0);
}

/* A slab leaves its class: its pages become a run again. */
static void mid_release(struct kmalloc_ctx *k, struct km_mid *m, uint64_t idx) {
        for (uint32_t i = 1; i < m->slab_pages; i++)
                k->tags[idx + i] = 0;
        k->tags[idx] = KM_TAG_RUN | m->slab_pages;
        km_run_free(k, k->base + (idx << k->page_shift), m->slab_pages);
}

void *km_mid_alloc(struct kmalloc_ctx *k, unsigned ci) {
        struct km_mid *m = &k->mid[ci];

        for (;;) {
                uint64_t idx;
                uint32_t tag, bits;
                unsigned obj;
                uint8_t *slab;
                bool zeroed;

                pthread_mutex_lock(&m->lock);
                if (_likely_(m->partial)) {
                        idx = m->partial - 1;
                        tag = k->tags[idx];
                        bits = tag & KM_MID_ALL_FREE;
                        if (bits == KM_MID_ALL_FREE)
                                m->nempty--;
                        obj = (unsigned) __builtin_ctz(bits);
                        bits &= ~(1u << obj);
                        k->tags[idx] = (tag & ~KM_MID_ALL_FREE) | bits;
                        if (bits == 0)
                                mid_unlink(k, m, idx);
                        pthread_mutex_unlock(&m->lock);
                        return k->base + (idx << k->page_shift) + obj * m->obj_bytes;
                }
                pthread_mutex_unlock(&m->lock);

                /* A new slab: a run, every page tagged. */
                slab = km_run_alloc(k, m->slab_pages, &zeroed);
                if (!slab)
                        return NULL;
                idx = km_index(k, slab);
                for (uint32_t i = 1; i < m->slab_pages; i++)
                        k->tags[idx + i] = KM_TAG_MID | ci << KM_MID_CLASS_SHIFT | i << KM_MID_OFF_SHIFT;
                k->tags[idx] = KM_TAG_MID | ci << KM_MID_CLASS_SHIFT | KM_MID_ALL_FREE;
                pthread_mutex_lock(&m->lock);
                mid_link_head(k, m, idx);
                m->nempty++;
                pthread_mutex_unlock(&m->lock);
        }
}

bool km_mid_free(struct kmalloc_ctx *k, void *p, uint32_t tag) {
        unsigned ci = mid_tag_class(tag);
        struct km_mid *m;
        uint64_t idx;
        size_t off;
        unsigned obj;
        uint32_t first, bits;
        bool release = false;

        if (ci >= KM_MID_CLASSES)
                return false;
        m = &k->mid[ci];
        idx = km_index(k, p) - mid_tag_off(tag);
        off = (size_t) ((uint8_t *) p - (k->base + (idx << k->page_shift)));
        if (off % m->obj_bytes)
                return false;
        obj = (unsigned) (off / m->obj_bytes);
        pthread_mutex_lock(&m->lock);
        first = k->tags[idx];
        if ((first & ~(KM_MID_ALL_FREE | KM_MID_OFF_MASK << KM_MID_OFF_SHIFT)) !=
                    (KM_TAG_MID | ci << KM_MID_CLASS_SHIFT) ||
            mid_tag_off(first) != 0 || obj >= KM_MID_OBJS || (first & (1u << obj))) {
                pthread_mutex_unlock(&m->lock);
                return false;
        }
        bits = (first & KM_MID_ALL_FREE) | 1u << obj;
        k->tags[idx] = (first & ~KM_MID_ALL_FREE) | bits;
        if ((first & KM_MID_ALL_FREE) == 0)
                mid_link_head(k, m, idx);
        if (bits == KM_MID_ALL_FREE) {
                if (m->nempty >= KM_MID_EMPTY_KEEP) {
                        mid_unlink(k, m, idx);
                        release = true;
                } else
                        m->nempty++;
        }
        pthread_mutex_unlock(&m->lock);
        if (release)
                mid_release(k, m, idx);
        return true;
}

size_t km_mid_usable(const struct kmalloc_ctx *k, uint32_t tag) {
        unsigned ci = mid_tag_class(tag);

        return ci < KM_MID_CLASSES ? k->mid[ci].obj_bytes : 0;
}

size_t km_mid_shrink(struct kmalloc_ctx *k) {
        size_t pages = 0;

        if (!k->mid_link)
                return 0;
        for (unsigned ci = 0; ci < KM_MID_CLASSES; ci++) {
                struct km_mid *m = &k->mid[ci];

                for (;;) {
                        uint64_t found = 0;

                        pthread_mutex_lock(&m->lock);
                        if (m->nempty > 0)
                                for (uint64_t i1 = m->partial; i1; i1 = link_next(k, i1 - 1))
                                        if ((k->tags[i1 - 1] & KM_MID_ALL_FREE) == KM_MID_ALL_FREE) {
                                                found = i1;
                                                mid_unlink(k, m, i1 - 1);
                                                m->nempty--;
                                                break;
                                        }
                        pthread_mutex_unlock(&m->lock);
                        if (!found)
                                break;
                        mid_release(k, m, found - 1);
                        pages += m->slab_pages;
                }
        }
        return pages;
}

size_t km_mid_empty_pages(const struct kmalloc_ctx *k) {
        size_t pages = 0;

        for (unsigned ci = 0; ci < KM_MID_CLASSES; ci++)
                pages += (size_t) __atomic_load_n(&k->mid[ci].nempty, __ATOMIC_RELAXED) * k->mid[ci].slab_pages;
        return pages;
}
