/* SPDX-License-Identifier: MIT */
/*
 * pcache.c - SQLite's page cache (sqlite3_pcache_methods2) on broker pages,
 * with a shrinker that gives unpinned pages back when the daemon reclaims.
 *
 * One `struct pcache` per cache SQLite creates (usually one per open
 * database file).  A database page is a `struct page`: a record from a
 * reclaimable slab cache shared by all caches with the same szExtra (the
 * sqlite3_pcache_page SQLite sees, the hash and LRU links, then SQLite's
 * extra bytes), and the page contents: an object of a slab cache of szPage
 * bytes when szPage is at most half a broker page, a whole broker page up
 * to a broker page (the common 4 KiB page on 4 KiB broker pages), else a
 * contiguous run of ceil(szPage / page size) broker pages
 * (mb_page_alloc_contig(), as the kernel takes a high-order page with
 * alloc_pages(order)): 8 KiB pages on 4 KiB broker pages are runs of two.
 * All of it is charged to the tenant.  Only a page larger than the longest
 * run a contiguous charge may carry (MB_CONTIG_MAX_PAGES broker pages, far
 * beyond SQLite's largest page of 64 KiB) is left to SQLite's own default
 * cache, wrapped.
 *
 * Pinned pages are in the cache's hash table only; unpinned ones also on
 * its LRU list (head: most recently unpinned).  The shrinker, like the
 * kernel's shrinkers of clean page cache (super_cache_scan() and friends),
 * frees from the cold end of each purgeable cache's list, the caches asked
 * in proportion to what they hold unpinned; a page SQLite asks for again
 * is then a miss and SQLite reads it from the file.  The interface allows
 * that: "the page cache implementation may choose to evict unpinned pages
 * at any time".
 *
 * Locking.  Each cache has a mutex, taken by every method on it and by the
 * shrinker; `list_lock` guards the list of caches (the shrinker walks it,
 * xCreate and xDestroy change it) and is taken before a cache's mutex.  As
 * the shrinker rule of libmembroker demands (the kernel's GFP_NOFS), no
 * broker page is allocated while either is held: xFetch looks up under the
 * mutex, drops it to allocate, and takes it again to insert.  Pages are
 * freed under the mutex (a free never waits for the daemon).  `setup_lock`
 * guards installation and the table of slab caches; the shrinker never
 * takes it.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "mb_limits.h"
#include "membroker-sqlite.h"

/* Slab caches the page caches share: records by szExtra, contents by szPage. */
#define PCACHE_MAX_SLABS 16
/* First size of a cache's hash table (buckets; it doubles as pages come). */
#define PCACHE_MIN_BUCKETS 64
/* Cache size until SQLite sets one (xCachesize follows xCreate at once). */
#define PCACHE_DEFAULT_MAX_PAGES 100

struct page {
        sqlite3_pcache_page base; /* pBuf, pExtra: what SQLite holds (first) */
        struct page *hash_next;
        struct page *lru_prev, *lru_next;
        unsigned key;
        bool pinned;
        /* SQLite's szExtra bytes follow (8-aligned) */
};

struct counters {
        uint64_t hits, misses, allocated, recycled, alloc_failures;
        uint64_t shrinker_freed, shrinker_broker_pages, shrink_freed;
};

struct pcache {
        pthread_mutex_t lock;
        struct pcache *prev, *next; /* all caches, under list_lock */
        sqlite3_pcache *fallback;   /* SQLite's own cache (pages > MB_CONTIG_MAX_PAGES broker pages) */
        size_t sz_page, sz_extra;
        bool purgeable;
        size_t run_pages;           /* broker pages of a page's contents: 1 (a page), more (a run), 0 (slab) */
        mb_cache *records;
        mb_cache *contents;         /* when run_pages == 0 */
        struct page **buckets;
        size_t nbuckets;            /* a power of two */
        unsigned npages, npinned;
        unsigned long nunpinned;    /* also read by count() without the mutex */
        unsigned max_pages;
        struct page *lru_head, *lru_tail;
        struct counters st;
};

struct slab {
        bool contents;
        size_t size;
        mb_cache *cache;
};

static struct {
        pthread_mutex_t setup_lock;
        pthread_mutex_t list_lock;
        bool installed;
        bool initialized;           /* between xInit and xShutdown */
        mb_client *client;
        size_t page_size;
        sqlite3_pcache_methods2 dflt;
        struct mb_shrinker shrinker;
        bool shrinker_registered;
        struct slab slabs[PCACHE_MAX_SLABS];
        size_t nslabs;
        struct pcache *caches;      /* under list_lock */
        uint64_t ncaches, nfallback;
        struct counters closed;     /* of destroyed caches, under list_lock */
        uint64_t shrinker_scans;    /* atomic */
        uint64_t shrinker_slab_pages; /* atomic: slab pages the shrinker's mb_cache_shrink() released */
} g = {
        .setup_lock = PTHREAD_MUTEX_INITIALIZER,
        .list_lock = PTHREAD_MUTEX_INITIALIZER,
};

static void counters_add(struct counters *to, const struct counters *from) {
        to->hits += from->hits;
        to->misses += from->misses;
        to->allocated += from->allocated;
        to->recycled += from->recycled;
        to->alloc_failures += from->alloc_failures;
        to->shrinker_freed += from->shrinker_freed;
        to->shrinker_broker_pages += from->shrinker_broker_pages;
        to->shrink_freed += from->shrink_freed;
}

/* ---- pages ---- */

static inline void *page_extra(struct page *pg) {
        return pg + 1;
}

static size_t record_bytes(size_t sz_extra) {
        return sizeof(struct page) + ((sz_extra + 7) & ~(size_t) 7);
}

/*
 * A new page with zeroed extra bytes, or NULL.  SQLite tells a page it has
 * not set up by the first word of its extra being zero (the built-in cache
 * hands new pages out so), hence the zeroing, here and when recycling.
 * Called without the cache's mutex: this may wait for the daemon, whose
 * reclaim may run the shrinker.  @noretry: MB_ALLOC_NORETRY for the
 * contents (createFlag 1, "if it is easy and convenient").  A run is
 * always a trip to the daemon; it fails like a page at the tenant's limit
 * (and when the arena has no free run that long).
 */
static struct page *page_new(struct pcache *pc, bool noretry) {
        unsigned flags = noretry ? MB_ALLOC_NORETRY : 0;
        struct page *pg;
        void *buf;

        pg = mb_cache_alloc(pc->records);
        if (!pg)
                return NULL;
        if (pc->run_pages == 1)
                buf = mb_page_alloc_flags(g.client, flags);
        else if (pc->run_pages > 1)
                buf = mb_page_alloc_contig(g.client, pc->run_pages, flags);
        else
                buf = mb_cache_alloc(pc->contents);
        if (!buf) {
                mb_cache_free(pc->records, pg);
                return NULL;
        }
        memset(pg, 0, sizeof(*pg));
        pg->base.pBuf = buf;
        pg->base.pExtra = page_extra(pg);
        memset(page_extra(pg), 0, pc->sz_extra);
        return pg;
}

/* Never waits for the daemon (mb_page_free_contig() included), so it is
 * called under the cache's mutex and from the shrinker. */
static void page_free(struct pcache *pc, struct page *pg) {
        if (pc->run_pages == 1)
                (void) mb_page_free(g.client, pg->base.pBuf);
        else if (pc->run_pages > 1)
                (void) mb_page_free_contig(g.client, pg->base.pBuf, pc->run_pages);
        else
                mb_cache_free(pc->contents, pg->base.pBuf);
        mb_cache_free(pc->records, pg);
}

/* ---- the hash table and the LRU list (under pc->lock) ---- */

static inline size_t bucket_of(const struct pcache *pc, unsigned key) {
        return key & (pc->nbuckets - 1);
}

static struct page *hash_find(const struct pcache *pc, unsigned key) {
        struct page *pg = pc->buckets[bucket_of(pc, key)];

        while (pg && pg->key != key)
                pg = pg->hash_next;
        return pg;
}

/* Double the table when it holds more pages than buckets (a failed
 * allocation only leaves the chains longer). */
static void hash_grow(struct pcache *pc) {
        size_t n = pc->nbuckets * 2;
        struct page **b = calloc(n, sizeof(*b));

        if (!b)
                return;
        for (size_t i = 0; i < pc->nbuckets; i++)
                for (struct page *pg = pc->buckets[i], *next; pg; pg = next) {
                        next = pg->hash_next;
                        pg->hash_next = b[pg->key & (n - 1)];
                        b[pg->key & (n - 1)] = pg;
                }
        free(pc->buckets);
        pc->buckets = b;
        pc->nbuckets = n;
}

static void hash_insert(struct pcache *pc, struct page *pg) {
        size_t b;

        if (pc->npages >= pc->nbuckets)
                hash_grow(pc);
        b = bucket_of(pc, pg->key);
        pg->hash_next = pc->buckets[b];
        pc->buckets[b] = pg;
}

static void hash_remove(struct pcache *pc, struct page *pg) {
        struct page **pp = &pc->buckets[bucket_of(pc, pg->key)];

        while (*pp != pg)
                pp = &(*pp)->hash_next;
        *pp = pg->hash_next;
        pg->hash_next = NULL;
}

static void lru_push_head(struct pcache *pc, struct page *pg) {
        pg->lru_prev = NULL;
        pg->lru_next = pc->lru_head;
        if (pc->lru_head)
                pc->lru_head->lru_prev = pg;
        else
                pc->lru_tail = pg;
        pc->lru_head = pg;
        __atomic_store_n(&pc->nunpinned, pc->nunpinned + 1, __ATOMIC_RELAXED);
}

static void lru_remove(struct pcache *pc, struct page *pg) {
        if (pg->lru_prev)
                pg->lru_prev->lru_next = pg->lru_next;
        else
                pc->lru_head = pg->lru_next;
        if (pg->lru_next)
                pg->lru_next->lru_prev = pg->lru_prev;
        else
                pc->lru_tail = pg->lru_prev;
        pg->lru_prev = pg->lru_next = NULL;
        __atomic_store_n(&pc->nunpinned, pc->nunpinned - 1, __ATOMIC_RELAXED);
}

/* Take @pg out of the cache (hash, LRU or pinned count); not freed. */
static void page_unlink(struct pcache *pc, struct page *pg) {
        hash_remove(pc, pg);
        if (pg->pinned)
                pc->npinned--;
        else
                lru_remove(pc, pg);
        pc->npages--;
}

/* Free up to @n unpinned pages from the cold end; returns how many. */
static unsigned long lru_evict(struct pcache *pc, unsigned long n) {
        unsigned long freed = 0;

        while (freed < n && pc->lru_tail) {
                struct page *pg = pc->lru_tail;

                page_unlink(pc, pg);
                page_free(pc, pg);
                freed++;
        }
        return freed;
}

/* The cold end's page, out of the cache, for reuse as @key (recycling at
 * the cache size, as SQLite's own cache does). */
static struct page *lru_recycle(struct pcache *pc, unsigned key) {
        struct page *pg = pc->lru_tail;

        if (!pg)
                return NULL;
        page_unlink(pc, pg);
        pg->key = key;
        memset(page_extra(pg), 0, pc->sz_extra);
        pc->st.recycled++;
        return pg;
}

/* Put @pg into the cache as a pinned page. */
static void page_insert_pinned(struct pcache *pc, struct page *pg) {
        pg->pinned = true;
        hash_insert(pc, pg);
        pc->npages++;
        pc->npinned++;
}

/* ---- slab caches (under setup_lock) ---- */

static mb_cache *slab_get(bool contents, size_t size) {
        char name[64];
        mb_cache *cache;

        MB_LOCK_GUARD(&g.setup_lock);
        for (size_t i = 0; i < g.nslabs; i++)
                if (g.slabs[i].contents == contents && g.slabs[i].size == size)
                        return g.slabs[i].cache;
        if (g.nslabs == PCACHE_MAX_SLABS)
                return NULL;
        snprintf(name, sizeof(name), "sqlite-%s-%zu", contents ? "pages" : "records", size);
        cache = mb_cache_create(g.client, name, size, 0, MB_CACHE_RECLAIMABLE, NULL);
        if (!cache)
                return NULL;
        g.slabs[g.nslabs++] = (struct slab) { .contents = contents, .size = size, .cache = cache };
        return cache;
}

/* ---- sqlite3_pcache_methods2 ---- */

static int pcache_init(void *arg) {
        int r = g.dflt.xInit ? g.dflt.xInit(g.dflt.pArg) : SQLITE_OK;

        if (r == SQLITE_OK)
                g.initialized = true;
        return r;
}

static void pcache_shutdown(void *arg) {
        if (g.dflt.xShutdown)
                g.dflt.xShutdown(g.dflt.pArg);
        g.initialized = false;
}

static sqlite3_pcache *pcache_create(int sz_page, int sz_extra, int purgeable) {
        struct pcache *pc;

        if (sz_page <= 0 || sz_extra < 0)
                return NULL;
        pc = calloc(1, sizeof(*pc));
        if (!pc)
                return NULL;
        pthread_mutex_init(&pc->lock, NULL);
        pc->sz_page = (size_t) sz_page;
        pc->sz_extra = (size_t) sz_extra;
        pc->purgeable = purgeable;
        pc->max_pages = PCACHE_DEFAULT_MAX_PAGES;
        if (DIV_ROUND_UP(pc->sz_page, g.page_size) > MB_CONTIG_MAX_PAGES) {
                pc->fallback = g.dflt.xCreate(sz_page, sz_extra, purgeable);
                if (!pc->fallback)
                        goto fail;
        } else {
                pc->run_pages = pc->sz_page > g.page_size / 2 ? DIV_ROUND_UP(pc->sz_page, g.page_size) : 0;
                pc->records = slab_get(false, record_bytes(pc->sz_extra));
                if (!pc->records)
                        goto fail;
                if (pc->run_pages == 0) {
                        pc->contents = slab_get(true, pc->sz_page);
                        if (!pc->contents)
                                goto fail;
                }
                pc->nbuckets = PCACHE_MIN_BUCKETS;
                pc->buckets = calloc(pc->nbuckets, sizeof(*pc->buckets));
                if (!pc->buckets)
                        goto fail;
        }

        {
                /* A scope of its own: the gotos above must not jump past
                 * the guard's initialisation. */
                MB_LOCK_GUARD(&g.list_lock);
                MB_LIST_PREPEND(g.caches, pc);
                g.ncaches++;
                if (pc->fallback)
                        g.nfallback++;
                return (sqlite3_pcache *) pc;
        }

fail:
        pthread_mutex_destroy(&pc->lock);
        free(pc);
        return NULL;
}

static void pcache_cachesize(sqlite3_pcache *p, int n) {
        struct pcache *pc = (struct pcache *) p;

        if (pc->fallback) {
                g.dflt.xCachesize(pc->fallback, n);
                return;
        }
        MB_LOCK_GUARD(&pc->lock);
        pc->max_pages = n > 0 ? (unsigned) n : 0;
        /* A smaller cache gives its coldest unpinned pages up now. */
        if (pc->purgeable && pc->npages > pc->max_pages)
                (void) lru_evict(pc, pc->npages - pc->max_pages);
}

static int pcache_pagecount(sqlite3_pcache *p) {
        struct pcache *pc = (struct pcache *) p;

        if (pc->fallback)
                return g.dflt.xPagecount(pc->fallback);
        MB_LOCK_GUARD(&pc->lock);
        return (int) pc->npages;
}

/*
 * createFlag 0: look up only.  1: a new page if that is easy -- not when
 * nine tenths of the cache size are pinned (SQLite then spills dirty pages
 * and asks again with 2), and the contents charged with MB_ALLOC_NORETRY.
 * 2: every effort.  At the cache size an unpinned page is recycled; when no
 * memory can be had (the tenant at its limit, nothing left to reclaim) an
 * unpinned page of the cache is taken before giving up with NULL (SQLite
 * then spills or reports SQLITE_NOMEM).
 */
static sqlite3_pcache_page *pcache_fetch(sqlite3_pcache *p, unsigned key, int create) {
        struct pcache *pc = (struct pcache *) p;
        struct page *pg, *other;

        if (pc->fallback)
                return g.dflt.xFetch(pc->fallback, key, create);

        pthread_mutex_lock(&pc->lock);
        pg = hash_find(pc, key);
        if (pg) {
                if (!pg->pinned) {
                        lru_remove(pc, pg);
                        pg->pinned = true;
                        pc->npinned++;
                }
                pc->st.hits++;
                pthread_mutex_unlock(&pc->lock);
                return &pg->base;
        }
        pc->st.misses++;
        if (create == 0 ||
            (create == 1 && pc->purgeable && pc->npinned >= (unsigned) ((uint64_t) pc->max_pages * 9 / 10))) {
                pthread_mutex_unlock(&pc->lock);
                return NULL;
        }
        if (pc->purgeable && pc->npages >= pc->max_pages && (pg = lru_recycle(pc, key))) {
                page_insert_pinned(pc, pg);
                pthread_mutex_unlock(&pc->lock);
                return &pg->base;
        }
        pthread_mutex_unlock(&pc->lock);

        pg = page_new(pc, create == 1);

        pthread_mutex_lock(&pc->lock);
        if (!pg) {
                if (pc->purgeable && (pg = lru_recycle(pc, key))) {
                        page_insert_pinned(pc, pg);
                        pthread_mutex_unlock(&pc->lock);
                        return &pg->base;
                }
                pc->st.alloc_failures++;
                pthread_mutex_unlock(&pc->lock);
                return NULL;
        }
        /* SQLite does not fetch one page of a cache from two threads at
         * once, but should it: one page per key. */
        other = hash_find(pc, key);
        if (other) {
                page_free(pc, pg);
                if (!other->pinned) {
                        lru_remove(pc, other);
                        other->pinned = true;
                        pc->npinned++;
                }
                pthread_mutex_unlock(&pc->lock);
                return &other->base;
        }
        pg->key = key;
        page_insert_pinned(pc, pg);
        pc->st.allocated++;
        pthread_mutex_unlock(&pc->lock);
        return &pg->base;
}

static void pcache_unpin(sqlite3_pcache *p, sqlite3_pcache_page *page, int discard) {
        struct pcache *pc = (struct pcache *) p;
        struct page *pg = (struct page *) page;

        if (pc->fallback) {
                g.dflt.xUnpin(pc->fallback, page, discard);
                return;
        }
        MB_LOCK_GUARD(&pc->lock);
        if (!pg->pinned) /* no reference counting: unpinned already */
                return;
        if (discard || (pc->purgeable && pc->npages > pc->max_pages)) {
                page_unlink(pc, pg);
                page_free(pc, pg);
                return;
        }
        pg->pinned = false;
        pc->npinned--;
        lru_push_head(pc, pg);
}

static void pcache_rekey(sqlite3_pcache *p, sqlite3_pcache_page *page, unsigned old_key, unsigned new_key) {
        struct pcache *pc = (struct pcache *) p;
        struct page *pg = (struct page *) page, *other;

        if (pc->fallback) {
                g.dflt.xRekey(pc->fallback, page, old_key, new_key);
                return;
        }
        MB_LOCK_GUARD(&pc->lock);
        other = hash_find(pc, new_key);
        if (other && other != pg) {
                page_unlink(pc, other);
                page_free(pc, other);
        }
        hash_remove(pc, pg);
        pg->key = new_key;
        pg->hash_next = pc->buckets[bucket_of(pc, new_key)];
        pc->buckets[bucket_of(pc, new_key)] = pg;
}

static void pcache_truncate(sqlite3_pcache *p, unsigned limit) {
        struct pcache *pc = (struct pcache *) p;

        if (pc->fallback) {
                g.dflt.xTruncate(pc->fallback, limit);
                return;
        }
        MB_LOCK_GUARD(&pc->lock);
        for (size_t i = 0; i < pc->nbuckets; i++)
                for (struct page *pg = pc->buckets[i], *next; pg; pg = next) {
                        next = pg->hash_next;
                        if (pg->key >= limit) {
                                page_unlink(pc, pg);
                                page_free(pc, pg);
                        }
                }
}

static void pcache_destroy(sqlite3_pcache *p) {
        struct pcache *pc = (struct pcache *) p;

        {
                MB_LOCK_GUARD(&g.list_lock);
                MB_LIST_REMOVE(g.caches, pc);
                g.ncaches--;
                if (pc->fallback)
                        g.nfallback--;
                /* The shrinker may be inside this cache: wait for it. */
                pthread_mutex_lock(&pc->lock);
                counters_add(&g.closed, &pc->st);
                pthread_mutex_unlock(&pc->lock);
        }
        if (pc->fallback) {
                g.dflt.xDestroy(pc->fallback);
        } else {
                for (size_t i = 0; i < pc->nbuckets; i++)
                        for (struct page *pg = pc->buckets[i], *next; pg; pg = next) {
                                next = pg->hash_next;
                                page_free(pc, pg);
                        }
                free(pc->buckets);
        }
        pthread_mutex_destroy(&pc->lock);
        free(pc);
}

static void pcache_shrink(sqlite3_pcache *p) {
        struct pcache *pc = (struct pcache *) p;

        if (pc->fallback) {
                g.dflt.xShrink(pc->fallback);
                return;
        }
        MB_LOCK_GUARD(&pc->lock);
        if (pc->purgeable)
                pc->st.shrink_freed += lru_evict(pc, ULONG_MAX);
}

static const sqlite3_pcache_methods2 pcache_methods = {
        .iVersion = 2,
        .xInit = pcache_init,
        .xShutdown = pcache_shutdown,
        .xCreate = pcache_create,
        .xCachesize = pcache_cachesize,
        .xPagecount = pcache_pagecount,
        .xFetch = pcache_fetch,
        .xUnpin = pcache_unpin,
        .xRekey = pcache_rekey,
        .xTruncate = pcache_truncate,
        .xDestroy = pcache_destroy,
        .xShrink = pcache_shrink,
};

/* ---- the shrinker ---- */

/* Broker pages @n unpinned pages of @pc take (contents only). */
static unsigned long pcache_broker_pages(const struct pcache *pc, unsigned long n) {
        if (pc->run_pages > 0)
                return n * pc->run_pages;
        return (unsigned long) DIV_ROUND_UP((uint64_t) n * pc->sz_page, g.page_size);
}

/* count_objects(): the broker pages the unpinned pages of every purgeable
 * cache take. */
static unsigned long pcache_shrinker_count(void *userdata) {
        unsigned long n = 0;

        MB_LOCK_GUARD(&g.list_lock);
        for (struct pcache *pc = g.caches; pc; pc = pc->next)
                if (!pc->fallback && pc->purgeable)
                        n += pcache_broker_pages(pc, __atomic_load_n(&pc->nunpinned, __ATOMIC_RELAXED));
        return n;
}

/* Remember @cache among the slab caches to shrink after a scan. */
static void note_slab(mb_cache **v, size_t *n, mb_cache *cache) {
        if (!cache)
                return;
        for (size_t i = 0; i < *n; i++)
                if (v[i] == cache)
                        return;
        if (*n < PCACHE_MAX_SLABS)
                v[(*n)++] = cache;
}

/*
 * scan_objects(): free the coldest unpinned pages, each purgeable cache in
 * proportion to what it holds unpinned, then give the slabs this emptied
 * back (mb_cache_shrink()).  Returns the broker pages released.
 */
static unsigned long pcache_shrinker_scan(void *userdata, unsigned long nr_to_scan) {
        mb_cache *slabs[PCACHE_MAX_SLABS];
        size_t nslabs = 0;
        unsigned long total = 0, freed = 0;

        __atomic_fetch_add(&g.shrinker_scans, 1, __ATOMIC_RELAXED);
        {
                MB_LOCK_GUARD(&g.list_lock);

                for (struct pcache *pc = g.caches; pc; pc = pc->next)
                        if (!pc->fallback && pc->purgeable)
                                total += pcache_broker_pages(pc, __atomic_load_n(&pc->nunpinned, __ATOMIC_RELAXED));
                for (struct pcache *pc = g.caches; pc && total > 0 && freed < nr_to_scan; pc = pc->next) {
                        unsigned long share, want, got;

                        if (pc->fallback || !pc->purgeable)
                                continue;
                        MB_LOCK_GUARD(&pc->lock);
                        share = pcache_broker_pages(pc, pc->nunpinned);
                        if (share == 0)
                                continue;
                        /* Rounded up, so that a small cache is reached too. */
                        share = (unsigned long) MB_MIN((uint64_t) share,
                                                       DIV_ROUND_UP((uint64_t) nr_to_scan * share, total));
                        share = MB_MIN(share, nr_to_scan - freed);
                        /* Whole runs: a run of 16 pages asked for one page
                         * gives 16 (the kernel frees a high-order page
                         * whole too). */
                        want = pc->run_pages > 0 ? DIV_ROUND_UP(share, pc->run_pages)
                                                 : (unsigned long) (share * (g.page_size / pc->sz_page));
                        got = lru_evict(pc, want);
                        pc->st.shrinker_freed += got;
                        if (pc->run_pages > 0) {
                                pc->st.shrinker_broker_pages += got * pc->run_pages;
                                freed += got * pc->run_pages;
                        }
                        note_slab(slabs, &nslabs, pc->records);
                        note_slab(slabs, &nslabs, pc->contents);
                }
        }
        /* The slab caches live until mb_sqlite_uninstall(), which
         * unregisters this shrinker first. */
        for (size_t i = 0; i < nslabs; i++) {
                size_t n = mb_cache_shrink(slabs[i]);

                freed += n;
                __atomic_fetch_add(&g.shrinker_slab_pages, n, __ATOMIC_RELAXED);
        }
        return freed;
}

/* ---- the public functions ---- */

int mb_sqlite_install(mb_client *c, const struct mb_sqlite_options *o) {
        sqlite3_pcache_methods2 dflt;
        unsigned flags = o ? o->flags : 0;
        int r;

        if (!c || (flags & ~MB_SQLITE_NO_SHRINKER))
                return -EINVAL;
        MB_LOCK_GUARD(&g.setup_lock);
        if (g.installed)
                return -EEXIST;
        if (sqlite3_config(SQLITE_CONFIG_GETPCACHE2, &dflt) != SQLITE_OK)
                return -EBUSY;
        if (dflt.xInit == pcache_init)
                return -EEXIST;
        g.client = c;
        g.page_size = mb_page_size(c);
        g.dflt = dflt;
        if (sqlite3_config(SQLITE_CONFIG_PCACHE2, &pcache_methods) != SQLITE_OK)
                return -EBUSY;
        if (!(flags & MB_SQLITE_NO_SHRINKER)) {
                g.shrinker = (struct mb_shrinker) {
                        .count = pcache_shrinker_count,
                        .scan = pcache_shrinker_scan,
                };
                r = mb_register_shrinker(c, &g.shrinker);
                if (r < 0) {
                        (void) sqlite3_config(SQLITE_CONFIG_PCACHE2, &g.dflt);
                        return r;
                }
                g.shrinker_registered = true;
        }
        g.installed = true;
        return 0;
}

int mb_sqlite_uninstall(void) {
        MB_LOCK_GUARD(&g.setup_lock);
        if (!g.installed)
                return -ENOENT;
        {
                MB_LOCK_GUARD(&g.list_lock);
                if (g.ncaches > 0)
                        return -EBUSY;
        }
        if (g.initialized || sqlite3_config(SQLITE_CONFIG_PCACHE2, &g.dflt) != SQLITE_OK)
                return -EBUSY;
        if (g.shrinker_registered) {
                /* Waits for a running scan; the shrinker takes no setup_lock. */
                (void) mb_unregister_shrinker(g.client, &g.shrinker);
                g.shrinker_registered = false;
        }
        for (size_t i = 0; i < g.nslabs; i++)
                (void) mb_cache_destroy(g.slabs[i].cache);
        g.nslabs = 0;
        g.client = NULL;
        g.installed = false;
        return 0;
}

int mb_sqlite_stats(struct mb_sqlite_stats *ret) {
        struct counters sum = { 0 };

        if (!ret)
                return -EINVAL;
        MB_LOCK_GUARD(&g.setup_lock);
        if (!g.installed)
                return -ENOENT;
        memset(ret, 0, sizeof(*ret));
        {
                MB_LOCK_GUARD(&g.list_lock);

                counters_add(&sum, &g.closed);
                ret->caches = g.ncaches;
                ret->fallback_caches = g.nfallback;
                for (struct pcache *pc = g.caches; pc; pc = pc->next) {
                        if (pc->fallback)
                                continue;
                        MB_LOCK_GUARD(&pc->lock);
                        counters_add(&sum, &pc->st);
                        ret->pages += pc->npages;
                        ret->pinned_pages += pc->npinned;
                        ret->unpinned_pages += pc->nunpinned;
                        ret->broker_pages += pc->npages * pc->run_pages;
                }
        }
        ret->hits = sum.hits;
        ret->misses = sum.misses;
        ret->allocated = sum.allocated;
        ret->recycled = sum.recycled;
        ret->alloc_failures = sum.alloc_failures;
        ret->shrinker_scans = __atomic_load_n(&g.shrinker_scans, __ATOMIC_RELAXED);
        ret->shrinker_freed = sum.shrinker_freed;
        ret->shrinker_broker_pages = sum.shrinker_broker_pages +
                                     __atomic_load_n(&g.shrinker_slab_pages, __ATOMIC_RELAXED);
        ret->shrink_freed = sum.shrink_freed;
        return 0;
}
