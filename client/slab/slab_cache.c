/* SPDX-License-Identifier: MIT */
/*
 * slab_cache.c - slab caches (slab.h): create and destroy, the
 * mb_cache_alloc() and mb_cache_free() fast paths on the per-CPU free
 * lists (mm/slub.c slab_alloc_node(), do_slab_free()), and the per-cache
 * stats.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "core/mb_internal.h"
#include "membroker.h"
#include "slab/slab.h"

uint32_t slab_fork_gen;
static pthread_once_t slab_cache_setup_once_flag = PTHREAD_ONCE_INIT;

/* The per-CPU locks' membarrier registration of the child's new address
 * space is pcpu_lock.c's own fork handler. */
static void slab_cache_atfork_child(void) {
        __atomic_fetch_add(&slab_fork_gen, 1, __ATOMIC_RELAXED);
        /* The lock may have been held by a thread that does not exist here. */
        pthread_mutex_init(&slab_registry_lock, NULL);
}

static void slab_cache_setup_once(void) {
        (void) pthread_atfork(NULL, NULL, slab_cache_atfork_child);
}

/* ---- alloc and free ----
 *
 * rseq mode: mb_cache_alloc() and mb_cache_free() are each one
 * restartable sequence on this CPU's list of the cache (struct cache_cpu),
 * committed by the store of its word, as tcmalloc's per-CPU caches commit
 * their index: no lock, no atomic instruction, no byte-stock or stat
 * update (the byte stock is charged when objects enter a CPU list and
 * uncharged when they leave it: slab.h), no access to the object on
 * alloc.  The sequence reads the CPU's per-CPU lock word and leaves to the
 * locked path while anyone holds it: a slow path of this CPU, or a remote
 * locker (drain, shrink, stats), whose rseq fence aborts a sequence that
 * read the word before its swap.  Atomic mode (MEMBROKER_SLAB_RSEQ=0, no
 * rseq) and every slow path take the lock and fold the sequences' counts
 * first (cache_cpu_fold()).
 */

/* Pop the top of this CPU's list, @p locked, @cc folded, not empty. */
static inline void *slab_cache_pop(mb_cache *s, struct slab_pcpu *p, struct cache_cpu *cc) {
        uint32_t count = cache_cpu_count(cc) - 1;

        (void) s;
        slab_pcpu_assert_locked(p);
        cache_cpu_set_count(cc, count);
        cc->allocs++;
        return cc->slots[count];
}

/* A CPU's list gets @n objects (refill) or gives them back (@n < 0, trim or
 * drain): charge or uncharge their bytes in the CPU's byte stock, a batch
 * of objects at a time (slab.h), so that the fast paths need none.  @p
 * locked; stat deltas to write into *@flush. */
static void slab_cache_charge_list(mb_cache *s, struct slab_pcpu *p, int64_t n, int64_t *flush) {
        if (n > 0)
                slab_stock_charge(s->ctx, p, s->stat, (uint32_t) n * s->object_bytes, flush);
        else if (n < 0)
                slab_stock_uncharge(s->ctx, p, s->stat, (uint32_t) -n * s->object_bytes, flush);
}

/* Put the list @list of @count objects into the empty, folded @cc and
 * charge them. */
static void slab_cache_fill(mb_cache *s, struct slab_pcpu *p, struct cache_cpu *cc, void *list, uint32_t count,
                            int64_t *flush) {
        uint32_t i = count;

        mb_assert_debug(cache_cpu_count(cc) == 0 && count < s->cpu_cap);
        /* The list's head on top: the order the slab would hand them out. */
        for (void *o = list; o; o = slab_get_fp(s, o))
                cc->slots[--i] = o;
        cache_cpu_set_count(cc, count);
        slab_cache_charge_list(s, p, count, flush);
}

/* ---- the barn ---- */

bool slab_barn_put(mb_cache *s, void **v, uint32_t n) {
        bool ok;

        if (n == 0 || __atomic_load_n(&s->barn_n, __ATOMIC_RELAXED) + n > s->barn_cap ||
            pthread_mutex_trylock(&s->barn_lock) != 0)
                return false;
        ok = s->barn_n + n <= s->barn_cap;
        if (ok) {
                memcpy(s->barn + s->barn_n, v, n * sizeof(void *));
                __atomic_store_n(&s->barn_n, s->barn_n + n, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&s->barn_lock);
        return ok;
}

uint32_t slab_barn_take(mb_cache *s, void **v, uint32_t n) {
        uint32_t k;

        if (__atomic_load_n(&s->barn_n, __ATOMIC_RELAXED) == 0)
                return 0;
        pthread_mutex_lock(&s->barn_lock);
        k = MB_MIN(n, s->barn_n);
        /* The most recently put first, in the order they were on their
         * CPU's list (the warmest on top). */
        memcpy(v, s->barn + s->barn_n - k, k * sizeof(void *));
        __atomic_store_n(&s->barn_n, s->barn_n - k, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&s->barn_lock);
        return k;
}

void *slab_barn_take_all(mb_cache *s) {
        void *list;

        if (__atomic_load_n(&s->barn_n, __ATOMIC_RELAXED) == 0)
                return NULL;
        pthread_mutex_lock(&s->barn_lock);
        list = cache_cpu_link(s, s->barn, s->barn_n);
        __atomic_store_n(&s->barn_n, 0u, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&s->barn_lock);
        return list;
}

/* ___slab_alloc(): this CPU's list is empty.  Called with @p locked and
 * @cc folded, returns with @p unlocked. */
static void *slab_cache_alloc_slow(mb_cache *s, struct slab_pcpu *p, struct cache_cpu *cc, int64_t *flush) {
        struct slab_ctx *ctx = s->ctx;
        struct mb_slab *slab;
        uint32_t count = 0;
        unsigned cpu;
        void *obj, *list = NULL;
        int r;

        slab_pcpu_assert_locked(p);
        /* What another CPU trimmed, as it was (barn_replace_empty_sheaf()):
         * no slab touched. */
        count = slab_barn_take(s, cc->slots, s->cpu_max / 2);
        if (count > 0) {
                cache_cpu_set_count(cc, count);
                slab_cache_charge_list(s, p, count, flush);
        } else if (slab_page_take_partial(s, (unsigned) (cc - s->cpu), &list, &count))
                slab_cache_fill(s, p, cc, list, count, flush);
        if (count > 0) {
                obj = slab_cache_pop(s, p, cc);
                slab_pcpu_unlock(p);
                return obj;
        }
        slab_pcpu_unlock(p);

        slab = slab_page_new(s); /* may talk to the daemon: no lock held */
        if (!slab)
                return NULL;

        p = slab_pcpu_lock_this(ctx, &cpu);
        cc = &s->cpu[cpu];
        cache_cpu_fold(cc);
        pthread_mutex_lock(&s->lock);
        r = slab_page_insert(s, slab);
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
        slab->cpu = (uint16_t) cpu;
        if (cache_cpu_count(cc) == 0) {
                /* The new slab becomes this CPU's active slab. */
                slab_cache_fill(s, p, cc, slab->freelist, slab->nfree, flush);
                slab->freelist = NULL;
                slab->nfree = 0;
        } else
                /* Someone refilled this CPU meanwhile: keep the slab. */
                slab_page_move(s, slab, SLAB_ON_EMPTY);
        pthread_mutex_unlock(&s->lock);
        obj = slab_cache_pop(s, p, cc);
        slab_pcpu_unlock(p);
        return obj;
}

/* mb_cache_alloc() under the per-CPU lock: atomic mode, an inherited or
 * debug cache, a sequence that could not commit, an empty CPU list.  Out
 * of line, so that the fast path stays small. */
static __attribute__((noinline)) void *slab_cache_alloc_locked(mb_cache *s) {
        struct slab_pcpu *p;
        struct cache_cpu *cc;
        int64_t flush = 0;
        unsigned cpu;
        void *obj;

        if (slab_cache_inherited(s)) {
                mb_set_error("slab cache %s: inherited from the parent process; unusable after fork()", s->name);
                errno = ECHILD;
                return NULL;
        }
        p = slab_pcpu_lock_this(s->ctx, &cpu);
        cc = &s->cpu[cpu];
        cache_cpu_fold(cc);
        if (_likely_(cache_cpu_count(cc) > 0)) {
                obj = slab_cache_pop(s, p, cc);
                slab_pcpu_unlock(p);
        } else {
                obj = slab_cache_alloc_slow(s, p, cc, &flush);
                if (!obj)
                        return NULL;
        }
        if (_unlikely_(flush))
                slab_ctx_stat_write(s->ctx, s->stat, flush);
        if (_unlikely_(s->debug))
                slab_debug_alloc(s, obj);
        return obj;
}

#if PCPU_HAVE_RSEQ
/* A sequence was aborted (preempted, migrated, signalled): try again on
 * the CPU the thread runs on now, then take the lock. */
static __attribute__((noinline)) void *slab_cache_alloc_retry(mb_cache *s) {
        for (unsigned tries = 1; tries < SLAB_RSEQ_TRIES; tries++) {
                uint32_t cpu = slab_fast_cpu(s);
                struct cache_cpu *cc = &s->cpu[cpu];
                void *obj;
                int r;

                if (cpu >= s->rseq_ncpus)
                        break;
                r = slab_rseq_pop(s, cc, cpu, &obj);
                if (r == SLAB_RSEQ_DONE)
                        return obj;
                if (r == SLAB_RSEQ_SLOW)
                        break;
        }
        return slab_cache_alloc_locked(s);
}
#endif

void *mb_cache_alloc(mb_cache *s) {
#if PCPU_HAVE_RSEQ
        void *obj;

        switch (slab_cache_alloc_fast(s, &obj)) {
        case SLAB_RSEQ_DONE:
                return obj;
        case SLAB_RSEQ_ABORTED:
                return slab_cache_alloc_retry(s);
        default:
                break;
        }
#endif
        return slab_cache_alloc_locked(s);
}

void *slab_cache_alloc_slowpath(mb_cache *s) {
#if PCPU_HAVE_RSEQ
        return slab_cache_alloc_retry(s);
#else
        return slab_cache_alloc_locked(s);
#endif
}

/* The per-CPU list passed cpu_max (slots[] has room: cpu_cap): keep
 * the most recently freed half of cpu_max, give the
 * oldest half back to the slabs (uncharging their bytes).  Called with @p
 * locked and @cc folded; unlocks @p. */
static void slab_cache_cpu_trim(mb_cache *s, struct slab_pcpu *p, struct cache_cpu *cc, int64_t *flush) {
        uint32_t count = cache_cpu_count(cc), keep = s->cpu_max / 2, give = count - keep;
        /* Into the barn while it has room (barn_put_full_sheaf()): another
         * CPU that allocates what this one frees takes them from there;
         * else back to their slabs. */
        void *rest = slab_barn_put(s, cc->slots, give) ? NULL : cache_cpu_link(s, cc->slots, give);

        memmove(cc->slots, cc->slots + give, keep * sizeof(void *));
        cache_cpu_set_count(cc, keep);
        slab_cache_charge_list(s, p, -(int64_t) give, flush);
        slab_pcpu_unlock(p);
        slab_page_flush_list(s, rest);
}

/* mb_cache_free() under the per-CPU lock (see slab_cache_alloc_locked()). */
static __attribute__((noinline)) void slab_cache_free_locked(mb_cache *s, void *obj) {
        struct slab_pcpu *p;
        struct cache_cpu *cc;
        int64_t flush = 0;
        unsigned cpu;
        uint32_t count;

        if (_unlikely_(s->debug | slab_cache_inherited(s))) {
                if (slab_cache_inherited(s) || !slab_debug_free(s, obj))
                        return;
        }
        p = slab_pcpu_lock_this(s->ctx, &cpu);
        cc = &s->cpu[cpu];
        cache_cpu_fold(cc);
        count = cache_cpu_count(cc);
        cc->slots[count] = obj;
        cache_cpu_set_count(cc, count + 1);
        cc->frees++;
        if (_unlikely_(count + 1 > s->cpu_max))
                slab_cache_cpu_trim(s, p, cc, &flush);
        else
                slab_pcpu_unlock(p);
        if (_unlikely_(flush))
                slab_ctx_stat_write(s->ctx, s->stat, flush);
}

#if PCPU_HAVE_RSEQ
/* As slab_cache_alloc_retry(). */
static __attribute__((noinline)) void slab_cache_free_retry(mb_cache *s, void *obj) {
        for (unsigned tries = 1; tries < SLAB_RSEQ_TRIES; tries++) {
                uint32_t cpu = slab_fast_cpu(s);
                struct cache_cpu *cc = &s->cpu[cpu];
                int r;

                if (cpu >= s->rseq_ncpus)
                        break;
                r = slab_rseq_push(s, cc, cpu, obj);
                if (r == SLAB_RSEQ_DONE)
                        return;
                if (r == SLAB_RSEQ_SLOW)
                        break;
        }
        slab_cache_free_locked(s, obj);
}
#endif

void mb_cache_free(mb_cache *s, void *obj) {
        if (_unlikely_(!obj))
                return;
#if PCPU_HAVE_RSEQ
        switch (slab_cache_free_fast(s, obj)) {
        case SLAB_RSEQ_DONE:
                return;
        case SLAB_RSEQ_ABORTED:
                slab_cache_free_retry(s, obj);
                return;
        default:
                break;
        }
#endif
        slab_cache_free_locked(s, obj);
}

void slab_cache_free_slowpath(mb_cache *s, void *obj) {
#if PCPU_HAVE_RSEQ
        slab_cache_free_retry(s, obj);
#else
        slab_cache_free_locked(s, obj);
#endif
}

/* ---- create / destroy ---- */

/* calculate_min_partial(): ilog2(size) / 2, clamped to [5, 10]. */
static unsigned slab_cache_empty_keep(size_t object_bytes) {
        unsigned n = (unsigned) ((63 - __builtin_clzll((unsigned long long) object_bytes)) / 2);

        return MB_MAX(5u, MB_MIN(10u, n));
}

/* Lay the object out in its slot; see "Metadata" and "Debug mode" in slab.h. */
static int slab_cache_layout(mb_cache *s, size_t page_size) {
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

void slab_cache_set_page_tags(mb_cache *s, uint32_t *tags, uint32_t tag) {
        s->page_tags = tags;
        s->page_tag = tag;
}

mb_cache *mb_cache_create(mb_client *c, const char *name, size_t object_size, size_t align, unsigned flags,
                          void (*ctor)(void *object)) {
        return slab_cache_create_sized(c, name, object_size, align, flags, ctor, SLAB_CPU_LIST_BYTES);
}

mb_cache *slab_cache_create_sized(mb_client *c, const char *name, size_t object_size, size_t align, unsigned flags,
                                  void (*ctor)(void *object), size_t cpu_list_bytes) {
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

        (void) pthread_once(&slab_cache_setup_once_flag, slab_cache_setup_once);
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
        s->fast_gen = s->debug ? s->fork_gen + SLAB_DEBUG_GEN : s->fork_gen;
        s->stat = (flags & MB_CACHE_RECLAIMABLE) ? SLAB_STAT_RECLAIMABLE : SLAB_STAT_UNRECLAIMABLE;
        s->object_size = object_size;
        s->align = MB_MAX(align, (size_t) SLAB_MIN_ALIGN_BYTES);
        s->ctor = ctor;
        if (slab_cache_layout(s, ps) < 0) {
                mb_set_error("slab cache %s: objects of %zu bytes (align %zu%s) do not fit in a %zu-byte page; "
                             "use mb_page_alloc_bulk() for them",
                             name, object_size, align, s->debug ? ", debug" : "", ps);
                errno = EINVAL;
                return NULL;
        }
        s->cpu_max = (uint32_t) MB_MAX((size_t) SLAB_CPU_MAX_MIN_OBJECTS,
                                       MB_MIN((size_t) SLAB_CPU_MAX_MAX_OBJECTS,
                                              MB_MAX(2 * s->objects, cpu_list_bytes / s->object_bytes)));
        /* A cache whose CPU lists park more (the malloc classes) keeps the
         * empty slabs of two lists too (512 KiB for a malloc class): a
         * consumer thread empties them in bursts as fast as a producer
         * wants new ones, and a page given back costs a round trip, a hole
         * punched and a fault; its shrinker gives them back under
         * pressure. */
        s->empty_keep = slab_cache_empty_keep(s->object_bytes);
        if (cpu_list_bytes > SLAB_CPU_LIST_BYTES)
                s->empty_keep = MB_MAX(s->empty_keep, (unsigned) (2 * cpu_list_bytes / ps));
        slab_list_init(&s->empty);
        slab_list_init(&s->ctx_node);
        s->name = strdup(name);
        if (!s->name) {
                errno = ENOMEM;
                return NULL;
        }

        {
                MB_LOCK_GUARD(&slab_registry_lock);
                r = slab_ctx_get(c, &s->ctx);
        }
        if (r < 0) {
                free(s->name);
                errno = -r;
                return NULL;
        }
        s->pcpu = s->ctx->pcpu;
        s->rseq_area = s->ctx->rseq_area;
        /* A client that reads no CPU inline (cpu_offset < 0) gets no sequence. */
        s->rseq_ncpus = s->ctx->rseq && s->ctx->cpu_offset >= 0 ? s->ctx->ncpus : 0;
        s->cpu = aligned_alloc(MB_CACHELINE_BYTES, s->ctx->ncpus * sizeof(struct cache_cpu));
        if (!s->cpu) {
                r = -ENOMEM;
                goto fail;
        }
        memset(s->cpu, 0, s->ctx->ncpus * sizeof(struct cache_cpu));
        s->partial = calloc(s->ctx->ncpus, sizeof(*s->partial));
        if (!s->partial) {
                r = -ENOMEM;
                goto fail;
        }
        for (unsigned i = 0; i < s->ctx->ncpus; i++)
                slab_list_init(&s->partial[i]);
        {
                /* Each CPU's slots on cache lines of their own. */
                size_t stride;

                /* A refill takes whole slabs until the list holds half of
                 * cpu_max, so it may end below cpu_max / 2 + objects, which
                 * can pass cpu_max (1024 at most) on large pages; a locked
                 * push may hold cpu_max + 1 before the trim. */
                s->cpu_cap = s->cpu_max / 2 + (uint32_t) s->objects + 1;
                s->cpu_cap = MB_MAX(s->cpu_cap, s->cpu_max + 1);
                stride = slab_align_up(s->cpu_cap * sizeof(void *), MB_CACHELINE_BYTES);

                s->slots = aligned_alloc(MB_CACHELINE_BYTES, s->ctx->ncpus * stride);
                if (!s->slots) {
                        r = -ENOMEM;
                        goto fail;
                }
                for (unsigned i = 0; i < s->ctx->ncpus; i++)
                        s->cpu[i].slots = (void **) ((char *) s->slots + i * stride);
        }
        /* Two trims' worth: what one CPU frees while another catches up,
         * and no more (the rest goes back to the slabs, so that what a
         * program frees reaches the daemon as before); eight for the malloc
         * classes, whose producer and consumer threads run apart by a
         * scheduler's time slice. */
        s->barn_cap = (cpu_list_bytes > SLAB_CPU_LIST_BYTES ? 8 : 2) * (s->cpu_max / 2 + 1);
        s->barn = malloc(s->barn_cap * sizeof(void *));
        if (!s->barn) {
                r = -ENOMEM;
                goto fail;
        }
        pthread_mutex_init(&s->barn_lock, NULL);
        pthread_mutex_init(&s->lock, NULL);

        if (flags & MB_CACHE_RECLAIMABLE) {
                s->shrinker = (struct mb_shrinker) {
                        .count = slab_reclaim_count,
                        .scan = slab_reclaim_scan,
                        .userdata = s,
                };
                r = mb_register_shrinker(c, &s->shrinker);
                if (r < 0) {
                        pthread_mutex_destroy(&s->lock);
                        pthread_mutex_destroy(&s->barn_lock);
                        goto fail;
                }
                s->shrinker_registered = true;
        }

        {
                MB_LOCK_GUARD(&s->ctx->lock);
                slab_list_add_tail(&s->ctx->caches, &s->ctx_node);
        }
        return TAKE_PTR(s);

fail:
        free(s->barn);
        free(s->slots);
        free(s->partial);
        free(s->cpu);
        free(s->name);
        {
                MB_LOCK_GUARD(&slab_registry_lock);
                slab_ctx_put(s->ctx);
        }
        errno = -r;
        return NULL;
}

size_t mb_cache_destroy(mb_cache *s) {
        void *addr[SLAB_LIVE_REPORT_MAX];
        size_t live = 0, naddr = 0, leaked_pages = 0;
        struct slab_ctx *ctx;

        if (!s)
                return 0;
        ctx = s->ctx;
        if (slab_cache_inherited(s)) {
                /* The child's copy: no page is ours to give back, and the
                 * context may be shared with other inherited caches, so it
                 * stays (the child cannot use it anyway). */
                for (size_t i = 0; i < s->table_size; i++)
                        free(s->table[i]);
                free(s->table);
                free(s->slots);
                free(s->barn);
                free(s->partial);
                free(s->cpu);
                free(s->name);
                free(s);
                return 0;
        }
        if (s->shrinker_registered)
                (void) mb_unregister_shrinker(s->client, &s->shrinker);

        /* Drained while still on the context's list, so that a concurrent
         * mb_slab_stats() counts the bytes of its CPU lists until they are
         * uncharged. */
        slab_reclaim_drain_cpus(s);
        {
                MB_LOCK_GUARD(&ctx->lock);
                slab_list_del(&s->ctx_node);
        }
        (void) slab_page_release_empty(s, SIZE_MAX);

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
                        naddr += slab_debug_live_objects(s, slab, addr + naddr, SLAB_LIVE_REPORT_MAX - naddr);
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
                slab_debug_report(s, "destroyed with %zu live object%s:%s (%zu slab page%s left allocated)", live,
                                  live == 1 ? "" : "s", buf, leaked_pages, leaked_pages == 1 ? "" : "s");
        }

        free(s->table);
        pthread_mutex_destroy(&s->lock);
        pthread_mutex_destroy(&s->barn_lock);
        free(s->barn);
        free(s->slots);
        free(s->partial);
        free(s->cpu);
        free(s->name);
        free(s);

        MB_LOCK_GUARD(&slab_registry_lock);
        slab_ctx_put(ctx);
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
                uint64_t allocs, frees;

                cache_cpu_counters(&s->cpu[cpu], &allocs, &frees);
                st.allocs += allocs;
                st.frees += frees;
                st.cpu_free_objects += cache_cpu_count(&s->cpu[cpu]);
                slab_pcpu_unlock(p);
        }
        st.live_objects = st.allocs - st.frees;

        {
                MB_LOCK_GUARD(&s->lock);
                st.slabs = s->nr_slabs;
                st.partial_slabs = s->nr_partial;
                st.empty_slabs = s->nr_empty;
                st.slabs_allocated = s->slabs_allocated;
                st.slabs_freed = s->slabs_freed;
        }
        st.errors = __atomic_load_n(&s->errors, __ATOMIC_RELAXED);

        *ret = st;
        return 0;
}
