/* SPDX-License-Identifier: MIT */
/*
 * membroker-sqlite.h - libmembroker-sqlite: SQLite's page cache on broker
 * pages.
 *
 * mb_sqlite_install() registers a page cache (SQLITE_CONFIG_PCACHE2) whose
 * pages live in the tenant of a libmembroker client: the page contents in
 * broker pages (objects of a slab cache for a database page up to half a
 * broker page, one broker page up to a broker page, a contiguous run of
 * broker pages (mb_page_alloc_contig()) for a larger one), the
 * per-page bookkeeping and SQLite's per-page extra in a reclaimable slab
 * cache.  Everything the cache holds is charged to the tenant.
 *
 * Pages SQLite has unpinned sit on a least-recently-used list per cache,
 * and a shrinker (mb_register_shrinker()) gives them back from the cold end
 * when the daemon reclaims from the tenant, as the kernel's shrinkers give
 * back clean page cache: SQLite reads a page it lost again from the
 * database file.  Pinned pages (those SQLite uses, and every dirty page)
 * are never taken.  Protection (MemoryLow=, MemoryMin=) keeps the daemon
 * from asking, so it keeps a hot cache from a noisy neighbour.
 *
 * Only a database page larger than the longest contiguous run (262144
 * broker pages; none of SQLite's page sizes) would use SQLite's own page
 * cache; mb_sqlite_stats() counts such caches.
 */
#ifndef MEMBROKER_SQLITE_H
#define MEMBROKER_SQLITE_H

#include <stdint.h>

#include <membroker.h>

#ifdef __cplusplus
extern "C" {
#endif

/* No shrinker: unpinned pages are never given back under pressure (only
 * SQLite's own cache-size limit and xShrink free them). */
#define MB_SQLITE_NO_SHRINKER 0x1u

struct mb_sqlite_options {
        unsigned flags; /* MB_SQLITE_* */
};

/**
 * mb_sqlite_install - make SQLite keep its page caches on @c's broker pages.
 * @c: a connected client; it must stay connected until mb_sqlite_uninstall().
 * @o: options, or NULL for the defaults.
 *
 * Call it before sqlite3_initialize() (or after sqlite3_shutdown()), once
 * per process, with SQLite built thread-safe when several threads use it.
 * Registers the cache shrinker on @c unless MB_SQLITE_NO_SHRINKER.
 *
 * Return: 0; -EINVAL (no client, unknown flags), -EEXIST (already
 * installed), -EBUSY (SQLite is initialized: sqlite3_config() refused),
 * -ENOMEM.
 */
int mb_sqlite_install(mb_client *c, const struct mb_sqlite_options *o);

/**
 * mb_sqlite_uninstall - give SQLite its default page cache back, unregister
 * the shrinker and destroy the slab caches.
 *
 * Call it after every database is closed and sqlite3_shutdown() returned,
 * before mb_close() of the client.
 *
 * Return: 0; -ENOENT (not installed), -EBUSY (a page cache is still open or
 * SQLite is still initialized; nothing changed).
 */
int mb_sqlite_uninstall(void);

struct mb_sqlite_stats {
        uint64_t caches;                /* page caches open now */
        uint64_t fallback_caches;       /* of those: pages larger than the longest contiguous run, in SQLite's own cache */
        uint64_t pages;                 /* database pages held now, pinned and unpinned */
        uint64_t pinned_pages;          /* in use by SQLite: never given back */
        uint64_t unpinned_pages;        /* on the LRU lists: what the shrinker may take */
        uint64_t broker_pages;          /* whole broker pages holding page contents now (runs included) */
        uint64_t hits;                  /* fetches that found the page */
        uint64_t misses;                /* fetches that did not (SQLite reads the page, or asked only) */
        uint64_t allocated;             /* new pages taken */
        uint64_t recycled;              /* unpinned pages reused for another page at the cache size */
        uint64_t alloc_failures;        /* fetches that returned no page for want of memory */
        uint64_t shrinker_scans;        /* scan() calls of the shrinker */
        uint64_t shrinker_freed;        /* database pages the shrinker gave back */
        uint64_t shrinker_broker_pages; /* broker pages those released (contents and emptied slabs) */
        uint64_t shrink_freed;          /* database pages freed by SQLite's xShrink (sqlite3_db_release_memory()) */
};

/**
 * mb_sqlite_stats - a snapshot of the page caches, cumulative counters
 * included (those of caches already destroyed too).
 * @ret: filled in.
 *
 * Return: 0, or -ENOENT when not installed.
 */
int mb_sqlite_stats(struct mb_sqlite_stats *ret);

#ifdef __cplusplus
}
#endif
#endif
