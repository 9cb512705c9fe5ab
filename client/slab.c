/* SPDX-License-Identifier: MIT */
/*
 * slab.c - slab caches on broker pages, with byte-grained charging.
 *
 * SLUB (mm/slub.c) is the model.  A cache hands out objects of one size.
 * Its slabs are broker pages: taken with mb_page_alloc(), so they come from
 * this CPU's page stock and are charged to the tenant like every other page
 * (they count in the tenant's `usage` and in its `pages` stat), and given
 * back with mb_page_free().
 *
 * Structure
 * ---------
 *  - Per CPU (the CPU slot of mb_client_cpu(), the same one the page stock
 *    uses), every cache keeps a free list of objects, linked through a free
 *    pointer stored in the free objects themselves.  mb_cache_alloc() pops
 *    from it, mb_cache_free() pushes onto it.  Both take the client's
 *    per-CPU slab lock, like the kernel's local_lock around
 *    memcg_stock_pcp: taken with a restartable sequence (rseq), so without
 *    any atomic instruction, by the threads of that CPU, and through an
 *    asymmetric slow path by anyone else (see "The per-CPU slab lock"
 *    below).
 *  - When the per-CPU list is empty, the CPU takes the whole free lists of
 *    slabs of the cache at once, until it holds half of `cpu_max`: the
 *    cache's partial slabs first, then its empty ones, else a new page (a
 *    new slab becomes the CPU's active slab, cf. SLUB's c->slab /
 *    get_freelist()).  When a per-CPU list grows past `cpu_max` objects
 *    (twice a slab's objects, at least what 32 KiB hold, at most 1024),
 *    half of it goes back to the slabs the objects belong to, in one batch
 *    under the cache lock (like SLUB's put_cpu_partial()/__slab_free(), or
 *    the per-CPU "sheaves" of newer kernels).
 *  - Remote frees: an object freed on another CPU than the one it was
 *    allocated on simply goes onto the freeing CPU's list; objects are not
 *    owned by CPUs, only by slabs, and every slab's free list and counters
 *    are changed under the cache lock.  A thread that migrates between
 *    reading its CPU slot and taking the lock is also correct: it then uses
 *    the other slot's list under that slot's lock.
 *  - Per cache: partial slabs (some objects free), empty slabs (all free)
 *    and full slabs (on no list, like SLUB's).  Past `empty_keep` empty
 *    slabs (SLUB's calculate_min_partial(): 5..10 by object size) an empty
 *    slab is given back at once; mb_cache_shrink() gives every empty slab
 *    back (like __kmem_cache_shrink()).  Reclaimable caches register a
 *    shrinker: count = empty slabs + the slabs that draining the per-CPU
 *    lists would empty, scan = drain and give them back.
 *
 * Object sizes
 * ------------
 * 8 bytes up to a page.  Up to page_size/2 several objects share a slab;
 * above page_size/2 every object is a whole page of its own (one object
 * per slab: "larger requests go to whole pages").  Larger than a page:
 * mb_cache_create() fails with EINVAL -- use mb_page_alloc_bulk(), broker
 * pages are not contiguous.  Alignment: a power of two up to the system
 * page size (default and minimum 8).
 *
 * Metadata
 * --------
 * In the slab, nothing but the objects: the free pointer lives inside the
 * free object (at offset 0), or right after it when a constructor must be
 * kept intact or in debug mode.  Outside the slab: one `struct mb_slab`
 * (48 bytes) per slab page, plus its pointer in the cache's page->slab hash
 * table (at most half full: 16 bytes per slab).  So a 64-byte object costs
 * (48 + 16) / 64 = 1 byte of metadata, an 8-byte one 0.125 byte; the
 * figure including alignment padding and the unused tail of the page is in
 * mb_cache_stats() `overhead_bytes_per_object`.
 *
 * Byte-grained charging and the slab stat
 * ---------------------------------------
 * Two layers, as in the kernel:
 *  1. Physical: slab pages are real broker pages, charged to the tenant in
 *     pages through the page stock (design.md §3).  `usage` and `pages`
 *     include them, whether their objects are in use or not.
 *  2. Objects: like the kernel's obj_stock (mm/memcontrol.c
 *     consume_obj_stock(), refill_obj_stock(), obj_cgroup_charge()), every
 *     CPU slot has a byte stock.  An allocation consumes the cache's
 *     `object_bytes` (object plus its in-slab metadata and padding, as the
 *     kernel charges obj_full_size()) from it; when it runs dry, whole
 *     pages' worth of bytes are charged (counted in `charged_pages`) and the
 *     leftover stays in the stock.  A free refills it, and when it holds more
 *     than a page, the whole pages' worth are uncharged (`uncharged_pages`)
 *     and the remainder (< 1 page) stays.  Invariant, per client:
 *       (charged_pages - uncharged_pages) * page_size
 *           == bytes of live objects + bytes in the byte stocks,
 *     and the byte stocks hold at most ncpus * page_size bytes.  The byte
 *     charge is the object-level view of the same memory: it does not take
 *     more pages from the daemon (the slab pages already are charged); the
 *     difference between slab pages and charged bytes is the slab's
 *     fragmentation (empty and partial slabs, metadata, page tails).
 *  3. The stat: `slab_reclaimable` / `slab_unreclaimable` are the bytes of
 *     live objects of reclaimable / other caches (NR_SLAB_RECLAIMABLE_B /
 *     NR_SLAB_UNRECLAIMABLE_B), `slab` their sum.  Deltas gather in the
 *     per-CPU stock and are written into the client's stats region with
 *     mb_client_stat_add() when they pass a page's worth, like the kernel's
 *     __account_obj_stock(); the daemon folds them through rstat like every
 *     activity counter.  So the stat may lag by < page_size bytes per item
 *     per CPU; mb_slab_drain() (and destroying the client's last cache)
 *     writes everything, after which the stat is exact.
 *
 * Debug mode (MB_CACHE_DEBUG, or MEMBROKER_SLAB_DEBUG=1 for every cache)
 * ---------------------------------------------------------------------
 * Each object gets red zones before and after it (0xcc while allocated,
 * 0xbb while free, SLUB_RED_ACTIVE/INACTIVE), a state tag, and, unless the
 * cache has a constructor (SLUB does not poison those either), its bytes are
 * poisoned on free (0x6b, last byte 0xa5: POISON_FREE/POISON_END) and
 * checked on the next allocation.  Detected and reported on stderr with the
 * cache name and address: double free, free into the wrong cache, free of a
 * pointer that is not the start of an object, red zone overwrite, write
 * after free.  A bad free is ignored (nothing is corrupted); a damaged red
 * zone or poison is reported and repaired.  When debug mode is off, the
 * alloc and free paths pay one predictable branch for it.  (Without debug
 * mode, frees of foreign pointers are still detected, and dropped, when the
 * per-CPU list is flushed, but a double free is not.)
 *
 * Locks, in order: slab_registry_lock -> ctx->lock -> per-CPU slab lock ->
 * cache->lock.  mb_page_alloc()/mb_page_free() and constructors are called
 * with no lock held.
 *
 * Caches must be destroyed before mb_close() of their client.
 *
 * fork(): the library's rule (membroker.h) applies to caches too.  In the
 * child, the inherited caches' objects live in the parent's shared pages,
 * so mb_cache_alloc() fails with ECHILD, mb_cache_free() and
 * mb_cache_shrink() do nothing, and mb_cache_destroy() only releases the
 * child's copy of the cache's bookkeeping.  The check shares the fast
 * path's one unlikely branch with debug mode (the fork generation).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/membarrier.h>
#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 35)
#include <sys/rseq.h>
#define SLAB_HAVE_RSEQ 1
#else
#define SLAB_HAVE_RSEQ 0
#endif

#include "macros.h"
#include "mb_internal.h"
#include "membroker.h"

#define SLAB_MIN_OBJECT_BYTES 8u
#define SLAB_MIN_ALIGN_BYTES 8u
#define SLAB_REDZONE_BYTES 16u
#define SLAB_DEBUG_ENV "MEMBROKER_SLAB_DEBUG"
#define SLAB_LIVE_REPORT_MAX 5u   /* addresses of live objects printed by destroy */
#define SLAB_CPU_MAX_MIN_OBJECTS 8u
#define SLAB_CPU_MAX_MAX_OBJECTS 1024u
#define SLAB_CPU_LIST_BYTES (32u * 1024u) /* what a per-CPU list may park, at least 2 slabs' worth */
#define SLAB_LOCK_SPINS 128u
#define SLAB_RSEQ_TRIES 3u        /* fast-path attempts before the slow lock */
#define SLAB_RSEQ_ENV "MEMBROKER_SLAB_RSEQ" /* =0: atomic per-CPU locks only */

/* include/linux/poison.h */
#define SLAB_POISON_FREE 0x6b
#define SLAB_POISON_END 0xa5
#define SLAB_RED_INACTIVE 0xbb
#define SLAB_RED_ACTIVE 0xcc

/* Debug state tag, stored after the free pointer. */
#define SLAB_TAG_FREE UINT64_C(0xf4eef4eef4eef4ee)
#define SLAB_TAG_ALLOC UINT64_C(0xa110ca7eda110ca7)

enum {
        SLAB_STAT_RECLAIMABLE = 0,
        SLAB_STAT_UNRECLAIMABLE = 1,
        _SLAB_STAT_NR,
};

enum {
        SLAB_ON_NO_LIST = 0, /* full, or handed to a CPU */
        SLAB_ON_PARTIAL,
        SLAB_ON_EMPTY,
};

struct slab_list_node {
        struct slab_list_node *prev, *next;
};

/* One slab page.  Kept outside the page, so that the page holds only
 * objects.  Protected by its cache's lock. */
struct mb_slab {
        struct slab_list_node node; /* partial or empty list */
        char *page;
        uint64_t key;               /* page index relative to cache->base */
        void *freelist;             /* free objects not held by any CPU */
        uint32_t nfree;             /* objects on freelist */
        uint32_t list;              /* SLAB_ON_* */
};

/* The client's per-CPU slab state: the lock that serialises all slab work
 * on this CPU slot, and the byte stock (the kernel's obj_stock_pcp). */
struct slab_pcpu {
        uint32_t lock;                    /* held by a thread of this CPU (rseq) */
        uint32_t remote;                  /* held, or wanted, through the slow path */
        int64_t nr_bytes;                 /* pre-charged bytes (obj_stock nr_bytes) */
        int64_t pending[_SLAB_STAT_NR];   /* stat deltas not written yet (nr_slab_*_b) */
        uint64_t charged_pages;           /* pages' worth charged when the stock ran dry */
        uint64_t uncharged_pages;         /* pages' worth uncharged from a full stock */
} _cacheline_aligned_;

/* Slab state shared by the caches of one client. */
struct slab_ctx {
        mb_client *client;
        struct slab_ctx *next;            /* registry */
        unsigned refs;                    /* caches; under slab_registry_lock */
        unsigned ncpus;
        size_t page_size;
        unsigned page_shift;
        pthread_mutex_t lock;             /* caches list */
        struct slab_list_node caches;
        int64_t written[_SLAB_STAT_NR];   /* bytes written to the stats region (atomic) */
        struct slab_pcpu *pcpu;
};

/* A cache's per-CPU free list; changed under the client's per-CPU lock. */
struct cache_cpu {
        void *freelist;
        uint32_t count;
        uint32_t _pad;
        uint64_t allocs;
        uint64_t frees;
} _cacheline_aligned_;

struct mb_cache {
        /* Read-mostly, used on every alloc and free. */
        struct slab_ctx *ctx;
        mb_client *client;
        struct cache_cpu *cpu;
        uint32_t object_bytes;   /* slot stride: bytes an object takes and is charged */
        uint32_t fp_offset;      /* free pointer, from the object start */
        uint32_t cpu_max;        /* per-CPU list length that triggers a flush */
        uint32_t stat;           /* SLAB_STAT_* */
        uint32_t fork_gen;       /* slab_fork_gen at creation */
        bool debug;
        bool poison;

        /* Layout. */
        unsigned flags;
        size_t object_size;      /* as asked */
        size_t align;
        size_t obj_offset;       /* object start within its slot */
        size_t objects;          /* per slab */
        void (*ctor)(void *object);
        char *name;

        /* Slabs; under lock (slow paths only: on its own cache line, away
         * from the read-mostly fields above). */
        pthread_mutex_t lock _cacheline_aligned_;
        struct slab_list_node partial;
        struct slab_list_node empty;
        uint64_t nr_partial;
        uint64_t nr_empty;       /* also read without the lock by the shrinker's count */
        uint64_t nr_slabs;
        uint64_t slabs_allocated;
        uint64_t slabs_freed;
        unsigned empty_keep;
        struct mb_slab **table;  /* page key -> slab, open addressing */
        size_t table_size;       /* power of two, or 0 */
        size_t table_used;
        uintptr_t base;          /* arena base, learnt from the first slab */
        bool base_known;

        uint64_t errors;         /* reports printed (atomic) */

        struct mb_shrinker shrinker;
        bool shrinker_registered;
        struct slab_list_node ctx_node;
};

static pthread_mutex_t slab_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slab_ctx *slab_registry;
static pthread_once_t slab_setup_once_flag = PTHREAD_ONCE_INIT;
/* Bumped in every fork() child; a cache made in another generation is an
 * inherited copy. */
static uint32_t slab_fork_gen;

/* ---- small helpers ---- */

#define slab_container_of(ptr, type, member) ((type *) ((char *) (ptr) - offsetof(type, member)))

static void slab_list_init(struct slab_list_node *h) {
        h->prev = h->next = h;
}

static bool slab_list_empty(const struct slab_list_node *h) {
        return h->next == h;
}

static void slab_list_add_tail(struct slab_list_node *h, struct slab_list_node *n) {
        n->prev = h->prev;
        n->next = h;
        h->prev->next = n;
        h->prev = n;
}

static void slab_list_del(struct slab_list_node *n) {
        n->prev->next = n->next;
        n->next->prev = n->prev;
        n->prev = n->next = n;
}

static inline size_t slab_align_up(size_t n, size_t a) {
        return (n + a - 1) & ~(a - 1);
}

static inline bool slab_is_pow2(size_t n) {
        return n && !(n & (n - 1));
}

static inline void *slab_get_fp(const mb_cache *s, const void *obj) {
        void *p;
        memcpy(&p, (const char *) obj + s->fp_offset, sizeof(p));
        return p;
}

static inline void slab_set_fp(const mb_cache *s, void *obj, void *next) {
        memcpy((char *) obj + s->fp_offset, &next, sizeof(next));
}

static inline uint64_t *slab_tag(const mb_cache *s, void *obj) {
        return (uint64_t *) ((char *) obj + s->fp_offset + sizeof(void *));
}

static inline void slab_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
}

/*
 * The per-CPU slab lock.
 *
 * It only has to exclude the other threads that run on (or were just
 * migrated from) the same CPU slot, and whoever drains the slot from another
 * CPU (shrink, destroy, stats).  An atomic exchange costs ~20 ns on some
 * virtual machines, more than the rest of an allocation, so the owner side
 * takes it with a restartable sequence instead (rseq(2), registered by
 * glibc): "if this is still CPU @cpu and neither `lock` nor `remote` is
 * set, store lock = 1" runs as one uninterruptible step -- a preemption,
 * migration or signal in the middle restarts it -- so two threads of one
 * CPU cannot both take it, with plain loads and stores.
 *
 * Everyone else (another CPU, or the owner side after a failed attempt)
 * takes the slow path, an asymmetric lock: atomically set `remote` (which
 * makes every later fast attempt fail), then membarrier(
 * MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ) on that CPU, which aborts a fast
 * attempt that might have read `remote` before it was set and not yet
 * stored `lock`, then wait until `lock` is 0.  Releasing is a store: of
 * `lock` by a fast-path owner, of `remote` by a slow-path owner (the holder
 * tells which by `lock`, which only it can have set).  This mirrors how the
 * kernel pairs cheap local_lock()s with remote drains.
 *
 * Without rseq (not x86-64, glibc did not register it, the kernel lacks
 * membarrier RSEQ, or MEMBROKER_SLAB_RSEQ=0), every acquisition is the slow
 * path without the membarrier: a plain test-and-set spinlock on `remote`.
 */
static bool slab_rseq_ok;            /* fast path usable in this process */
static ptrdiff_t slab_rseq_offset;   /* struct rseq, from the thread pointer */

static inline void slab_backoff(unsigned *spins) {
        /* The holder may be a preempted thread of the same CPU slot: do not
         * burn its time slice. */
        if (++*spins > SLAB_LOCK_SPINS)
                sched_yield();
        else
                slab_cpu_relax();
}

static int slab_membarrier(int cmd, unsigned flags, int cpu) {
        return (int) syscall(__NR_membarrier, cmd, flags, cpu);
}

static void slab_rseq_setup(void) {
        const char *e = secure_getenv(SLAB_RSEQ_ENV);

        slab_rseq_ok = false;
        if (e && strcmp(e, "0") == 0)
                return;
#if SLAB_HAVE_RSEQ
        /* cpu_id and rseq_cs must be there (20 bytes: the original ABI). */
        if (__rseq_size < 20)
                return;
        if (slab_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) < 0)
                return;
        slab_rseq_offset = __rseq_offset;
        slab_rseq_ok = true;
#endif
}

#if SLAB_HAVE_RSEQ
/* One fast attempt: 1 locked, 0 busy (held or wanted by someone else), -1
 * aborted (not on CPU @cpu, or preempted/migrated/signalled meanwhile).
 * The rseq_cs descriptor (struct rseq_cs: version, flags, start_ip,
 * post_commit_offset, abort_ip) lives in section __rseq_cs; the abort
 * handler is preceded by the signature glibc registered (RSEQ_SIG). */
static inline int slab_rseq_trylock(struct slab_pcpu *p, unsigned cpu) {
        __asm__ __volatile__ goto(
                ".pushsection __rseq_cs, \"aw\"\n\t"
                ".balign 32\n\t"
                "3:\n\t"
                ".long 0, 0\n\t"
                ".quad 1f, 2f - 1f, 4f\n\t"
                ".popsection\n\t"
                ".pushsection __rseq_cs_ptr_array, \"aw\"\n\t"
                ".quad 3b\n\t"
                ".popsection\n\t"
                "leaq 3b(%%rip), %%rax\n\t"
                "movq %%rax, %%fs:8(%[off])\n\t" /* rseq->rseq_cs = &cs */
                "1:\n\t"
                "cmpl %[cpu], %%fs:4(%[off])\n\t" /* rseq->cpu_id */
                "jnz 4f\n\t"
                "cmpl $0, %[lock]\n\t"
                "jnz %l[busy]\n\t"
                "cmpl $0, %[remote]\n\t"
                "jnz %l[busy]\n\t"
                "movl $1, %[lock]\n\t" /* commit */
                "2:\n\t"
                ".pushsection __rseq_failure, \"ax\"\n\t"
                ".byte 0x0f, 0xb9, 0x3d\n\t" /* ud1 <sig>(%%rip), %%edi */
                ".long %c[sig]\n\t"
                "4:\n\t"
                "jmp %l[aborted]\n\t"
                ".popsection\n\t"
                :
                : [cpu] "r"(cpu), [off] "r"(slab_rseq_offset), [lock] "m"(p->lock), [remote] "m"(p->remote),
                  [sig] "i"(RSEQ_SIG)
                : "memory", "cc", "rax"
                : busy, aborted);
        return 1;
busy:
        return 0;
aborted:
        return -1;
}
#endif

/* The slow path: any thread, any CPU. */
static void slab_pcpu_lock_slow(struct slab_pcpu *p, unsigned cpu) {
        unsigned spins = 0;

        while (__atomic_exchange_n(&p->remote, 1, __ATOMIC_ACQUIRE))
                while (__atomic_load_n(&p->remote, __ATOMIC_RELAXED))
                        slab_backoff(&spins);
        if (!slab_rseq_ok)
                return;
        if (slab_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_CMD_FLAG_CPU, (int) cpu) < 0 &&
            slab_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0) < 0) {
                /* Cannot happen after a successful registration. */
                fprintf(stderr, "membroker slab: membarrier(RSEQ) failed: %m\n");
                abort();
        }
        while (__atomic_load_n(&p->lock, __ATOMIC_ACQUIRE))
                slab_backoff(&spins);
}

/* Lock the slot of CPU @cpu from wherever we run (drains, stats). */
static inline struct slab_pcpu *slab_pcpu_lock_cpu(struct slab_ctx *ctx, unsigned cpu) {
        struct slab_pcpu *p = &ctx->pcpu[cpu];

        slab_pcpu_lock_slow(p, cpu);
        return p;
}

/* Lock the slot of the CPU we run on; its number in *@ret_cpu. */
static inline struct slab_pcpu *slab_pcpu_lock_this(struct slab_ctx *ctx, unsigned *ret_cpu) {
        unsigned cpu;

#if SLAB_HAVE_RSEQ
        if (_likely_(slab_rseq_ok))
                for (unsigned tries = 0; tries < SLAB_RSEQ_TRIES; tries++) {
                        int r;

                        cpu = mb_client_cpu(ctx->client);
                        r = slab_rseq_trylock(&ctx->pcpu[cpu], cpu);
                        if (_likely_(r > 0)) {
                                *ret_cpu = cpu;
                                return &ctx->pcpu[cpu];
                        }
                        if (r == 0)
                                break;
                }
#endif
        cpu = mb_client_cpu(ctx->client);
        *ret_cpu = cpu;
        return slab_pcpu_lock_cpu(ctx, cpu);
}

static inline void slab_pcpu_unlock(struct slab_pcpu *p) {
        if (__atomic_load_n(&p->lock, __ATOMIC_RELAXED))
                __atomic_store_n(&p->lock, 0, __ATOMIC_RELEASE);
        else
                __atomic_store_n(&p->remote, 0, __ATOMIC_RELEASE);
}

static _printf_(2, 3) void slab_report(mb_cache *s, const char *fmt, ...) {
        char buf[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        fprintf(stderr, "membroker slab: cache \"%s\": %s\n", s->name, buf);
        fflush(stderr);
        __atomic_fetch_add(&s->errors, 1, __ATOMIC_RELAXED);
}

/* ---- byte stock: consume_obj_stock(), refill_obj_stock(),
 *      __account_obj_stock() of mm/memcontrol.c ---- */

/* Write @delta bytes of @stat into the stats region.  Called with no slab
 * lock held: mb_client_stat_add() takes the page stock's lock. */
static void slab_stat_write(struct slab_ctx *ctx, unsigned stat, int64_t delta) {
        if (delta == 0)
                return;
        mb_client_stat_add(ctx->client,
                           stat == SLAB_STAT_RECLAIMABLE ? MB_STAT_SLAB_RECLAIMABLE : MB_STAT_SLAB_UNRECLAIMABLE,
                           delta);
        __atomic_fetch_add(&ctx->written[stat], delta, __ATOMIC_RELAXED);
}

/* __account_obj_stock(): gather stat deltas per CPU; once they pass a
 * page's worth, hand them to the caller to write (*@flush) after it drops
 * the lock. */
static inline void slab_stock_account(struct slab_ctx *ctx, struct slab_pcpu *p, unsigned stat, int64_t delta,
                                      int64_t *flush) {
        int64_t v = p->pending[stat] + delta;

        if (_unlikely_(v > (int64_t) ctx->page_size || v < -(int64_t) ctx->page_size)) {
                *flush = v;
                v = 0;
        }
        p->pending[stat] = v;
}

/* consume_obj_stock(), falling back to obj_cgroup_charge(): take @bytes
 * from the stock, charging whole pages' worth when it runs dry. */
static inline void slab_stock_charge(struct slab_ctx *ctx, struct slab_pcpu *p, unsigned stat, uint32_t bytes,
                                     int64_t *flush) {
        if (_unlikely_(p->nr_bytes < (int64_t) bytes)) {
                uint64_t pages = DIV_ROUND_UP((uint64_t) bytes - (uint64_t) p->nr_bytes, ctx->page_size);

                p->nr_bytes += (int64_t) (pages << ctx->page_shift);
                p->charged_pages += pages;
        }
        p->nr_bytes -= bytes;
        slab_stock_account(ctx, p, stat, bytes, flush);
}

/* refill_obj_stock(): give @bytes back to the stock; above a page, uncharge
 * the whole pages' worth and keep the remainder. */
static inline void slab_stock_uncharge(struct slab_ctx *ctx, struct slab_pcpu *p, unsigned stat, uint32_t bytes,
                                       int64_t *flush) {
        p->nr_bytes += bytes;
        if (_unlikely_(p->nr_bytes > (int64_t) ctx->page_size)) {
                uint64_t pages = (uint64_t) p->nr_bytes >> ctx->page_shift;

                p->nr_bytes &= (int64_t) ctx->page_size - 1;
                p->uncharged_pages += pages;
        }
        slab_stock_account(ctx, p, stat, -(int64_t) bytes, flush);
}

/* drain_obj_stock() of one CPU (caller holds its lock): take the pending
 * stat deltas into @ret_flush (to write after unlocking) and uncharge the
 * whole pages' worth of the stock. */
static void slab_pcpu_drain(struct slab_ctx *ctx, struct slab_pcpu *p, int64_t ret_flush[static _SLAB_STAT_NR]) {
        for (unsigned i = 0; i < _SLAB_STAT_NR; i++) {
                ret_flush[i] = p->pending[i];
                p->pending[i] = 0;
        }
        if (p->nr_bytes >= (int64_t) ctx->page_size) {
                p->uncharged_pages += (uint64_t) p->nr_bytes >> ctx->page_shift;
                p->nr_bytes &= (int64_t) ctx->page_size - 1;
        }
}

/* ---- page -> slab table (per cache; under cache->lock) ---- */

static inline uint64_t slab_key(const mb_cache *s, const void *ptr) {
        return ((uintptr_t) ptr - s->base) >> s->ctx->page_shift;
}

static inline size_t slab_hash(uint64_t key, size_t size) {
        return (size_t) ((key * UINT64_C(0x9e3779b97f4a7c15)) >> 17) & (size - 1);
}

static struct mb_slab *slab_table_lookup(const mb_cache *s, const void *ptr) {
        uint64_t key;

        if (!s->table_size || !s->base_known || (uintptr_t) ptr < s->base)
                return NULL;
        key = slab_key(s, ptr);
        for (size_t i = slab_hash(key, s->table_size);; i = (i + 1) & (s->table_size - 1)) {
                struct mb_slab *slab = s->table[i];

                if (!slab)
                        return NULL;
                if (slab->key == key)
                        return slab;
        }
}

static void slab_table_put(struct mb_slab **table, size_t size, struct mb_slab *slab) {
        size_t i = slab_hash(slab->key, size);

        while (table[i])
                i = (i + 1) & (size - 1);
        table[i] = slab;
}

static int slab_table_insert(mb_cache *s, struct mb_slab *slab) {
        if (!s->base_known) {
                mb_handle_t h = mb_page_to_handle(s->client, slab->page);

                s->base = (uintptr_t) slab->page - (uintptr_t) (h << s->ctx->page_shift);
                s->base_known = true;
        }
        slab->key = slab_key(s, slab->page);

        if ((s->table_used + 1) * 2 > s->table_size) {
                size_t size = s->table_size ? s->table_size * 2 : 16;
                struct mb_slab **t = calloc(size, sizeof(*t));

                if (!t)
                        return -ENOMEM;
                for (size_t i = 0; i < s->table_size; i++)
                        if (s->table[i])
                                slab_table_put(t, size, s->table[i]);
                free(s->table);
                s->table = t;
                s->table_size = size;
        }
        slab_table_put(s->table, s->table_size, slab);
        s->table_used++;
        return 0;
}

/* Linear-probing deletion with backward shift (no tombstones). */
static void slab_table_remove(mb_cache *s, struct mb_slab *slab) {
        size_t mask = s->table_size - 1, i = slab_hash(slab->key, s->table_size);

        while (s->table[i] != slab)
                i = (i + 1) & mask;
        for (size_t j = (i + 1) & mask; s->table[j]; j = (j + 1) & mask) {
                size_t home = slab_hash(s->table[j]->key, s->table_size);

                /* Move j into the hole at i unless its home lies in (i, j]. */
                if (((j - home) & mask) >= ((j - i) & mask)) {
                        s->table[i] = s->table[j];
                        i = j;
                }
        }
        s->table[i] = NULL;
        s->table_used--;
}

/* ---- slabs ---- */

static inline char *slab_object(const mb_cache *s, const struct mb_slab *slab, size_t i) {
        return slab->page + i * s->object_bytes + s->obj_offset;
}

static void slab_debug_init_object(mb_cache *s, char *obj) {
        char *slot = obj - s->obj_offset;

        memset(slot, SLAB_RED_INACTIVE, s->obj_offset);
        memset(obj + s->object_size, SLAB_RED_INACTIVE, s->fp_offset - s->object_size);
        if (s->poison) {
                memset(obj, SLAB_POISON_FREE, s->object_size - 1);
                obj[s->object_size - 1] = (char) SLAB_POISON_END;
        }
        __atomic_store_n(slab_tag(s, obj), SLAB_TAG_FREE, __ATOMIC_RELAXED);
}

/* allocate_slab() + setup_object(): a new page, every object set up (and
 * constructed) once, all on the slab's free list.  No lock held. */
static struct mb_slab *slab_new(mb_cache *s) {
        _cleanup_(freep) struct mb_slab *slab = NULL;
        void *head = NULL;

        slab = calloc(1, sizeof(*slab));
        if (!slab) {
                mb_set_error("slab cache %s: out of memory for slab metadata", s->name);
                errno = ENOMEM;
                return NULL;
        }
        slab->page = mb_page_alloc(s->client);
        if (!slab->page)
                return NULL; /* errno and message from mb_page_alloc() */

        for (size_t i = s->objects; i-- > 0;) {
                char *obj = slab_object(s, slab, i);

                if (s->debug)
                        slab_debug_init_object(s, obj);
                if (s->ctor)
                        s->ctor(obj);
                slab_set_fp(s, obj, head);
                head = obj;
        }
        slab->freelist = head;
        slab->nfree = (uint32_t) s->objects;
        slab_list_init(&slab->node);
        return TAKE_PTR(slab);
}

static void slab_move(mb_cache *s, struct mb_slab *slab, uint32_t list) {
        if (slab->list == SLAB_ON_PARTIAL) {
                slab_list_del(&slab->node);
                s->nr_partial--;
        } else if (slab->list == SLAB_ON_EMPTY) {
                slab_list_del(&slab->node);
                __atomic_store_n(&s->nr_empty, s->nr_empty - 1, __ATOMIC_RELAXED);
        }
        slab->list = list;
        if (list == SLAB_ON_PARTIAL) {
                slab_list_add_tail(&s->partial, &slab->node);
                s->nr_partial++;
        } else if (list == SLAB_ON_EMPTY) {
                slab_list_add_tail(&s->empty, &slab->node);
                __atomic_store_n(&s->nr_empty, s->nr_empty + 1, __ATOMIC_RELAXED);
        }
}

/* Take @slab out of the cache (cache lock held); the caller gives its page
 * back with slab_discard_finish() after dropping the lock.  Discarded slabs
 * are chained through node.next. */
static void slab_discard(mb_cache *s, struct mb_slab *slab, struct mb_slab **chain) {
        slab_move(s, slab, SLAB_ON_NO_LIST);
        slab_table_remove(s, slab);
        s->nr_slabs--;
        s->slabs_freed++;
        slab->node.next = (struct slab_list_node *) *chain;
        *chain = slab;
}

static size_t slab_discard_finish(mb_cache *s, struct mb_slab *chain) {
        size_t n = 0;

        while (chain) {
                struct mb_slab *next = (struct mb_slab *) chain->node.next;

                (void) mb_page_free(s->client, chain->page);
                free(chain);
                chain = next;
                n++;
        }
        return n;
}

/* Objects back to their slabs: the batch part of __slab_free().  Foreign
 * pointers found here (possible only without debug mode) are reported and
 * dropped.  No lock held on entry.  Returns the number of slab pages that
 * became empty past `empty_keep` and were given back. */
static size_t slab_flush_list(mb_cache *s, void *list) {
        struct mb_slab *chain = NULL;

        if (!list)
                return 0;
        pthread_mutex_lock(&s->lock);
        while (list) {
                void *obj = list, *next = slab_get_fp(s, obj);
                struct mb_slab *slab = slab_table_lookup(s, obj);
                size_t off;

                list = next;
                if (!slab) {
                        slab_report(s, "free of %p: not an object of this cache; ignored", obj);
                        continue;
                }
                off = (size_t) ((char *) obj - slab->page);
                if (off < s->obj_offset || (off - s->obj_offset) % s->object_bytes != 0 ||
                    (off - s->obj_offset) / s->object_bytes >= s->objects) {
                        slab_report(s, "free of %p: not the start of an object; ignored", obj);
                        continue;
                }
                slab_set_fp(s, obj, slab->freelist);
                slab->freelist = obj;
                slab->nfree++;
                if (slab->nfree == s->objects) {
                        if (s->nr_empty >= s->empty_keep)
                                slab_discard(s, slab, &chain);
                        else
                                slab_move(s, slab, SLAB_ON_EMPTY);
                } else if (slab->nfree == 1)
                        slab_move(s, slab, SLAB_ON_PARTIAL);
        }
        pthread_mutex_unlock(&s->lock);
        return slab_discard_finish(s, chain);
}

/* Give a CPU the whole free lists of partial (else empty) slabs, until it
 * holds half its cpu_max: SLUB's get_partial() + get_freelist(), taking
 * several slabs at once for large objects (like filling a per-CPU partial
 * list).  The CPU's list is empty on entry.  Cache lock taken here. */
static bool slab_take_partial(mb_cache *s, void **ret_list, uint32_t *ret_count) {
        uint32_t count = 0;
        void *list = NULL;

        pthread_mutex_lock(&s->lock);
        while (count < s->cpu_max / 2) {
                struct slab_list_node *n = NULL;
                struct mb_slab *slab;
                void *tail;

                if (!slab_list_empty(&s->partial))
                        n = s->partial.next;
                else if (!slab_list_empty(&s->empty))
                        n = s->empty.next;
                if (!n)
                        break;
                slab = slab_container_of(n, struct mb_slab, node);
                slab_move(s, slab, SLAB_ON_NO_LIST);
                /* Chain the slab's list in front of what we have. */
                tail = slab->freelist;
                while (slab_get_fp(s, tail))
                        tail = slab_get_fp(s, tail);
                slab_set_fp(s, tail, list);
                list = slab->freelist;
                count += slab->nfree;
                slab->freelist = NULL;
                slab->nfree = 0;
        }
        pthread_mutex_unlock(&s->lock);
        *ret_list = list;
        *ret_count = count;
        return count > 0;
}

/* ---- debug checks (only with s->debug) ---- */

static bool slab_check_bytes(mb_cache *s, void *obj, const char *what, char *from, size_t len, uint8_t want) {
        for (size_t i = 0; i < len; i++)
                if ((uint8_t) from[i] != want) {
                        slab_report(s, "%s of object %p overwritten at %p (object%+td): 0x%02x, expected 0x%02x",
                                    what, obj, (void *) (from + i), (from + i) - (char *) obj,
                                    (unsigned) (uint8_t) from[i], (unsigned) want);
                        memset(from, want, len);
                        return false;
                }
        return true;
}

static void slab_check_redzones(mb_cache *s, char *obj, uint8_t want) {
        slab_check_bytes(s, obj, "red zone", obj - s->obj_offset, s->obj_offset, want);
        slab_check_bytes(s, obj, "red zone", obj + s->object_size, s->fp_offset - s->object_size, want);
}

/* An object just taken off a free list: it must be free, unchanged since
 * its free (poison) and have intact red zones.  Then mark it allocated. */
static void slab_debug_alloc(mb_cache *s, char *obj) {
        uint64_t tag = __atomic_load_n(slab_tag(s, obj), __ATOMIC_RELAXED);

        if (tag != SLAB_TAG_FREE)
                slab_report(s, "object %p on the free list is not marked free (tag 0x%016llx): free list corrupted",
                            (void *) obj, (unsigned long long) tag);
        if (s->poison) {
                for (size_t i = 0; i < s->object_size; i++) {
                        uint8_t want = i + 1 == s->object_size ? SLAB_POISON_END : SLAB_POISON_FREE;

                        if ((uint8_t) obj[i] != want) {
                                slab_report(s, "use after free: object %p was written after it was freed "
                                            "(offset %zu: 0x%02x, expected 0x%02x)",
                                            (void *) obj, i, (unsigned) (uint8_t) obj[i], (unsigned) want);
                                break;
                        }
                }
        }
        slab_check_redzones(s, obj, SLAB_RED_INACTIVE);
        memset(obj - s->obj_offset, SLAB_RED_ACTIVE, s->obj_offset);
        memset(obj + s->object_size, SLAB_RED_ACTIVE, s->fp_offset - s->object_size);
        __atomic_store_n(slab_tag(s, obj), SLAB_TAG_ALLOC, __ATOMIC_RELAXED);
}

/* Name the cache that owns @ptr, if any (for the wrong-cache report). */
static mb_cache *slab_find_owner(mb_cache *s, const void *ptr) {
        struct slab_ctx *ctx = s->ctx;
        mb_cache *owner = NULL;

        pthread_mutex_lock(&ctx->lock);
        for (struct slab_list_node *n = ctx->caches.next; n != &ctx->caches && !owner; n = n->next) {
                mb_cache *o = slab_container_of(n, mb_cache, ctx_node);

                if (o == s)
                        continue;
                pthread_mutex_lock(&o->lock);
                if (slab_table_lookup(o, ptr))
                        owner = o;
                pthread_mutex_unlock(&o->lock);
        }
        pthread_mutex_unlock(&ctx->lock);
        return owner;
}

/* Validate a free in debug mode.  Returns false when the free must be
 * ignored (it was reported). */
static bool slab_debug_free(mb_cache *s, char *obj) {
        struct mb_slab *slab;
        size_t off = 0;
        uint64_t tag = SLAB_TAG_ALLOC;
        bool ok = false;

        pthread_mutex_lock(&s->lock);
        slab = slab_table_lookup(s, obj);
        if (slab) {
                off = (size_t) (obj - slab->page);
                /* Under the cache lock the slab cannot go away; the
                 * exchange makes two racing frees of one object find out
                 * about each other. */
                if (off >= s->obj_offset && (off - s->obj_offset) % s->object_bytes == 0 &&
                    (off - s->obj_offset) / s->object_bytes < s->objects)
                        ok = __atomic_compare_exchange_n(slab_tag(s, obj), &tag, SLAB_TAG_FREE, false,
                                                         __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&s->lock);

        if (!slab) {
                mb_cache *owner = slab_find_owner(s, obj);

                if (owner)
                        slab_report(s, "free of %p into the wrong cache: it belongs to cache \"%s\"; ignored",
                                    (void *) obj, owner->name);
                else
                        slab_report(s, "free of %p: not an object of any slab cache; ignored", (void *) obj);
                return false;
        }
        if (!ok) {
                if (tag == SLAB_TAG_ALLOC)
                        slab_report(s, "free of %p: not the start of an object; ignored", (void *) obj);
                else if (tag == SLAB_TAG_FREE)
                        slab_report(s, "double free of object %p; ignored", (void *) obj);
                else
                        slab_report(s, "free of %p: object metadata corrupted (tag 0x%016llx); ignored",
                                    (void *) obj, (unsigned long long) tag);
                return false;
        }
        slab_check_redzones(s, obj, SLAB_RED_ACTIVE);
        memset(obj - s->obj_offset, SLAB_RED_INACTIVE, s->obj_offset);
        memset(obj + s->object_size, SLAB_RED_INACTIVE, s->fp_offset - s->object_size);
        if (s->poison) {
                memset(obj, SLAB_POISON_FREE, s->object_size - 1);
                obj[s->object_size - 1] = (char) SLAB_POISON_END;
        }
        return true;
}

/* ---- alloc and free ---- */

static void slab_atfork_child(void) {
        __atomic_fetch_add(&slab_fork_gen, 1, __ATOMIC_RELAXED);
        /* The lock may have been held by a thread that does not exist here. */
        pthread_mutex_init(&slab_registry_lock, NULL);
        /* membarrier registrations belong to the address space: the child's
         * new one must register again. */
        slab_rseq_setup();
}

static void slab_setup_once(void) {
        slab_rseq_setup();
        (void) pthread_atfork(NULL, NULL, slab_atfork_child);
}

static inline bool slab_inherited(const mb_cache *s) {
        return s->fork_gen != __atomic_load_n(&slab_fork_gen, __ATOMIC_RELAXED);
}

static inline void *slab_pop(mb_cache *s, struct slab_pcpu *p, struct cache_cpu *cc, int64_t *flush) {
        void *obj = cc->freelist, *next = slab_get_fp(s, obj);

        /* prefetch_freepointer(): the next pop reads the next object. */
        if (next)
                __builtin_prefetch((char *) next + s->fp_offset);
        cc->freelist = next;
        cc->count--;
        cc->allocs++;
        slab_stock_charge(s->ctx, p, s->stat, s->object_bytes, flush);
        return obj;
}

/* ___slab_alloc(): this CPU's list is empty.  Called with @p locked,
 * returns with it unlocked. */
static void *slab_alloc_slow(mb_cache *s, struct slab_pcpu *p, struct cache_cpu *cc, int64_t *flush) {
        struct slab_ctx *ctx = s->ctx;
        struct mb_slab *slab;
        unsigned cpu;
        void *obj;
        int r;

        if (slab_take_partial(s, &cc->freelist, &cc->count)) {
                obj = slab_pop(s, p, cc, flush);
                slab_pcpu_unlock(p);
                return obj;
        }
        slab_pcpu_unlock(p);

        slab = slab_new(s); /* may talk to the daemon: no lock held */
        if (!slab)
                return NULL;

        p = slab_pcpu_lock_this(ctx, &cpu);
        cc = &s->cpu[cpu];
        pthread_mutex_lock(&s->lock);
        r = slab_table_insert(s, slab);
        if (r < 0) {
                pthread_mutex_unlock(&s->lock);
                slab_pcpu_unlock(p);
                (void) mb_page_free(s->client, slab->page);
                free(slab);
                mb_set_error("slab cache %s: out of memory for slab metadata", s->name);
                errno = ENOMEM;
                return NULL;
        }
        s->nr_slabs++;
        s->slabs_allocated++;
        if (!cc->freelist) {
                /* The new slab becomes this CPU's active slab. */
                cc->freelist = slab->freelist;
                cc->count = slab->nfree;
                slab->freelist = NULL;
                slab->nfree = 0;
        } else
                /* Someone refilled this CPU meanwhile: keep the slab. */
                slab_move(s, slab, SLAB_ON_EMPTY);
        pthread_mutex_unlock(&s->lock);
        obj = slab_pop(s, p, cc, flush);
        slab_pcpu_unlock(p);
        return obj;
}

void *mb_cache_alloc(mb_cache *s) {
        struct slab_pcpu *p;
        struct cache_cpu *cc;
        int64_t flush = 0;
        unsigned cpu;
        void *obj;

        if (_unlikely_(s->debug | (s->fork_gen != __atomic_load_n(&slab_fork_gen, __ATOMIC_RELAXED)))) {
                if (slab_inherited(s)) {
                        mb_set_error("slab cache %s: inherited from the parent process; unusable after fork()",
                                     s->name);
                        errno = ECHILD;
                        return NULL;
                }
        }
        p = slab_pcpu_lock_this(s->ctx, &cpu);
        cc = &s->cpu[cpu];
        if (_likely_(cc->freelist)) {
                obj = slab_pop(s, p, cc, &flush);
                slab_pcpu_unlock(p);
        } else {
                obj = slab_alloc_slow(s, p, cc, &flush);
                if (!obj)
                        return NULL;
        }
        if (_unlikely_(flush))
                slab_stat_write(s->ctx, s->stat, flush);
        if (_unlikely_(s->debug))
                slab_debug_alloc(s, obj);
        return obj;
}

/* The per-CPU list is over cpu_max: keep the most recently freed half,
 * give the rest back to the slabs.  Called with @p locked, unlocks it. */
static void slab_cpu_trim(mb_cache *s, struct slab_pcpu *p, struct cache_cpu *cc) {
        uint32_t keep = s->cpu_max / 2;
        void *last = cc->freelist, *rest;

        for (uint32_t i = 1; i < keep; i++)
                last = slab_get_fp(s, last);
        rest = slab_get_fp(s, last);
        slab_set_fp(s, last, NULL);
        cc->count = keep;
        slab_pcpu_unlock(p);
        slab_flush_list(s, rest);
}

void mb_cache_free(mb_cache *s, void *obj) {
        unsigned cpu;
        struct slab_pcpu *p;
        struct cache_cpu *cc;
        int64_t flush = 0;

        if (_unlikely_(!obj))
                return;
        if (_unlikely_(s->debug | (s->fork_gen != __atomic_load_n(&slab_fork_gen, __ATOMIC_RELAXED)))) {
                if (slab_inherited(s))
                        return;
                if (!slab_debug_free(s, obj))
                        return;
        }

        p = slab_pcpu_lock_this(s->ctx, &cpu);
        cc = &s->cpu[cpu];
        slab_set_fp(s, obj, cc->freelist);
        cc->freelist = obj;
        cc->frees++;
        slab_stock_uncharge(s->ctx, p, s->stat, s->object_bytes, &flush);
        if (_unlikely_(++cc->count > s->cpu_max))
                slab_cpu_trim(s, p, cc);
        else
                slab_pcpu_unlock(p);
        if (_unlikely_(flush))
                slab_stat_write(s->ctx, s->stat, flush);
}

/* flush_all() for one cache: every CPU's list back to the slabs.  Returns
 * the number of pages given back on the way. */
static size_t slab_drain_cpus(mb_cache *s) {
        size_t n = 0;

        for (unsigned cpu = 0; cpu < s->ctx->ncpus; cpu++) {
                struct slab_pcpu *p = slab_pcpu_lock_cpu(s->ctx, cpu);
                struct cache_cpu *cc = &s->cpu[cpu];
                void *list;

                list = cc->freelist;
                cc->freelist = NULL;
                cc->count = 0;
                slab_pcpu_unlock(p);
                n += slab_flush_list(s, list);
        }
        return n;
}

/* Give up to @max empty slabs back. */
static size_t slab_release_empty(mb_cache *s, size_t max) {
        struct mb_slab *chain = NULL;
        size_t n = 0;

        pthread_mutex_lock(&s->lock);
        while (n < max && !slab_list_empty(&s->empty)) {
                slab_discard(s, slab_container_of(s->empty.next, struct mb_slab, node), &chain);
                n++;
        }
        pthread_mutex_unlock(&s->lock);
        return slab_discard_finish(s, chain);
}

size_t mb_cache_shrink(mb_cache *s) {
        size_t n;

        if (slab_inherited(s))
                return 0;
        n = slab_drain_cpus(s);

        return n + slab_release_empty(s, SIZE_MAX);
}

/* ---- shrinker (reclaimable caches) ---- */

static int slab_key_cmp(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

/*
 * count_objects(): the empty slabs, plus the slabs that draining the per-CPU
 * lists would empty.  Those are not simply cached / objects-per-slab: a slab
 * whose free objects are split between its own free list (partial) and
 * the CPU lists empties too, so that quotient undercounts, and a scan asked
 * for "everything the count said" left empty slabs behind.  So the CPU
 * lists are walked: their objects' slab keys are gathered (each CPU under
 * its lock), then, under the cache lock, a slab counts when its own free
 * objects plus those on CPU lists make all of its objects.  Racy (the lists
 * change as soon as the locks drop), as count_objects() may be, but never
 * dereferences a slab it did not look up under the cache lock.  Runs only
 * when the daemon asks for pages.
 */
static unsigned long slab_shrinker_count(void *userdata) {
        mb_cache *s = userdata;
        struct slab_ctx *ctx = s->ctx;
        _cleanup_(freep) uint64_t *keys = NULL;
        size_t nkeys = 0, alloc = 0;
        uint64_t cached = 0, would_empty = 0;
        uintptr_t base;

        if (slab_inherited(s))
                return 0;
        for (unsigned cpu = 0; cpu < ctx->ncpus; cpu++)
                cached += __atomic_load_n(&s->cpu[cpu].count, __ATOMIC_RELAXED);
        if (cached == 0)
                return (unsigned long) __atomic_load_n(&s->nr_empty, __ATOMIC_RELAXED);

        pthread_mutex_lock(&s->lock);
        base = s->base; /* known: there are objects */
        pthread_mutex_unlock(&s->lock);
        for (unsigned cpu = 0; cpu < ctx->ncpus; cpu++) {
                struct slab_pcpu *p = slab_pcpu_lock_cpu(ctx, cpu);
                struct cache_cpu *cc = &s->cpu[cpu];

                if (nkeys + cc->count > alloc) {
                        size_t a = MB_MAX(2 * alloc, nkeys + cc->count);
                        uint64_t *k = realloc(keys, a * sizeof(*k));

                        if (!k) {
                                slab_pcpu_unlock(p);
                                /* The lower bound, without the walk. */
                                return (unsigned long) (__atomic_load_n(&s->nr_empty, __ATOMIC_RELAXED) +
                                                        cached / s->objects);
                        }
                        keys = k;
                        alloc = a;
                }
                for (void *o = cc->freelist; o; o = slab_get_fp(s, o))
                        keys[nkeys++] = ((uintptr_t) o - base) >> ctx->page_shift;
                slab_pcpu_unlock(p);
        }
        qsort(keys, nkeys, sizeof(*keys), slab_key_cmp);

        pthread_mutex_lock(&s->lock);
        for (size_t i = 0, run; i < nkeys; i += run) {
                struct mb_slab *slab;

                for (run = 1; i + run < nkeys && keys[i + run] == keys[i]; run++)
                        ;
                slab = slab_table_lookup(s, (void *) (base + (uintptr_t) (keys[i] << ctx->page_shift)));
                if (slab && slab->list != SLAB_ON_EMPTY && slab->nfree + run == s->objects)
                        would_empty++;
        }
        would_empty += s->nr_empty;
        pthread_mutex_unlock(&s->lock);
        return (unsigned long) would_empty;
}

static unsigned long slab_shrinker_scan(void *userdata, unsigned long nr_to_scan) {
        mb_cache *s = userdata;
        size_t n;

        if (slab_inherited(s))
                return 0;
        n = slab_drain_cpus(s);
        if (n < nr_to_scan)
                n += slab_release_empty(s, nr_to_scan - n);
        return (unsigned long) n;
}

/* ---- per-client context ---- */

static void slab_ctx_free(struct slab_ctx *ctx) {
        if (!ctx)
                return;
        pthread_mutex_destroy(&ctx->lock);
        free(ctx->pcpu);
        free(ctx);
}

/* Find or make the slab context of @c and take a reference.  Registry lock
 * held by the caller. */
static int slab_ctx_get(mb_client *c, struct slab_ctx **ret) {
        struct slab_ctx *ctx;
        size_t ps;

        for (ctx = slab_registry; ctx; ctx = ctx->next)
                if (ctx->client == c) {
                        ctx->refs++;
                        *ret = ctx;
                        return 0;
                }

        ps = mb_page_size(c);
        if (!slab_is_pow2(ps))
                return -EINVAL;
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
                return -ENOMEM;
        ctx->client = c;
        ctx->refs = 1;
        ctx->ncpus = mb_client_ncpus(c);
        ctx->page_size = ps;
        ctx->page_shift = (unsigned) __builtin_ctzl(ps);
        pthread_mutex_init(&ctx->lock, NULL);
        slab_list_init(&ctx->caches);
        ctx->pcpu = aligned_alloc(MB_CACHELINE_BYTES, ctx->ncpus * sizeof(struct slab_pcpu));
        if (!ctx->pcpu) {
                slab_ctx_free(ctx);
                return -ENOMEM;
        }
        memset(ctx->pcpu, 0, ctx->ncpus * sizeof(struct slab_pcpu));
        ctx->next = slab_registry;
        slab_registry = ctx;
        *ret = ctx;
        return 0;
}

static struct slab_ctx *slab_ctx_find(mb_client *c) {
        struct slab_ctx *ctx;

        for (ctx = slab_registry; ctx; ctx = ctx->next)
                if (ctx->client == c)
                        return ctx;
        return NULL;
}

static void slab_ctx_drain(struct slab_ctx *ctx) {
        for (unsigned cpu = 0; cpu < ctx->ncpus; cpu++) {
                int64_t flush[_SLAB_STAT_NR];

                slab_pcpu_lock_cpu(ctx, cpu);
                slab_pcpu_drain(ctx, &ctx->pcpu[cpu], flush);
                slab_pcpu_unlock(&ctx->pcpu[cpu]);
                for (unsigned i = 0; i < _SLAB_STAT_NR; i++)
                        slab_stat_write(ctx, i, flush[i]);
        }
}

/* Drop a reference; the last one writes out the stocks and frees the
 * context.  Registry lock held by the caller. */
static void slab_ctx_put(struct slab_ctx *ctx) {
        if (--ctx->refs > 0)
                return;
        slab_ctx_drain(ctx);
        for (struct slab_ctx **pp = &slab_registry; *pp; pp = &(*pp)->next)
                if (*pp == ctx) {
                        *pp = ctx->next;
                        break;
                }
        slab_ctx_free(ctx);
}

/* ---- create / destroy ---- */

static bool slab_debug_env(void) {
        const char *e = secure_getenv(SLAB_DEBUG_ENV);

        return e && (strcmp(e, "1") == 0 || strcmp(e, "yes") == 0 || strcmp(e, "true") == 0);
}

/* calculate_min_partial(): ilog2(size) / 2, clamped to [5, 10]. */
static unsigned slab_empty_keep(size_t object_bytes) {
        unsigned n = (unsigned) ((63 - __builtin_clzll((unsigned long long) object_bytes)) / 2);

        return MB_MAX(5u, MB_MIN(10u, n));
}

/* Lay the object out in its slot; see "Metadata" and "Debug mode" above. */
static int slab_layout(mb_cache *s, size_t page_size) {
        size_t size = MB_MAX(s->object_size, (size_t) SLAB_MIN_OBJECT_BYTES), slot;

        if (s->debug) {
                /* [red zone][object][red zone][free pointer][tag] */
                s->obj_offset = slab_align_up(SLAB_REDZONE_BYTES, s->align);
                s->fp_offset = (uint32_t) slab_align_up(s->object_size + SLAB_REDZONE_BYTES, sizeof(void *));
                slot = s->obj_offset + s->fp_offset + sizeof(void *) + sizeof(uint64_t);
                s->poison = !s->ctor;
        } else if (s->ctor) {
                /* [object][free pointer]: the constructed state survives free. */
                s->obj_offset = 0;
                s->fp_offset = (uint32_t) slab_align_up(size, sizeof(void *));
                slot = s->fp_offset + sizeof(void *);
        } else {
                /* [object], free pointer inside the free object. */
                s->obj_offset = 0;
                s->fp_offset = 0;
                slot = size;
        }
        slot = slab_align_up(slot, s->align);
        if (slot > page_size)
                return -EINVAL;
        s->object_bytes = (uint32_t) slot;
        s->objects = page_size / slot;
        return 0;
}

mb_cache *mb_cache_create(mb_client *c, const char *name, size_t object_size, size_t align, unsigned flags,
                          void (*ctor)(void *object)) {
        _cleanup_(freep) mb_cache *s = NULL;
        size_t ps, sys_ps;
        int r;

        if (!c || !name || object_size == 0 || (flags & ~(MB_CACHE_RECLAIMABLE | MB_CACHE_DEBUG))) {
                mb_set_error("mb_cache_create: invalid arguments");
                errno = EINVAL;
                return NULL;
        }
        ps = mb_page_size(c);
        sys_ps = (size_t) sysconf(_SC_PAGESIZE);
        if (align == 0)
                align = SLAB_MIN_ALIGN_BYTES;
        if (!slab_is_pow2(align) || align > MB_MIN(ps, sys_ps)) {
                mb_set_error("slab cache %s: alignment %zu is not a power of two up to %zu", name, align,
                             MB_MIN(ps, sys_ps));
                errno = EINVAL;
                return NULL;
        }
        if (!slab_is_pow2(ps)) {
                mb_set_error("slab cache %s: page size %zu is not a power of two", name, ps);
                errno = EINVAL;
                return NULL;
        }

        (void) pthread_once(&slab_setup_once_flag, slab_setup_once);
        s = aligned_alloc(MB_CACHELINE_BYTES, slab_align_up(sizeof(*s), MB_CACHELINE_BYTES));
        if (!s) {
                errno = ENOMEM;
                return NULL;
        }
        memset(s, 0, sizeof(*s));
        s->client = c;
        s->fork_gen = __atomic_load_n(&slab_fork_gen, __ATOMIC_RELAXED);
        s->flags = flags;
        if (slab_debug_env())
                s->flags |= MB_CACHE_DEBUG;
        s->debug = s->flags & MB_CACHE_DEBUG;
        s->stat = (flags & MB_CACHE_RECLAIMABLE) ? SLAB_STAT_RECLAIMABLE : SLAB_STAT_UNRECLAIMABLE;
        s->object_size = object_size;
        s->align = MB_MAX(align, (size_t) SLAB_MIN_ALIGN_BYTES);
        s->ctor = ctor;
        if (slab_layout(s, ps) < 0) {
                mb_set_error("slab cache %s: objects of %zu bytes (align %zu%s) do not fit in a %zu-byte page; "
                             "use mb_page_alloc_bulk() for them",
                             name, object_size, align, s->debug ? ", debug" : "", ps);
                errno = EINVAL;
                return NULL;
        }
        s->cpu_max = (uint32_t) MB_MAX((size_t) SLAB_CPU_MAX_MIN_OBJECTS,
                                       MB_MIN((size_t) SLAB_CPU_MAX_MAX_OBJECTS,
                                              MB_MAX(2 * s->objects, SLAB_CPU_LIST_BYTES / s->object_bytes)));
        s->empty_keep = slab_empty_keep(s->object_bytes);
        slab_list_init(&s->partial);
        slab_list_init(&s->empty);
        slab_list_init(&s->ctx_node);
        s->name = strdup(name);
        if (!s->name) {
                errno = ENOMEM;
                return NULL;
        }

        pthread_mutex_lock(&slab_registry_lock);
        r = slab_ctx_get(c, &s->ctx);
        pthread_mutex_unlock(&slab_registry_lock);
        if (r < 0) {
                free(s->name);
                errno = -r;
                return NULL;
        }
        s->cpu = aligned_alloc(MB_CACHELINE_BYTES, s->ctx->ncpus * sizeof(struct cache_cpu));
        if (!s->cpu) {
                r = -ENOMEM;
                goto fail;
        }
        memset(s->cpu, 0, s->ctx->ncpus * sizeof(struct cache_cpu));
        pthread_mutex_init(&s->lock, NULL);

        if (flags & MB_CACHE_RECLAIMABLE) {
                s->shrinker = (struct mb_shrinker) {
                        .count = slab_shrinker_count,
                        .scan = slab_shrinker_scan,
                        .userdata = s,
                };
                r = mb_register_shrinker(c, &s->shrinker);
                if (r < 0) {
                        pthread_mutex_destroy(&s->lock);
                        goto fail;
                }
                s->shrinker_registered = true;
        }

        pthread_mutex_lock(&s->ctx->lock);
        slab_list_add_tail(&s->ctx->caches, &s->ctx_node);
        pthread_mutex_unlock(&s->ctx->lock);
        return TAKE_PTR(s);

fail:
        free(s->cpu);
        free(s->name);
        pthread_mutex_lock(&slab_registry_lock);
        slab_ctx_put(s->ctx);
        pthread_mutex_unlock(&slab_registry_lock);
        errno = -r;
        return NULL;
}

/* Up to @max addresses of live objects of @slab: the objects not on its
 * free list (the per-CPU lists were drained before). */
static size_t slab_live_objects(mb_cache *s, struct mb_slab *slab, void **ret, size_t max) {
        size_t n = 0, words = DIV_ROUND_UP(s->objects, 64);
        uint64_t freemap[DIV_ROUND_UP(4096, 64)];
        _cleanup_(freep) uint64_t *big = NULL;
        uint64_t *map = freemap;

        if (words > ELEMENTSOF(freemap)) {
                big = calloc(words, sizeof(uint64_t));
                if (!big)
                        return 0;
                map = big;
        } else
                memset(freemap, 0, sizeof(freemap));
        for (void *o = slab->freelist; o; o = slab_get_fp(s, o)) {
                size_t i = (size_t) ((char *) o - slab->page - s->obj_offset) / s->object_bytes;

                map[i / 64] |= UINT64_C(1) << (i % 64);
        }
        for (size_t i = 0; i < s->objects && n < max; i++)
                if (!(map[i / 64] & (UINT64_C(1) << (i % 64))))
                        ret[n++] = slab_object(s, slab, i);
        return n;
}

size_t mb_cache_destroy(mb_cache *s) {
        void *addr[SLAB_LIVE_REPORT_MAX];
        size_t live = 0, naddr = 0, leaked_pages = 0;
        struct slab_ctx *ctx;

        if (!s)
                return 0;
        ctx = s->ctx;
        if (slab_inherited(s)) {
                /* The child's copy: no page is ours to give back, and the
                 * context may be shared with other inherited caches, so it
                 * stays (the child cannot use it anyway). */
                for (size_t i = 0; i < s->table_size; i++)
                        free(s->table[i]);
                free(s->table);
                free(s->cpu);
                free(s->name);
                free(s);
                return 0;
        }
        if (s->shrinker_registered)
                (void) mb_unregister_shrinker(s->client, &s->shrinker);

        pthread_mutex_lock(&ctx->lock);
        slab_list_del(&s->ctx_node);
        pthread_mutex_unlock(&ctx->lock);

        slab_drain_cpus(s);
        (void) slab_release_empty(s, SIZE_MAX);

        /* What is left holds live objects (kmem_cache_destroy() complains
         * and leaks them too): report them; their pages stay allocated to
         * the client, so that stray users corrupt nothing else, and go back
         * with mb_close(). */
        for (size_t i = 0; i < s->table_size; i++) {
                struct mb_slab *slab = s->table[i];

                if (!slab)
                        continue;
                live += s->objects - slab->nfree;
                if (naddr < SLAB_LIVE_REPORT_MAX)
                        naddr += slab_live_objects(s, slab, addr + naddr, SLAB_LIVE_REPORT_MAX - naddr);
                leaked_pages++;
                free(slab);
        }
        if (live > 0) {
                char buf[SLAB_LIVE_REPORT_MAX * 24 + 8] = "";
                size_t len = 0;

                for (size_t i = 0; i < naddr; i++)
                        len += (size_t) snprintf(buf + len, sizeof(buf) - len, " %p", addr[i]);
                if (naddr < live)
                        snprintf(buf + len, sizeof(buf) - len, " ...");
                slab_report(s, "destroyed with %zu live object%s:%s (%zu slab page%s left allocated)", live,
                            live == 1 ? "" : "s", buf, leaked_pages, leaked_pages == 1 ? "" : "s");
        }

        free(s->table);
        pthread_mutex_destroy(&s->lock);
        free(s->cpu);
        free(s->name);
        free(s);

        pthread_mutex_lock(&slab_registry_lock);
        slab_ctx_put(ctx);
        pthread_mutex_unlock(&slab_registry_lock);
        return live;
}

/* ---- statistics ---- */

int mb_cache_stats(mb_cache *s, struct mb_cache_stats *ret) {
        struct mb_cache_stats st = {};
        size_t ps;

        if (!s || !ret)
                return -EINVAL;
        ps = s->ctx->page_size;
        st.name = s->name;
        st.flags = s->flags;
        st.object_size = s->object_size;
        st.align = s->align;
        st.object_bytes = s->object_bytes;
        st.objects_per_slab = s->objects;
        st.metadata_bytes_per_slab = sizeof(struct mb_slab) + 2 * sizeof(struct mb_slab *);
        st.overhead_bytes_per_object =
                (double) (ps + st.metadata_bytes_per_slab) / (double) s->objects - (double) s->object_size;

        for (unsigned cpu = 0; cpu < s->ctx->ncpus; cpu++) {
                struct slab_pcpu *p = slab_pcpu_lock_cpu(s->ctx, cpu);

                st.allocs += s->cpu[cpu].allocs;
                st.frees += s->cpu[cpu].frees;
                st.cpu_free_objects += s->cpu[cpu].count;
                slab_pcpu_unlock(p);
        }
        st.live_objects = st.allocs - st.frees;

        pthread_mutex_lock(&s->lock);
        st.slabs = s->nr_slabs;
        st.partial_slabs = s->nr_partial;
        st.empty_slabs = s->nr_empty;
        st.slabs_allocated = s->slabs_allocated;
        st.slabs_freed = s->slabs_freed;
        pthread_mutex_unlock(&s->lock);
        st.errors = __atomic_load_n(&s->errors, __ATOMIC_RELAXED);

        *ret = st;
        return 0;
}

int mb_slab_stats(mb_client *c, struct mb_slab_stats *ret) {
        struct mb_slab_stats st = {};
        struct slab_ctx *ctx;

        if (!c || !ret)
                return -EINVAL;
        pthread_mutex_lock(&slab_registry_lock);
        ctx = slab_ctx_find(c);
        if (ctx) {
                for (unsigned cpu = 0; cpu < ctx->ncpus; cpu++) {
                        struct slab_pcpu *p = slab_pcpu_lock_cpu(ctx, cpu);

                        st.charged_pages += p->charged_pages;
                        st.uncharged_pages += p->uncharged_pages;
                        st.stock_bytes += (uint64_t) p->nr_bytes;
                        st.pending_reclaimable_bytes += p->pending[SLAB_STAT_RECLAIMABLE];
                        st.pending_unreclaimable_bytes += p->pending[SLAB_STAT_UNRECLAIMABLE];
                        slab_pcpu_unlock(p);
                }
                st.reclaimable_bytes = __atomic_load_n(&ctx->written[SLAB_STAT_RECLAIMABLE], __ATOMIC_RELAXED);
                st.unreclaimable_bytes = __atomic_load_n(&ctx->written[SLAB_STAT_UNRECLAIMABLE], __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&slab_registry_lock);
        *ret = st;
        return 0;
}

void mb_slab_drain(mb_client *c) {
        struct slab_ctx *ctx;

        pthread_mutex_lock(&slab_registry_lock);
        ctx = slab_ctx_find(c);
        if (ctx)
                slab_ctx_drain(ctx);
        pthread_mutex_unlock(&slab_registry_lock);
}
