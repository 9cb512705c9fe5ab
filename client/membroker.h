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
 * Threads: every function may be called from any thread, except that
 * mb_close() must not race with other calls on the same client.  No
 * function is async-signal-safe (a signal handler that allocates while the
 * interrupted thread holds its CPU's stock would wait forever).
 *
 * The stock: each CPU keeps up to 2 * charge_batch pre-charged free pages
 * (mb_page_alloc() pops, mb_page_free() pushes; no system call, no daemon).
 * An empty stock charges one batch, a stock that would pass 2 * charge_batch
 * returns one batch.  Stocked pages count in the tenant's usage (and show as
 * `stock` in its stat), so a tenant's usage may exceed what the application
 * holds by at most
 *         ncpus * 3 * charge_batch pages per client
 * (2 * charge_batch per CPU stock, and a batch per CPU in the spill that
 * passes pages one CPU frees to another that allocates them; far from
 * every limit the spill may hold 1/16 of the headroom, up to 16 MiB)
 * (the worst-case over-charge; plus one batch in flight per thread that is
 * refilling, the library's own included: a stock that falls below one
 * batch asks the library's thread to charge ahead of need what fills it to
 * its limit, while the last Grant leaves room for that and for all the
 * stocks may hold before the tenant's nearest high or max; MEMBROKER_REFILL=0 turns that
 * off).  A free never
 * waits for the daemon.  charge_batch comes from the daemon and may change while
 * connected (mb_charge_batch() tells the current one): a tenant with
 * nothing limited up the tree gets 4 x ChargeBatch, and a limit appearing
 * or ChargeBatch= changing brings the new batch with the next charge (never
 * more than the Welcome allowed); the stocks are trimmed to the new bound
 * at once.  At a limit the library first takes the pages of its other
 * CPUs' stocks and charges exactly what is missing, as the kernel's
 * try_charge() does, so an application can use its tenant's whole max.
 * A CPU's stock is locked with a restartable sequence (rseq: no atomic
 * instruction) where glibc registered rseq and the kernel offers the rseq
 * membarrier (x86-64, Linux >= 5.10), else with one atomic exchange;
 * MEMBROKER_RSEQ=0 in the environment forces the latter.
 *
 * Page contents: pages the daemon hands out are zero (a page that leaves a
 * client is hole-punched), but a page from the stock may hold data the same
 * client freed earlier.  Treat mb_page_alloc() like malloc(), not calloc().
 *
 * fork(): the child must not use the parent's connection.  In the child
 * every call on an inherited client fails with -ECHILD (its stocks are
 * emptied, so nothing the parent owns is handed out twice); the child may
 * mb_close() it (which only releases the child's copy: the parent stays
 * connected) and mb_connect() anew.  Pages the parent holds stay the
 * parent's; their memory stays mapped in the child (MAP_SHARED), and a child
 * that connects to the same tenant can reach them by handle.
 *
 * A restart of the daemon: when the connection ends without an error (the
 * daemon exited, was killed or restarted), the library reconnects by
 * itself, with backoff, for up to $MEMBROKER_RECONNECT_TIMEOUT_SEC seconds
 * (default 60; 0 turns reconnecting off), and re-claims every page it holds
 * (those the application holds and those in the stocks).  A daemon that kept
 * its memory over the restart (systemd's fd store, membrokerd(8)) gives the
 * same arena back: pointers stay valid, contents intact, usage unchanged;
 * the calls that needed the daemon meanwhile wait (a Charge lost with the
 * old daemon is sent again).  Fast paths never wait.
 *
 * Losing the daemon: when the session cannot go on (the daemon closed it
 * after a protocol error, came back without this client's memory, or did
 * not come back in time), the daemon frees every page the client held;
 * calls that need the daemon then fail with the reason in mb_last_error(),
 * and pages still held must no longer be used.
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
#define MB_HANDLE_INVALID UINT64_MAX

/**
 * mb_connect - attach to a tenant.  @socket_path NULL means $MEMBROKER_SOCKET
 * or MB_DEFAULT_SOCKET_PATH; @tenant NULL means "auto" (the tenant whose
 * Cgroup= matches the caller's cgroup).  Returns 0 and *@ret, or -errno
 * (-EACCES refused, -ENOENT no such tenant, -ECONNREFUSED no daemon ...).
 */
int mb_connect(const char *socket_path, const char *tenant, mb_client **ret);

/**
 * mb_close - disconnect; the daemon uncharges and frees every page the
 * client held, in use or stocked, at once (their contents are destroyed).
 * Waits (a few seconds at most) until the daemon has seen the disconnect,
 * so the tenant's usage is down when it returns.  NULL is a no-op.
 */
void mb_close(mb_client *c);

/* One page of mb_page_size() bytes, from this CPU's stock; NULL with errno
 * set when none can be had: ENOMEM at the tenant's limit (mb_last_error()
 * names the ancestor at max), ECHILD in a fork() child, or the error that
 * ended the session. */
void *mb_page_alloc(mb_client *c);

/* @n pages into @pages: 0, or -errno with nothing allocated (all or
 * nothing: at a limit, -ENOMEM and no page charged for the call). */
int mb_page_alloc_bulk(mb_client *c, void **pages, size_t n);

/* Allocation flags, after the kernel's gfp flags for memcg charges. */
/* GFP_NOWAIT: never wait -- served from this CPU's stock or not at all
 * (EAGAIN); no trip to the daemon, so no reclaim and no throttle. */
#define MB_ALLOC_NOWAIT 0x1u
/* __GFP_NORETRY: at a limit the daemon drains the stocks and reclaims
 * once; if that is not enough the allocation fails with ENOMEM, without an
 * `oom` event and without OOMPolicy=kill killing anyone. */
#define MB_ALLOC_NORETRY 0x2u

/* mb_page_alloc() with MB_ALLOC_* @flags (0: the same as mb_page_alloc());
 * NULL with errno EAGAIN (MB_ALLOC_NOWAIT, the stock is empty), ENOMEM,
 * EINVAL (unknown flags) or as mb_page_alloc(). */
void *mb_page_alloc_flags(mb_client *c, unsigned flags);

/* mb_page_alloc_bulk() with MB_ALLOC_* @flags: -EAGAIN when
 * MB_ALLOC_NOWAIT and this CPU's stock holds fewer than @n pages. */
int mb_page_alloc_bulk_flags(mb_client *c, void **pages, size_t n, unsigned flags);

/* Give a page back to the stock (a full stock returns a batch to the
 * daemon).  -EINVAL when @page is not a page of this client's arena.  Freeing
 * a page this client does not hold is a protocol error: the daemon refuses it
 * and ends the session. */
int mb_page_free(mb_client *c, void *page);
/* @n pages: -EINVAL (nothing freed) when one is not a page of the arena. */
int mb_page_free_bulk(mb_client *c, void **pages, size_t n);

/* Handles name a page inside the tenant's arena; any process of the same
 * tenant can turn a handle back into a pointer (zero-copy sharing inside a
 * tenant; only the client that allocated the page may free it).
 * mb_page_to_handle() returns MB_HANDLE_INVALID for a pointer outside the
 * arena, mb_handle_to_page() NULL (errno EINVAL) for a handle outside it. */
mb_handle_t mb_page_to_handle(const mb_client *c, const void *page);
void *mb_handle_to_page(const mb_client *c, mb_handle_t handle);

size_t mb_page_size(const mb_client *c);
unsigned mb_charge_batch(const mb_client *c);
const char *mb_tenant_path(const mb_client *c);
/* The daemon's id of this connection (as logs and tools show it). */
uint64_t mb_client_id(const mb_client *c);

/* The message of the last failure in this thread ("" when none). */
const char *mb_last_error(void);

/* ---- Pressure (cooperative reclaim) ----
 * When the tenant (or an ancestor, or the whole broker) is at its max, above
 * its high, asked to reclaim (membrokerctl reclaim) or the host is under
 * memory pressure, the daemon asks the tenant's clients for pages back
 * (Reclaim), or for all their stocked pages (Drain).  The library answers a
 * Reclaim of N pages with unused stocked pages first (every CPU's), then
 * calls the registered shrinkers, and returns what they freed -- never more
 * than N.  A client that does not answer within the broker's
 * ReclaimTimeoutMSec= is skipped; a tenant whose clients cannot give enough
 * gets ENOMEM (or, with OOMPolicy=kill, its largest client is killed).
 *
 * Shrinkers are shaped like kernel shrinkers: count() says how many pages
 * could be freed, scan() frees up to @nr_to_scan pages (with mb_page_free())
 * and returns how many it freed.  Several shrinkers are asked in proportion
 * to their count().  A shrinker runs on the library's thread, or with
 * MB_CONNECT_NO_THREAD in mb_process() or in a thread of the client that is
 * waiting for the daemon (as an allocating task runs direct reclaim in the
 * kernel), and may run concurrently with the application's threads and
 * with itself.  So, as with the kernel's GFP_NOFS rule: a shrinker must not
 * wait for a lock that the application holds while it allocates broker
 * pages (never allocate while holding a lock your shrinker takes), and must
 * not allocate broker pages itself (mb_page_alloc() beyond the stock fails
 * with EDEADLK there). */
struct mb_shrinker {
        unsigned long (*count)(void *userdata);
        unsigned long (*scan)(void *userdata, unsigned long nr_to_scan);
        void *userdata;
};
/* @s must stay valid until unregistered.  -EEXIST when registered twice,
 * -EINVAL without count() and scan(); -ENOENT when unregistering an unknown
 * shrinker.  Unregistering waits until no reclaim runs the shrinkers (so it
 * must not be called from a shrinker). */
int mb_register_shrinker(mb_client *c, const struct mb_shrinker *s);
int mb_unregister_shrinker(mb_client *c, const struct mb_shrinker *s);

/* Tenant events ("low", "high", "max", "oom", "oom_kill", "overrun": memory.events of
 * the client's tenant and of the ancestors where they happen, with the
 * tenant's hierarchical count) delivered to a callback; it is called
 * without library locks held (from the library's thread, or with
 * MB_CONNECT_NO_THREAD from mb_process() and the end of a call that talked
 * to the daemon) and may call into the library. */
typedef void (*mb_event_fn)(mb_client *c, const char *event, uint64_t count, void *userdata);
int mb_set_event_callback(mb_client *c, mb_event_fn fn, void *userdata);

/* ---- Pressure stall triggers (memory.pressure) ----
 * The daemon keeps, per tenant and hierarchically, the time its clients
 * stall on memory (an application thread waiting for a charge: a reclaim
 * round, a wait at a max, the MemoryHigh= throttle), as the kernel's PSI
 * keeps memory.pressure for a cgroup; see GetPressure() in
 * org.membroker1(5) and `membrokerctl pressure`.  A client may watch its
 * own tenant's pressure as a program watches a cgroup's memory.pressure
 * with a PSI trigger. */

/**
 * mb_pressure_trigger - arm a PSI trigger on the client's tenant.
 * @c: a connected client
 * @trigger: "some THRESHOLD_USEC WINDOW_USEC" or "full ...", as written to
 *   memory.pressure: an event when the tenant's stall (some: at least one
 *   of its clients stalled; full: all of them) within any window of
 *   WINDOW_USEC (500000..10000000) reaches THRESHOLD_USEC (1..window)
 *
 * The daemon checks the window ten times per window length and sends at
 * most one event per window while the stall stays above the threshold.
 * Each event makes the returned descriptor readable (an eventfd, non
 * blocking, close-on-exec: poll it for POLLIN and read 8 bytes to reset
 * it; the value read counts the events since the last read).  Events
 * arrive through the library's thread, or with MB_CONNECT_NO_THREAD through
 * mb_process().  After a daemon restart the library arms the trigger
 * again.  The descriptor belongs to the library: release it with
 * mb_pressure_trigger_close(), not close(); mb_close() releases the rest.
 *
 * Returns the descriptor (>= 0), or a negative errno: -EINVAL for a
 * malformed trigger or when the client holds 16 already, -EOPNOTSUPP when
 * the daemon has no pressure triggers (an older one), or the error that
 * ended the session (mb_last_error() says more).
 */
int mb_pressure_trigger(mb_client *c, const char *trigger);

/**
 * mb_pressure_trigger_close - disarm the trigger of @fd (from
 * mb_pressure_trigger()) and close @fd.  Returns 0, -EBADF when @fd is no
 * trigger of @c; the descriptor is released even when the session is over
 * (the daemon dropped its triggers then).
 */
int mb_pressure_trigger_close(mb_client *c, int fd);

/* Daemon-initiated messages are read and handled by a thread the library
 * starts per client (it takes no signals).  Applications with their own
 * event loop pass MB_CONNECT_NO_THREAD to mb_connect_ex() and instead poll
 * mb_get_fd() for POLLIN and call mb_process() when it is readable (like
 * sd_bus_get_fd()/sd_bus_process()); a Reclaim that arrives while one of
 * their threads waits for the daemon is answered by that thread.  mb_close()
 * joins the library's thread: do not call it from a callback or shrinker. */
#define MB_CONNECT_NO_THREAD 0x1u
int mb_connect_ex(const char *socket_path, const char *tenant, unsigned flags, mb_client **ret);
/* A descriptor to poll for POLLIN (an epoll set of the connection's socket
 * and of an eventfd the library makes readable when a message it already
 * read waits for mb_process()). */
int mb_get_fd(mb_client *c);
/* Read and handle what the daemon sent, without blocking: answers Reclaim
 * and Drain, calls the event callback.  Returns the number of messages
 * read (0 when none, or when another thread is reading and handles them),
 * or -errno when the session is lost. */
int mb_process(mb_client *c);

/* ---- Slab caches on broker pages ----
 * Objects of one size carved out of broker pages (SLUB-like: per-CPU free
 * lists, partial slabs per cache).  Slab pages are ordinary pages of this
 * client (they count in `pages` and in the tenant's usage); live object
 * bytes show as `slab_reclaimable` / `slab_unreclaimable` in the tenant's
 * stat, charged per object through a per-CPU byte stock (client/slab.h
 * explains both layers).  Destroy a client's caches before mb_close(). */
typedef struct mb_cache mb_cache;
#define MB_CACHE_RECLAIMABLE 0x1u /* pages count as slab_reclaimable */
#define MB_CACHE_DEBUG 0x2u       /* red zones, poisoning, double-free checks */
#define MB_SLAB_DEBUG_ENV "MEMBROKER_SLAB_DEBUG" /* =1: MB_CACHE_DEBUG for every cache */

/**
 * mb_cache_create - a cache of @object_size-byte objects aligned to @align
 * (a power of two up to the system page size; 0 means 8).  Sizes from 1
 * byte (rounded up to 8) to half a page share slabs; up to a page every
 * object takes a page of its own; larger sizes fail with EINVAL (use
 * mb_page_alloc_bulk()).  @ctor, if not NULL, runs once per object when its
 * slab is set up, and objects must be freed in their constructed state
 * (SLUB semantics).  MB_CACHE_RECLAIMABLE also registers a shrinker that
 * gives empty slabs back under pressure.  Returns NULL with errno set
 * (EINVAL, ENOMEM) and mb_last_error() on failure.
 */
mb_cache *mb_cache_create(mb_client *c, const char *name, size_t object_size, size_t align,
                          unsigned flags, void (*ctor)(void *object));
/* Reports (to stderr) and returns the number of live objects left.  Slab
 * pages that still hold live objects stay allocated until mb_close(). */
size_t mb_cache_destroy(mb_cache *cache);
/* One object, or NULL with errno set (ENOMEM when no page can be had). */
void *mb_cache_alloc(mb_cache *cache);
/* Free @object (NULL is ignored); any thread, any CPU.  In debug mode a bad
 * free (double free, wrong cache, not an object start) is reported and
 * ignored. */
void mb_cache_free(mb_cache *cache, void *object);
/* Give empty slabs back; returns the number of pages released. */
size_t mb_cache_shrink(mb_cache *cache);

struct mb_cache_stats {
        const char *name;
        unsigned flags;                  /* effective: MB_CACHE_DEBUG also when set by the environment */
        size_t object_size;              /* as asked */
        size_t align;                    /* effective alignment */
        size_t object_bytes;             /* bytes one object takes in its slab (and is charged) */
        size_t objects_per_slab;
        size_t metadata_bytes_per_slab;  /* outside the page: slab descriptor + table entry */
        double overhead_bytes_per_object; /* (page + metadata) / objects_per_slab - object_size */
        uint64_t live_objects;           /* allocated, not freed */
        uint64_t cpu_free_objects;       /* free objects parked in per-CPU lists */
        uint64_t slabs, partial_slabs, empty_slabs; /* slab pages held now */
        uint64_t slabs_allocated, slabs_freed;      /* pages taken / given back, cumulative */
        uint64_t allocs, frees;          /* cumulative */
        uint64_t errors;                 /* bad frees and corruptions reported */
};
/* A consistent-enough snapshot (exact when no other thread uses the cache). */
int mb_cache_stats(mb_cache *cache, struct mb_cache_stats *ret);

/* The byte-grained charging of all caches of a client (see client/slab.h):
 * (charged_pages - uncharged_pages) * page size == live object bytes +
 * stock_bytes, where stock_bytes are the charged bytes no live object
 * holds: the per-CPU byte stocks (each below one page) and the free
 * objects on the caches' per-CPU lists (charged when they enter a list);
 * reclaimable/unreclaimable_bytes are what has been written to the stats
 * region, pending_* what is still to be written so that it equals the live
 * objects' bytes (mb_slab_drain() writes it).  All zero when the client has
 * no cache. */
struct mb_slab_stats {
        uint64_t charged_pages;
        uint64_t uncharged_pages;
        uint64_t stock_bytes;
        int64_t reclaimable_bytes;
        int64_t unreclaimable_bytes;
        int64_t pending_reclaimable_bytes;
        int64_t pending_unreclaimable_bytes;
};
int mb_slab_stats(mb_client *c, struct mb_slab_stats *ret);
/* drain_all_stock() for objects: write every CPU's pending slab stat deltas
 * to the stats region and uncharge the stocks' whole pages.  Afterwards the
 * tenant's slab_* figures are exact for this client. */
void mb_slab_drain(mb_client *c);

/* ---- Contiguous runs (alloc_pages(order) on broker memory) ---- */

/**
 * mb_page_alloc_contig - @n pages (1 .. 262144) that are contiguous in the
 * arena, charged to the tenant as one extent (Charge.contig_pages) and
 * zero.  Always a trip to the daemon (never from the stock).  @flags:
 * MB_ALLOC_NORETRY or 0.  Returns the first page, or NULL with errno:
 * ENOMEM at the tenant's limit or when the arena has no free run that long,
 * EINVAL for @n or @flags out of range, ECHILD in a fork() child, or the
 * error that ended the session.
 */
void *mb_page_alloc_contig(mb_client *c, size_t n, unsigned flags);

/**
 * mb_page_free_contig - return a run from mb_page_alloc_contig() to the
 * daemon at once (not to the stock): it is uncharged and hole-punched.
 * @first and @n must be exactly those of the allocation.  Never waits for
 * the daemon.  Called by a shrinker answering a Reclaim, the run joins the
 * answer (counted in pgsteal).  Returns 0, -EINVAL when it is not a run of
 * the arena, or -ECHILD / the error that ended the session.
 */
int mb_page_free_contig(mb_client *c, void *first, size_t n);

/* ---- General allocation (kmalloc() on broker memory) ----
 * Sizes up to half a page come from size classes on slab caches of this
 * client (kmalloc-8 ... kmalloc-2k on 4 KiB pages: 8, 16, 32, 64, 96, 128,
 * 192, 256, 512, 672, 1024, 1360, 2048 bytes; per-CPU lists, no lock, no
 * system call on the fast path; they count in the tenant's
 * `slab_unreclaimable`); 3/4, 9/8, 5/4 and 3/2 of a page (3072 ... 6144
 * bytes) from slabs of 6 to 12 contiguous pages that 8 such objects fill,
 * straddling page boundaries; the other sizes up to a page from the page
 * stock, larger sizes from contiguous runs (mb_page_alloc_contig(); runs are
 * kept for reuse when freed, 2048 pages at most per client at first, up to
 * 4 times the largest run freed and up to the most run pages in use at once
 * (at most 262144 pages), as glibc keeps what a program freed; a longer
 * kept run is cut to size; runs above 8192 pages go back to the daemon at
 * once, the others when they pass the bound, 64 pages per Uncharge; runs
 * of up to 128 pages are carved from chunks charged at once, 64 pages in
 * one contiguous charge and more as the heap grows, while the tenant has
 * room for them).  All of it is charged to the tenant and counts in its
 * usage.  Objects are aligned to 8 bytes (8-byte class), 16 (16, 672, 1360;
 * 96, 192: 32 and 64), their size (powers of two) or an eighth of a page
 * (3/4 to 3/2 of a page); pages and runs to the page.  At the
 * tenant's limit the library first gives back kept runs and empty slabs,
 * then fails with NULL and errno ENOMEM.  Thread-safe.  In a fork() child
 * allocation fails with ECHILD and mb_free() of the parent's objects does
 * nothing.  The first call sets up the caches; mb_close() destroys them
 * (reporting live objects on stderr). */

/* malloc(): NULL with errno ENOMEM, ECHILD or the session's error. */
void *mb_malloc(mb_client *c, size_t size);
/* calloc(): zeroed; ENOMEM when @nmemb * @size overflows. */
void *mb_calloc(mb_client *c, size_t nmemb, size_t size);
/* realloc(): @p NULL is mb_malloc(), @size 0 frees and returns NULL; stays
 * in place while @size fits and uses at least half; NULL (errno) leaves @p
 * untouched; EINVAL when @p is not an allocation of @c. */
void *mb_realloc(mb_client *c, void *p, size_t size);
/* free(): NULL is ignored; a pointer that is not an allocation of @c is
 * ignored (mb_last_error() says so). */
void mb_free(mb_client *c, void *p);
/* aligned_alloc(): @align a power of two up to the page size (else NULL,
 * errno EINVAL). */
void *mb_aligned_alloc(mb_client *c, size_t align, size_t size);
/* Bytes usable at @p (its size class, page or run); 0 for NULL or a
 * pointer that is not an allocation of @c. */
size_t mb_malloc_usable_size(mb_client *c, const void *p);
/* Give back kept runs and empty slabs of the size classes (malloc_trim()). */
void mb_malloc_trim(mb_client *c);
/* mb_cache_stats() of up to @n size classes (named kmalloc-SIZE), smallest
 * first, into @ret: the number filled (0 before the first mb_malloc()),
 * or -errno. */
int mb_malloc_class_stats(mb_client *c, struct mb_cache_stats *ret, size_t n);

#ifdef __cplusplus
}
#endif
#endif
