/* SPDX-License-Identifier: MIT */
/*
 * slab.h - slab caches on broker pages, with byte-grained charging: what
 * the slab modules share (not installed).
 *
 *   slab_cache.c   caches: create, destroy, the alloc/free fast paths, stats
 *   slab_page.c    slab pages: the page->slab table, partial and empty lists
 *   slab_ctx.c     the per-client context and its byte stocks (obj_stock)
 *   slab_reclaim.c draining the per-CPU lists, shrinking, the shrinker
 *   slab_debug.c   red zones, poison, bad-free reports (MB_CACHE_DEBUG)
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
 *    uses), every cache keeps a list of free objects: an array of object
 *    pointers (LIFO) and one 64-bit word (count, operations), as tcmalloc's
 *    per-CPU slabs.  In rseq mode mb_cache_alloc() and mb_cache_free() are
 *    each one restartable sequence that pops or pushes a pointer and
 *    commits with the single store of the word: no lock, no atomic
 *    instruction, no access to any line another CPU writes (the cache's
 *    read-mostly fields, this CPU's word, its slots and its per-CPU lock
 *    word, which the sequence only reads), no access to the object on
 *    alloc.  The per-CPU lock of pcpu_lock.h (the kernel's local_lock
 *    around kmem_cache_cpu) is taken by the slow paths of this CPU and by
 *    remote operations (drain, shrink, stats) from other CPUs: a compare
 *    and swap, then membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ) on
 *    the owning CPU, which aborts a sequence that read the lock word free
 *    before the swap.  A sequence that finds the lock held, the list empty
 *    or full leaves to the locked path.  MEMBROKER_SLAB_RSEQ=0 (or no rseq)
 *    runs every operation under the lock, taken in atomic mode.
 *  - When the per-CPU list is empty, the CPU takes the whole free lists of
 *    slabs of the cache at once, until it holds half of `cpu_max`: its own
 *    partial slabs first (SLUB's per-CPU partial list: a slab joins the
 *    partial list of the CPU that last took objects from it, so that a
 *    CPU's objects stay in its own slabs and two CPUs do not write objects
 *    of one cache line), then the cache's empty slabs, then other CPUs'
 *    partial slabs, else a new page (a new slab becomes the CPU's active
 *    slab, cf. SLUB's c->slab / get_freelist()).  When a per-CPU list
 *    passes `cpu_max` objects (twice a slab's objects, at least what 32 KiB
 *    hold, at most 1024), its oldest half goes back to the slabs the
 *    objects belong to, in one batch under the cache lock (like SLUB's
 *    put_cpu_partial()/__slab_free(), or the per-CPU "sheaves" of newer
 *    kernels).
 *  - Remote frees: an object freed on another CPU than the one it was
 *    allocated on simply goes onto the freeing CPU's list, touching no line
 *    of the allocating CPU (where SLUB's __slab_free() would cmpxchg the
 *    slab's shared freelist); objects are not owned by CPUs, only by slabs,
 *    and every slab's free list and counters are changed under the cache
 *    lock when a list is trimmed.  The half a trim takes off goes first to
 *    the cache's barn (the newest SLUB's barn of full sheaves, tcmalloc's
 *    transfer cache), an array of up to two trims' worth of pointers, from
 *    which an empty CPU list refills before it looks at any slab: a
 *    producer and a consumer pass objects by copying pointers under a
 *    short lock, never by walking cold objects into and out of slab free
 *    lists under the cache lock.  A drain and a shrink empty the barn into
 *    the slabs.  A thread that migrates between reading
 *    its CPU and its sequence's commit is restarted by the kernel.
 *  - Per cache: partial slabs (some objects free; per CPU, above), empty
 *    slabs (all free) and full slabs (on no list, like SLUB's).  Past
 *    `empty_keep` empty slabs (SLUB's calculate_min_partial(): 5..10 by
 *    object size) an empty slab is given back at once; mb_cache_shrink()
 *    gives every empty slab back (like __kmem_cache_shrink()).
 *    Reclaimable caches register a shrinker: count = empty slabs + the
 *    slabs that draining the per-CPU lists would empty, scan = drain and
 *    give them back.
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
 * mb_cache_stats() `overhead_bytes_per_object`.  Per cache and CPU slot,
 * outside the broker pages: the list's word (a cache line) and its array
 * of cpu_cap object pointers (cpu_max + 1, or more on large pages: 4 KiB
 * for 64-byte objects, 8 KiB at most on 4 KiB pages), which a CPU that
 * never uses the cache never touches.
 *
 * Byte-grained charging and the slab stat
 * ---------------------------------------
 * Two layers, as in the kernel:
 *  1. Physical: slab pages are real broker pages, charged to the tenant in
 *     pages through the page stock.  `usage` and `pages`
 *     include them, whether their objects are in use or not.
 *  2. Objects: like the kernel's obj_stock (mm/memcontrol.c
 *     consume_obj_stock(), refill_obj_stock(), obj_cgroup_charge()), every
 *     CPU slot has a byte stock.  Objects are charged when they enter a
 *     CPU's list (a refill: whole slabs' free lists at a time) and
 *     uncharged when they leave it (a trim, a drain), `object_bytes` each
 *     (object plus its in-slab metadata and padding, as the kernel charges
 *     obj_full_size()), so that the fast paths, which move objects between
 *     a CPU list and the application, need no byte-stock update: the one
 *     store that commits a sequence cannot cover both the cache's list and
 *     the CPU's stock, which all caches share.  When the stock runs dry,
 *     whole pages' worth of bytes are charged (counted in `charged_pages`)
 *     and the leftover stays in the stock; when it holds more than a page,
 *     the whole pages' worth are uncharged (`uncharged_pages`) and the
 *     remainder (< 1 page) stays.  Invariant, per client:
 *       (charged_pages - uncharged_pages) * page_size
 *           == bytes of live objects + bytes on the per-CPU lists
 *              + bytes in the byte stocks,
 *     the byte stocks holding at most ncpus * page_size bytes and the lists
 *     at most cpu_max objects per cache and CPU; mb_slab_stats() reports
 *     the last two together as `stock_bytes`.  The byte charge is the
 *     object-level view of the same memory: it does not take more pages
 *     from the daemon (the slab pages already are charged); the difference
 *     between slab pages and charged bytes is the slab's fragmentation
 *     (empty and partial slabs, metadata, page tails).
 *  3. The stat: `slab_reclaimable` / `slab_unreclaimable` are the bytes of
 *     live objects of reclaimable / other caches (NR_SLAB_RECLAIMABLE_B /
 *     NR_SLAB_UNRECLAIMABLE_B), `slab` their sum.  Deltas gather in the
 *     per-CPU stock with the charges (so the objects on a CPU's lists count
 *     as if live until they leave it) and are written into the client's
 *     stats region with mb_client_stat_add() when they pass a page's
 *     worth, like the kernel's __account_obj_stock(); the daemon folds them
 *     through rstat like every activity counter.  So the stat may lag by
 *     < page_size bytes per item per CPU, plus the bytes on the CPU's lists
 *     (at most cpu_max objects per cache and CPU: about 32 KiB, at least two
 *     slabs); mb_slab_drain() (and destroying the client's last cache)
 *     writes everything but the bytes on the lists, which it keeps pending,
 *     after which the stat is exact.
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
 * alloc and free paths pay one predictable branch for it (shared with the
 * fork check: fast_gen).  (Without debug
 * mode, frees of foreign pointers are still detected, and dropped, when the
 * per-CPU list is flushed, but a double free is not.)
 *
 * Locks, in order: slab_registry_lock -> ctx->lock -> per-CPU slab lock ->
 * cache->lock (mb_slab_stats() and mb_slab_drain() hold ctx->lock while
 * they take each CPU's lock, to count the caches' list bytes).
 * mb_page_alloc()/mb_page_free() and constructors are called with no lock
 * held.
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
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "macros.h"
#include "core/mb_internal.h"
#include "membroker.h"
#include "core/pcpu_lock.h"

#define SLAB_MIN_OBJECT_BYTES 8u
#define SLAB_MIN_ALIGN_BYTES 8u
#define SLAB_REDZONE_BYTES 16u
#define SLAB_DEBUG_ENV "MEMBROKER_SLAB_DEBUG"
#define SLAB_LIVE_REPORT_MAX 5u   /* addresses of live objects printed by destroy */
#define SLAB_CPU_MAX_MIN_OBJECTS 8u
#define SLAB_CPU_MAX_MAX_OBJECTS 1024u
#define SLAB_CPU_LIST_BYTES (32u * 1024u) /* what a per-CPU list may park, at least 2 slabs' worth */
#define SLAB_MAX_CPUS 65536u      /* a slab's owner CPU is 16 bits */
#define SLAB_DEBUG_GEN 0x80000000u /* fast_gen of a debug cache: fork_gen + this */
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
        uint16_t list;              /* SLAB_ON_* */
        uint16_t cpu;               /* the CPU that last took objects from it:
                                     * whose partial list it joins */
};

/* The client's per-CPU slab state: the lock that serialises all slab work
 * on this CPU slot, and the byte stock (the kernel's obj_stock_pcp). */
struct slab_pcpu {
        int lock;                         /* the per-CPU lock word (pcpu_lock.h) */
        uint32_t _pad;
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
        bool rseq;                        /* per-CPU locks in rseq mode (pcpu_lock.h) */
        ptrdiff_t rseq_area;              /* __rseq_offset: the struct rseq */
        ptrdiff_t cpu_offset;             /* mb_client_cpu_offset() */
};

/*
 * A cache's per-CPU list: an array of free objects (LIFO, the most
 * recently freed on top) and one 64-bit word, as tcmalloc's per-CPU slabs
 * keep a "current" index: the rseq fast paths commit an operation with the
 * single store of the word.
 *
 *   word bits  0..23  count   objects in slots[]
 *        bits 24..63  ops     fast-path operations since the last fold
 *
 * The fast paths never touch the counters below: allocs + frees since the
 * fold == ops, and frees - allocs == count - base_count, so a holder of the
 * per-CPU lock folds ops into allocs and frees (cache_cpu_fold()) before
 * it changes the list itself.  A sequence whose ops would reach bit 63
 * takes the locked path instead, which folds: the field never wraps.
 */
#define CACHE_CPU_COUNT_BITS 24u
#define CACHE_CPU_COUNT_MASK ((UINT64_C(1) << CACHE_CPU_COUNT_BITS) - 1)
#define CACHE_CPU_OPS_ONE (UINT64_C(1) << CACHE_CPU_COUNT_BITS)

struct cache_cpu {
        uint64_t word;           /* count | ops << CACHE_CPU_COUNT_BITS */
        void **slots;            /* room for the cache's cpu_max objects */
        uint64_t allocs;         /* folded; per-CPU lock held */
        uint64_t frees;
        uint64_t base_count;     /* count at the last fold */
} _cacheline_aligned_;

_Static_assert(offsetof(struct cache_cpu, word) == 0 && offsetof(struct cache_cpu, slots) == 8,
               "the sequences read word and slots at (%[cc]) and 8(%[cc])");

/* Objects on @cc's list: a racy peek from anywhere, exact under the lock. */
static inline uint32_t cache_cpu_count(const struct cache_cpu *cc) {
        return (uint32_t) (__atomic_load_n(&cc->word, __ATOMIC_RELAXED) & CACHE_CPU_COUNT_MASK);
}

/* The allocs and frees of @cc including the unfolded ops.  Lock held. */
static inline void cache_cpu_counters(const struct cache_cpu *cc, uint64_t *ret_allocs, uint64_t *ret_frees) {
        uint64_t w = __atomic_load_n(&cc->word, __ATOMIC_RELAXED);
        int64_t ops = (int64_t) (w >> CACHE_CPU_COUNT_BITS);
        int64_t d = (int64_t) (w & CACHE_CPU_COUNT_MASK) - (int64_t) cc->base_count;

        *ret_allocs = cc->allocs + (uint64_t) ((ops - d) / 2);
        *ret_frees = cc->frees + (uint64_t) ((ops + d) / 2);
}

/* Fold the fast paths' ops into allocs and frees.  Per-CPU lock held (no
 * sequence of that CPU runs), before the holder changes the list. */
static inline void cache_cpu_fold(struct cache_cpu *cc) {
        uint64_t count = cc->word & CACHE_CPU_COUNT_MASK;

        cache_cpu_counters(cc, &cc->allocs, &cc->frees);
        cc->base_count = count;
        __atomic_store_n(&cc->word, count, __ATOMIC_RELAXED);
}

/* Set the count of the folded @cc.  Per-CPU lock held. */
static inline void cache_cpu_set_count(struct cache_cpu *cc, uint32_t count) {
        cc->base_count = count;
        __atomic_store_n(&cc->word, (uint64_t) count, __ATOMIC_RELAXED);
}

/* Link the @n objects of @v through their free pointers (into a list for
 * the slab functions); returns its head. */
static inline void *cache_cpu_link(const mb_cache *s, void **v, uint32_t n);

/* The barn (slab_cache.c): put @n objects of @v (all or nothing: false
 * when it has no room or is busy), take up to @n into @v (returns how
 * many), take all of them as a list for the slabs (slab_reclaim.c). */
bool slab_barn_put(mb_cache *s, void **v, uint32_t n);
uint32_t slab_barn_take(mb_cache *s, void **v, uint32_t n);
void *slab_barn_take_all(mb_cache *s);

struct mb_cache {
        /* Read-mostly, used on every alloc and free. */
        struct slab_ctx *ctx;
        mb_client *client;
        struct cache_cpu *cpu;
        void **slots;            /* every CPU's slots[] */
        struct slab_pcpu *pcpu;  /* ctx->pcpu: the per-CPU lock words */
        ptrdiff_t rseq_area;     /* ctx->rseq_area */
        uint32_t rseq_ncpus;     /* ctx->ncpus in rseq mode, else 0: no sequence runs */
        uint32_t object_bytes;   /* slot stride: bytes an object takes and is charged */
        uint32_t fp_offset;      /* free pointer, from the object start */
        uint32_t cpu_max;        /* per-CPU list length that triggers a flush */
        uint32_t cpu_cap;        /* room in each CPU's slots[] */
        uint32_t stat;           /* SLAB_STAT_* */
        uint32_t fork_gen;       /* slab_fork_gen at creation */
        uint32_t fast_gen;       /* what slab_fork_gen must be for the fast
                                  * paths: fork_gen, never that in debug mode */
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
        struct slab_list_node *partial; /* per CPU: slabs last taken by that CPU */
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

        /* The barn (the kernel's SLUB sheaves barn, tcmalloc's transfer
         * cache): halves of CPU lists that a trim took off one CPU, kept as
         * arrays for another CPU's refill, so that objects one thread frees
         * and another allocates move by a copy of their pointers, never
         * through the slabs' free lists (a walk of cold objects under the
         * cache lock).  Its objects are uncharged, as if back in their
         * slabs; a drain and a shrink put them there. */
        pthread_mutex_t barn_lock _cacheline_aligned_;
        void **barn;             /* [barn_cap], LIFO */
        uint32_t barn_n;         /* atomic peeks */
        uint32_t barn_cap;

        /* mb_malloc()'s size classes (malloc.c): every new slab page gets
         * @page_tag in @page_tags[its page index], so that mb_free() finds
         * the cache from the pointer.  NULL for other caches. */
        uint32_t *page_tags;
        uint32_t page_tag;

        struct mb_shrinker shrinker;
        bool shrinker_registered;
        struct slab_list_node ctx_node;
};


/* Caches of every client and their contexts (slab_ctx.c). */
extern pthread_mutex_t slab_registry_lock;
/* Bumped in every fork() child; a cache made in another generation is an
 * inherited copy (slab_cache.c). */
extern uint32_t slab_fork_gen;

/* ---- the fast paths, inline for the callers that want them so (the
 * malloc front end): see "alloc and free" in slab_cache.c ---- */

enum { SLAB_RSEQ_DONE, SLAB_RSEQ_SLOW, SLAB_RSEQ_ABORTED };

#if PCPU_HAVE_RSEQ
/* Publish the descriptor in rseq->rseq_cs (offset 8 of glibc's struct
 * rseq at __rseq_offset), check rseq->cpu_id (offset 4), then that nobody
 * holds the CPU's lock word; %%rdx = the list's word, %%rcx its count,
 * %%rax the slots. */
#define SLAB_RSEQ_ENTER                                                        \
        PCPU_RSEQ_ENTER                                                           \
        "movq %[pcpu], %%rcx\n\t"                                              \
        "cmpl $0, (%%rcx,%[pofs])\n\t"       /* pcpu[cpu].lock */              \
        "jnz %l[slow]\n\t"                                                     \
        "movq (%[cc]), %%rdx\n\t"                                              \
        "movl %%edx, %%ecx\n\t"                                                \
        "movq 8(%[cc]), %%rax\n\t"           /* rax = slots */                 \
        "andl %[cmask], %%ecx\n\t"           /* rcx = count */
/* The commit: the word, ops moved on (the add sets bit 63 when they are
 * due for a fold). */
#define SLAB_RSEQ_COMMIT                                                       \
        "addq %[delta], %%rdx\n\t"                                             \
        "js %l[slow]\n\t"                                                      \
        "movq %%rdx, (%[cc])\n\t"            /* commit */                      \
        "2:\n\t"                                                               \
        ".pushsection __rseq_failure, \"ax\"\n\t"                              \
        ".byte 0x0f, 0xb9, 0x3d\n\t"         /* ud1 <sig>(%%rip), %%edi */      \
        ".long 0x53053053\n\t"               /* PCPU_RSEQ_SIG */               \
        "4:\n\t"                                                               \
        "jmp %l[aborted]\n\t"                                                  \
        ".popsection\n\t"

_Static_assert(PCPU_RSEQ_SIG == 0x53053053, "the signature in the abort handler");
_Static_assert(offsetof(struct slab_pcpu, lock) == 0, "the sequences read the lock at pcpu[cpu]");
_Static_assert(CACHE_CPU_OPS_ONE + 1 <= INT32_MAX, "an immediate");

/* Pop the top of @cc, the list of CPU @cpu, into *@ret as one sequence
 * (slab_alloc_node()'s this_cpu_cmpxchg_double() of freelist and tid).
 * SLAB_RSEQ_SLOW when the lock is held, the list empty or the ops due for
 * a fold. */
static inline __attribute__((always_inline)) int slab_rseq_pop(const mb_cache *s, struct cache_cpu *cc,
                                                               uint32_t cpu, void **ret) {
        void *obj;

        __asm__ __volatile__ goto(SLAB_RSEQ_ENTER
                                  "jz %l[slow]\n\t"                         /* empty */
                                  "movq -8(%%rax,%%rcx,8), %[obj]\n\t"
                                  SLAB_RSEQ_COMMIT
                                  : [obj] "=&r"(obj)
                                  : [off] "r"(s->rseq_area), [cpu] "r"(cpu), [cc] "r"(cc),
                                    [pcpu] "m"(s->pcpu), [pofs] "r"((uint64_t) cpu * sizeof(struct slab_pcpu)),
                                    [cmask] "i"((uint32_t) CACHE_CPU_COUNT_MASK), [delta] "i"(CACHE_CPU_OPS_ONE - 1)
                                  : "memory", "cc", "rax", "rcx", "rdx"
                                  : slow, aborted);
        *ret = obj;
        return SLAB_RSEQ_DONE;
slow:
        return SLAB_RSEQ_SLOW;
aborted:
        return SLAB_RSEQ_ABORTED;
}

/* Push @obj on @cc, the list of CPU @cpu, as one sequence (do_slab_free()'s
 * fast path); the slot is written inside it, and again by a restart.
 * SLAB_RSEQ_SLOW when the lock is held, the list holds cpu_max objects
 * (the locked path trims it) or the ops are due for a fold. */
static inline __attribute__((always_inline)) int slab_rseq_push(const mb_cache *s, struct cache_cpu *cc,
                                                                uint32_t cpu, void *obj) {
        __asm__ __volatile__ goto(SLAB_RSEQ_ENTER
                                  "cmpl %[max], %%ecx\n\t"
                                  "jae %l[slow]\n\t"                        /* full: trim */
                                  "movq %[obj], (%%rax,%%rcx,8)\n\t"
                                  SLAB_RSEQ_COMMIT
                                  :
                                  : [off] "r"(s->rseq_area), [cpu] "r"(cpu), [cc] "r"(cc),
                                    [pcpu] "m"(s->pcpu), [pofs] "r"((uint64_t) cpu * sizeof(struct slab_pcpu)),
                                    [obj] "r"(obj), [max] "m"(s->cpu_max),
                                    [cmask] "i"((uint32_t) CACHE_CPU_COUNT_MASK), [delta] "i"(CACHE_CPU_OPS_ONE + 1)
                                  : "memory", "cc", "rax", "rcx", "rdx"
                                  : slow, aborted);
        return SLAB_RSEQ_DONE;
slow:
        return SLAB_RSEQ_SLOW;
aborted:
        return SLAB_RSEQ_ABORTED;
}
#endif

/* The rseq CPU of the caller: the struct rseq glibc keeps in every thread
 * (registered or not); at or beyond s->rseq_ncpus (0 in atomic mode) when
 * no sequence may run. */
static inline uint32_t slab_fast_cpu(const mb_cache *s) {
        return pcpu_rseq_cpu(s->rseq_area + (ptrdiff_t) offsetof(struct rseq, cpu_id));
}

#if PCPU_HAVE_RSEQ
/* The CPU a fast path may run its sequence on, or UINT32_MAX (at or beyond
 * s->rseq_ncpus) for a debug or inherited cache: one compare. */
static inline __attribute__((always_inline)) uint32_t slab_fast_gate(const mb_cache *s) {
        if (_likely_(s->fast_gen == __atomic_load_n(&slab_fork_gen, __ATOMIC_RELAXED)))
                return slab_fast_cpu(s);
        return UINT32_MAX;
}
#endif

/*
 * slab_cache_alloc_fast - pop an object off this CPU's list of @s into
 * *@ret in one restartable sequence: SLAB_RSEQ_DONE, or SLAB_RSEQ_ABORTED
 * (try slab_cache_alloc_slowpath()), or SLAB_RSEQ_SLOW (an empty list, the
 * lock held, a debug or inherited cache, no rseq: the same).  Touches no
 * errno, takes no lock, calls nothing.
 */
static inline __attribute__((always_inline)) int slab_cache_alloc_fast(mb_cache *s, void **ret) {
#if PCPU_HAVE_RSEQ
        uint32_t cpu = slab_fast_gate(s);

        if (_likely_(cpu < s->rseq_ncpus))
                return slab_rseq_pop(s, &s->cpu[cpu], cpu, ret);
#else
        (void) s;
        (void) ret;
#endif
        return SLAB_RSEQ_SLOW;
}

/* slab_cache_free_fast - push @obj (not NULL) on this CPU's list of @s;
 * as slab_cache_alloc_fast(), the slow path slab_cache_free_slowpath(). */
static inline __attribute__((always_inline)) int slab_cache_free_fast(mb_cache *s, void *obj) {
#if PCPU_HAVE_RSEQ
        uint32_t cpu = slab_fast_gate(s);

        if (_likely_(cpu < s->rseq_ncpus))
                return slab_rseq_push(s, &s->cpu[cpu], cpu, obj);
#else
        (void) s;
        (void) obj;
#endif
        return SLAB_RSEQ_SLOW;
}

/* mb_cache_create() with what each CPU's list may park (@cpu_list_bytes,
 * SLAB_CPU_LIST_BYTES for mb_cache_create()): the malloc front end parks
 * more, as tcmalloc's per-CPU caches do for its size classes. */
mb_cache *slab_cache_create_sized(mb_client *c, const char *name, size_t object_size, size_t align, unsigned flags,
                                  void (*ctor)(void *object), size_t cpu_list_bytes);

/* mb_cache_alloc() and mb_cache_free() after their fast path did not
 * commit (slab_cache.c). */
void *slab_cache_alloc_slowpath(mb_cache *s);
void slab_cache_free_slowpath(mb_cache *s, void *obj);


/* ---- small helpers ---- */

#define slab_container_of(ptr, type, member) ((type *) ((char *) (ptr) - offsetof(type, member)))

static inline void slab_list_init(struct slab_list_node *h) {
        h->prev = h->next = h;
}

static inline bool slab_list_empty(const struct slab_list_node *h) {
        return h->next == h;
}

static inline void slab_list_add_tail(struct slab_list_node *h, struct slab_list_node *n) {
        n->prev = h->prev;
        n->next = h;
        h->prev->next = n;
        h->prev = n;
}

static inline void slab_list_del(struct slab_list_node *n) {
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

static inline void *cache_cpu_link(const mb_cache *s, void **v, uint32_t n) {
        void *head = NULL;

        for (uint32_t i = n; i-- > 0;) {
                slab_set_fp(s, v[i], head);
                head = v[i];
        }
        return head;
}

static inline uint64_t *slab_tag(const mb_cache *s, void *obj) {
        return (uint64_t *) ((char *) obj + s->fp_offset + sizeof(void *));
}


static inline bool slab_cache_inherited(const mb_cache *s) {
        return s->fork_gen != __atomic_load_n(&slab_fork_gen, __ATOMIC_RELAXED);
}

/* ---- the per-CPU slab lock (pcpu_lock.h) ----
 *
 * It only has to exclude the other threads that run on (or were just
 * migrated from) the same CPU slot, and whoever drains the slot from another
 * CPU (shrink, destroy, stats).  The CPU slot is mb_client_cpu()'s, the one
 * the page stock uses; the rseq attempt fails (and the remote way is taken)
 * when the thread does not run on that CPU. */

/* Lock the slot of CPU @cpu from wherever we run (drains, stats). */
static inline struct slab_pcpu *slab_pcpu_lock_cpu(struct slab_ctx *ctx, unsigned cpu) {
        struct slab_pcpu *p = &ctx->pcpu[cpu];

        pcpu_lock_remote(&p->lock, cpu, ctx->rseq);
        return p;
}

/* slab_pcpu_lock_this() after the inline attempt failed (slab_ctx.c). */
struct slab_pcpu *slab_pcpu_lock_this_slow(struct slab_ctx *ctx, unsigned *ret_cpu);

/* Lock the slot of the CPU we run on; its number in *@ret_cpu.  One
 * attempt inline: the CPU read from rseq where mb_client_cpu() is that
 * CPU, the lock taken with one restartable sequence. */
static inline __attribute__((always_inline)) struct slab_pcpu *slab_pcpu_lock_this(struct slab_ctx *ctx,
                                                                                   unsigned *ret_cpu) {
#if PCPU_HAVE_RSEQ
        if (_likely_(ctx->rseq && ctx->cpu_offset >= 0)) {
                uint32_t cpu = pcpu_rseq_cpu(ctx->cpu_offset);

                if (_likely_(cpu < ctx->ncpus &&
                             pcpu_rseq_trylock(&ctx->pcpu[cpu].lock, cpu, ctx->rseq_area) == PCPU_RSEQ_LOCKED)) {
                        *ret_cpu = cpu;
                        return &ctx->pcpu[cpu];
                }
        }
#endif
        return slab_pcpu_lock_this_slow(ctx, ret_cpu);
}

/* The loop of slab_pcpu_lock_this_slow(). */
static inline struct slab_pcpu *slab_pcpu_lock_this_loop(struct slab_ctx *ctx, unsigned *ret_cpu) {
        unsigned cpu;

#if PCPU_HAVE_RSEQ
        if (_likely_(ctx->rseq))
                for (unsigned tries = 0; tries < SLAB_RSEQ_TRIES; tries++) {
                        int r;

                        cpu = mb_client_cpu(ctx->client);
                        r = pcpu_rseq_trylock(&ctx->pcpu[cpu].lock, cpu, ctx->rseq_area);
                        if (_likely_(r == PCPU_RSEQ_LOCKED)) {
                                *ret_cpu = cpu;
                                return &ctx->pcpu[cpu];
                        }
                        if (r == PCPU_RSEQ_BUSY)
                                pcpu_wait_unlocked(&ctx->pcpu[cpu].lock);
                }
#endif
        cpu = mb_client_cpu(ctx->client);
        *ret_cpu = cpu;
        return slab_pcpu_lock_cpu(ctx, cpu);
}

static inline void slab_pcpu_unlock(struct slab_pcpu *p) {
        pcpu_unlock(&p->lock);
}

#define slab_pcpu_assert_locked(p) mb_assert_debug(pcpu_locked(&(p)->lock))

/* ---- byte stock: consume_obj_stock(), refill_obj_stock(),
 *      __account_obj_stock() of mm/memcontrol.c (slot locked) ---- */


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


/* Tag the slab pages @s takes from now on (mb_malloc()'s size classes):
 * @tags[page index] = @tag.  Before the cache's first allocation. */
void slab_cache_set_page_tags(mb_cache *s, uint32_t *tags, uint32_t tag);

/* ---- slab_ctx.c: the per-client context ---- */

/* Write @delta bytes of @stat into the stats region.  Called with no slab
 * lock held: mb_client_stat_add() takes the page stock's lock. */
void slab_ctx_stat_write(struct slab_ctx *ctx, unsigned stat, int64_t delta);

/**
 * slab_ctx_get - find or make the slab context of @c and take a reference.
 * slab_registry_lock held.  Returns 0 and *@ret, -EINVAL for a page size
 * that is not a power of two or more than SLAB_MAX_CPUS CPU slots, or
 * -ENOMEM.
 */
int slab_ctx_get(mb_client *c, struct slab_ctx **ret);

/* Drop a reference; the last one writes out the stocks and frees the
 * context.  slab_registry_lock held. */
void slab_ctx_put(struct slab_ctx *ctx);

/* ---- slab_page.c: slab pages and their lists (cache->lock) ---- */

static inline char *slab_page_object(const mb_cache *s, const struct mb_slab *slab, size_t i) {
        return slab->page + i * s->object_bytes + s->obj_offset;
}

/* The slab of @s that holds @ptr, or NULL.  Cache lock held. */
struct mb_slab *slab_page_lookup(const mb_cache *s, const void *ptr);

/* Enter @slab in the page->slab table.  Cache lock held.  -ENOMEM. */
int slab_page_insert(mb_cache *s, struct mb_slab *slab);

/**
 * slab_page_new - allocate_slab() + setup_object(): a new page (from
 * mb_page_alloc()), every object set up (and constructed) once, all on the
 * slab's free list.  No lock held.  NULL with errno and mb_last_error().
 */
struct mb_slab *slab_page_new(mb_cache *s);

/* Move @slab to list @list (SLAB_ON_*).  Cache lock held. */
void slab_page_move(mb_cache *s, struct mb_slab *slab, uint32_t list);

/**
 * slab_page_flush_list - objects back to their slabs: the batch part of
 * __slab_free().  Foreign pointers found here (possible only without debug
 * mode) are reported and dropped.  No lock held on entry.  Returns the
 * number of slab pages that became empty past `empty_keep` and were given
 * back.
 */
size_t slab_page_flush_list(mb_cache *s, void *list);

/**
 * slab_page_take_partial - give CPU @cpu the whole free lists of slabs,
 * until it holds half its cpu_max: SLUB's get_partial() + get_freelist().
 * Its own partial slabs first (SLUB's per-CPU partial list: a CPU's objects
 * stay in its own slabs, so that two CPUs do not write objects of one
 * cache line), then empty ones, then other CPUs' partial slabs.  The CPU's
 * list is empty on entry.  Cache lock taken here.  True when it got any
 * object.
 */
bool slab_page_take_partial(mb_cache *s, unsigned cpu, void **ret_list, uint32_t *ret_count);

/* Give up to @max empty slabs back.  No lock held.  Returns how many. */
size_t slab_page_release_empty(mb_cache *s, size_t max);

/* ---- slab_reclaim.c: draining and shrinking ---- */

/* flush_all() for one cache: every CPU's list back to the slabs.  Returns
 * the number of pages given back on the way. */
size_t slab_reclaim_drain_cpus(mb_cache *s);

/* The shrinker of a reclaimable cache (struct mb_shrinker). */
unsigned long slab_reclaim_count(void *userdata);
unsigned long slab_reclaim_scan(void *userdata, unsigned long nr_to_scan);

/* ---- slab_debug.c: debug mode (s->debug) ---- */

/* Report a problem of @s on stderr, counted in its `errors`. */
void slab_debug_report(mb_cache *s, const char *fmt, ...) _printf_(2, 3);

/* Red zones, poison and the free tag of a new object (debug mode). */
void slab_debug_init_object(mb_cache *s, char *obj);

/* An object just taken off a free list: it must be free, unchanged since
 * its free (poison) and have intact red zones.  Then mark it allocated. */
void slab_debug_alloc(mb_cache *s, char *obj);

/* Validate a free in debug mode.  Returns false when the free must be
 * ignored (it was reported). */
bool slab_debug_free(mb_cache *s, char *obj);

/* MEMBROKER_SLAB_DEBUG asks debug mode for every cache. */
bool slab_debug_env(void);

/* Up to @max addresses of live objects of @slab: the objects not on its
 * free list (the per-CPU lists drained before). */
size_t slab_debug_live_objects(mb_cache *s, struct mb_slab *slab, void **ret, size_t max);
