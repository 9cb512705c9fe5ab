/* SPDX-License-Identifier: MIT */
/*
 * membroker.h - libmembroker, the client library of membrokerd.
 *
 * A client attaches to one (leaf) tenant of the broker and receives memory
 * pages that live in the tenant's shared arena.  Pages are charged to the
 * tenant in batches of ChargeBatch pages and kept in a per-CPU stock, so
 * allocating and freeing from the stock makes no system call and never talks
 * to the daemon.
 *
 * Errors: functions return a negative errno (or NULL and set errno); the
 * reason in words is available from mb_last_error() in the calling thread.
 *
 * Threads: every function may be called from any thread.
 * fork(): the child must not use the parent's connection; it may mb_connect()
 * anew.  Pages the parent holds stay the parent's.
 */
#ifndef MEMBROKER_H
#define MEMBROKER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MB_DEFAULT_SOCKET_PATH "/run/membroker/membroker.sock"
#define MB_SOCKET_ENV "MEMBROKER_SOCKET"

typedef struct mb_client mb_client;
typedef uint64_t mb_handle_t; /* page index in the tenant's arena */

/**
 * mb_connect - attach to a tenant.  @socket_path NULL means $MEMBROKER_SOCKET
 * or MB_DEFAULT_SOCKET_PATH; @tenant NULL means "auto" (the tenant whose
 * Cgroup= matches the caller's cgroup).  Returns 0 and *@ret, or -errno
 * (-EACCES refused, -ENOENT no such tenant, -ECONNREFUSED no daemon ...).
 */
int mb_connect(const char *socket_path, const char *tenant, mb_client **ret);

/* Return every page and stocked page to the daemon and disconnect. */
void mb_close(mb_client *c);

/* One page, from this CPU's stock; NULL with errno set (ENOMEM at the
 * tenant's limit) when none can be had. */
void *mb_page_alloc(mb_client *c);

/* @n pages into @pages: 0, or -errno with nothing allocated. */
int mb_page_alloc_bulk(mb_client *c, void **pages, size_t n);

/* Give a page back to the stock.  -EINVAL when @page is not a page of this
 * client's arena. */
int mb_page_free(mb_client *c, void *page);
int mb_page_free_bulk(mb_client *c, void **pages, size_t n);

/* Handles name a page inside the tenant's arena; any process of the same
 * tenant can turn a handle back into a pointer. */
mb_handle_t mb_page_to_handle(const mb_client *c, const void *page);
void *mb_handle_to_page(const mb_client *c, mb_handle_t handle);

size_t mb_page_size(const mb_client *c);
unsigned mb_charge_batch(const mb_client *c);
const char *mb_tenant_path(const mb_client *c);

/* The message of the last failure in this thread ("" when none). */
const char *mb_last_error(void);

/* ---- Pressure (cooperative reclaim) ----
 * Shaped like kernel shrinkers: count() says how many pages could be freed,
 * scan() frees up to @nr_to_scan and returns how many it freed (through
 * mb_page_free()).  The library answers the daemon's Reclaim by returning
 * stocked pages first, then calling shrinkers. */
struct mb_shrinker {
        unsigned long (*count)(void *userdata);
        unsigned long (*scan)(void *userdata, unsigned long nr_to_scan);
        void *userdata;
};
int mb_register_shrinker(mb_client *c, const struct mb_shrinker *s);
int mb_unregister_shrinker(mb_client *c, const struct mb_shrinker *s);

/* Tenant events ("high", "max", "oom", ...) delivered to a callback. */
typedef void (*mb_event_fn)(mb_client *c, const char *event, uint64_t count, void *userdata);
int mb_set_event_callback(mb_client *c, mb_event_fn fn, void *userdata);

/* Daemon-initiated messages are handled by a background thread by default.
 * Applications with their own event loop pass MB_CONNECT_NO_THREAD to
 * mb_connect_ex() and instead poll mb_get_fd() for POLLIN and call
 * mb_process(). */
#define MB_CONNECT_NO_THREAD 0x1u
int mb_connect_ex(const char *socket_path, const char *tenant, unsigned flags, mb_client **ret);
int mb_get_fd(mb_client *c);
int mb_process(mb_client *c);

/* ---- Slab caches on broker pages ---- */
typedef struct mb_cache mb_cache;
#define MB_CACHE_RECLAIMABLE 0x1u /* pages count as slab_reclaimable */
#define MB_CACHE_DEBUG 0x2u       /* red zones, poisoning, double-free checks */

mb_cache *mb_cache_create(mb_client *c, const char *name, size_t object_size, size_t align,
                          unsigned flags, void (*ctor)(void *object));
/* Reports (to stderr) and returns the number of live objects left. */
size_t mb_cache_destroy(mb_cache *cache);
void *mb_cache_alloc(mb_cache *cache);
void mb_cache_free(mb_cache *cache, void *object);
/* Give empty slabs back; returns the number of pages released. */
size_t mb_cache_shrink(mb_cache *cache);

#ifdef __cplusplus
}
#endif
#endif
