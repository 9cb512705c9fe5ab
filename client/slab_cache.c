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
#include "mb_internal.h"
#include "membroker.h"
#include "slab.h"

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

/* ---- alloc and free ---- */

static inline void *slab_cache_pop(mb_cache *s, struct slab_pcpu *p, struct cache_cpu *cc, int64_t *flush) {
        void *obj = cc->freelist, *next = slab_get_fp(s, obj);

        slab_pcpu_assert_locked(p);
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
static void *slab_cache_alloc_slow(mb_cache *s, struct slab_pcpu *p, struct cache_cpu *cc, int64_t *flush) {
        struct slab_ctx *ctx = s->ctx;
        struct mb_slab *slab;
        unsigned cpu;
        void *obj;
        int r;

        slab_pcpu_assert_locked(p);
        if (slab_page_take_partial(s, &cc->freelist, &cc->count)) {
                obj = slab_cache_pop(s, p, cc, flush);
                slab_pcpu_unlock(p);
                return obj;
        }
        slab_pcpu_unlock(p);

        slab = slab_page_new(s); /* may talk to the daemon: no lock held */
        if (!slab)
                return NULL;

        p = slab_pcpu_lock_this(ctx, &cpu);
        cc = &s->cpu[cpu];
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
        if (!cc->freelist) {
                /* The new slab becomes this CPU's active slab. */
                cc->freelist = slab->freelist;
                cc->count = slab->nfree;
                slab->freelist = NULL;
                slab->nfree = 0;
        } else
                /* Someone refilled this CPU meanwhile: keep the slab. */
                slab_page_move(s, slab, SLAB_ON_EMPTY);
        pthread_mutex_unlock(&s->lock);
        obj = slab_cache_pop(s, p, cc, flush);
        slab_pcpu_unlock(p);
        return obj;
}

/* mb_cache_alloc() of an inherited or debug cache, or with an empty CPU
 * list: everything out of line, so that the fast path stays small. */
static __attribute__((noinline)) void *slab_cache_alloc_slowpath(mb_cache *s, struct slab_pcpu *p,
                                                                struct cache_cpu *cc) {
        int64_t flush = 0;
        unsigned cpu;
        void *obj;

        if (!p) {
                if (slab_cache_inherited(s)) {
                        mb_set_error("slab cache %s: inherited from the parent process; unusable after fork()",
                                     s->name);
                        errno = ECHILD;
                        return NULL;
                }
                p = slab_pcpu_lock_this(s->ctx, &cpu);
                cc = &s->cpu[cpu];
        }
        if (_likely_(cc->freelist)) {
                obj = slab_cache_pop(s, p, cc, &flush);
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

static __attribute__((noinline)) void slab_cache_stat_write(mb_cache *s, int64_t flush) {
        slab_ctx_stat_write(s->ctx, s->stat, flush);
}

void *mb_cache_alloc(mb_cache *s) {
        struct slab_pcpu *p;
        struct cache_cpu *cc;
        int64_t flush = 0;
        unsigned cpu;
        void *obj, *next;

        if (_unlikely_(s->debug | (s->fork_gen != __atomic_load_n(&slab_fork_gen, __ATOMIC_RELAXED))))
                return slab_cache_alloc_slowpath(s, NULL, NULL);
        p = slab_pcpu_lock_this(s->ctx, &cpu);
        cc = &s->cpu[cpu];
        obj = cc->freelist;
        if (_unlikely_(!obj))
                return slab_cache_alloc_slowpath(s, p, cc);
        next = slab_get_fp(s, obj);
        /* prefetch_freepointer(): the next pop reads the next object (in
         * integer arithmetic: next may be NULL, and a prefetch of a bad
         * address is harmless). */
        __builtin_prefetch((const void *) ((uintptr_t) next + s->fp_offset));
        cc->freelist = next;
        cc->count--;
        cc->allocs++;
        slab_stock_charge(s->ctx, p, s->stat, s->object_bytes, &flush);
        slab_pcpu_unlock(p);
        if (_unlikely_(flush))
                slab_cache_stat_write(s, flush);
        return obj;
}

/* The per-CPU list is over cpu_max: keep the most recently freed half,
 * give the rest back to the slabs.  Called with @p locked, unlocks it. */
static void slab_cache_cpu_trim(mb_cache *s, struct slab_pcpu *p, struct cache_cpu *cc) {
        uint32_t keep = s->cpu_max / 2;
        void *last = cc->freelist, *rest;

        for (uint32_t i = 1; i < keep; i++)
                last = slab_get_fp(s, last);
        rest = slab_get_fp(s, last);
        slab_set_fp(s, last, NULL);
        cc->count = keep;
        slab_pcpu_unlock(p);
        slab_page_flush_list(s, rest);
}

/* mb_cache_free() of an inherited or debug cache. */
static __attribute__((noinline)) bool slab_cache_free_check(mb_cache *s, void *obj) {
        if (slab_cache_inherited(s))
                return false;
        return slab_debug_free(s, obj);
}

/* The CPU list passed cpu_max: trim it (unlocks @p), then write @flush. */
static __attribute__((noinline)) void slab_cache_free_trim(mb_cache *s, struct slab_pcpu *p, struct cache_cpu *cc,
                                                           int64_t flush) {
        slab_cache_cpu_trim(s, p, cc);
        if (flush)
                slab_ctx_stat_write(s->ctx, s->stat, flush);
}

void mb_cache_free(mb_cache *s, void *obj) {
        unsigned cpu;
        struct slab_pcpu *p;
        struct cache_cpu *cc;
        int64_t flush = 0;

        if (_unlikely_(!obj))
                return;
        if (_unlikely_(s->debug | (s->fork_gen != __atomic_load_n(&slab_fork_gen, __ATOMIC_RELAXED))) &&
            !slab_cache_free_check(s, obj))
                return;

        p = slab_pcpu_lock_this(s->ctx, &cpu);
        cc = &s->cpu[cpu];
        slab_set_fp(s, obj, cc->freelist);
        cc->freelist = obj;
        cc->frees++;
        slab_stock_uncharge(s->ctx, p, s->stat, s->object_bytes, &flush);
        if (_unlikely_(++cc->count > s->cpu_max)) {
                slab_cache_free_trim(s, p, cc, flush);
                return;
        }
        slab_pcpu_unlock(p);
        if (_unlikely_(flush))
                slab_cache_stat_write(s, flush);
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
                                              MB_MAX(2 * s->objects, SLAB_CPU_LIST_BYTES / s->object_bytes)));
        s->empty_keep = slab_cache_empty_keep(s->object_bytes);
        slab_list_init(&s->partial);
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
        s->cpu = aligned_alloc(MB_CACHELINE_BYTES, s->ctx->ncpus * sizeof(struct cache_cpu));
        if (!s->cpu) {
                r = -ENOMEM;
                goto fail;
        }
        memset(s->cpu, 0, s->ctx->ncpus * sizeof(struct cache_cpu));
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
                free(s->cpu);
                free(s->name);
                free(s);
                return 0;
        }
        if (s->shrinker_registered)
                (void) mb_unregister_shrinker(s->client, &s->shrinker);

        {
                MB_LOCK_GUARD(&ctx->lock);
                slab_list_del(&s->ctx_node);
        }

        slab_reclaim_drain_cpus(s);
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

                st.allocs += s->cpu[cpu].allocs;
                st.frees += s->cpu[cpu].frees;
                st.cpu_free_objects += s->cpu[cpu].count;
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
