/* SPDX-License-Identifier: MIT */
/*
 * slab_reclaim.c - giving slab pages back: draining the per-CPU lists
 * (flush_all()), mb_cache_shrink() (__kmem_cache_shrink()) and the shrinker
 * of reclaimable caches (count_objects()/scan_objects()).
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

size_t slab_reclaim_drain_cpus(mb_cache *s) {
        size_t n = 0;

        for (unsigned cpu = 0; cpu < s->ctx->ncpus; cpu++) {
                struct slab_pcpu *p;
                struct cache_cpu *cc = &s->cpu[cpu];
                int64_t flush = 0;
                void *list;

                /* A racy peek spares locking (a membarrier in rseq mode)
                 * an empty list; objects that arrive meanwhile stay. */
                if (cache_cpu_count(cc) == 0)
                        continue;
                p = slab_pcpu_lock_cpu(s->ctx, cpu);
                cache_cpu_fold(cc);
                list = cache_cpu_link(s, cc->slots, cache_cpu_count(cc));
                /* The objects leave the CPU: their bytes leave its stock. */
                if (cache_cpu_count(cc) > 0)
                        slab_stock_uncharge(s->ctx, p, s->stat, cache_cpu_count(cc) * s->object_bytes, &flush);
                cache_cpu_set_count(cc, 0);
                slab_pcpu_unlock(p);
                if (flush)
                        slab_ctx_stat_write(s->ctx, s->stat, flush);
                n += slab_page_flush_list(s, list);
        }
        /* And the barn's, already uncharged. */
        return n + slab_page_flush_list(s, slab_barn_take_all(s));
}

size_t mb_cache_shrink(mb_cache *s) {
        size_t n;

        if (slab_cache_inherited(s))
                return 0;
        n = slab_reclaim_drain_cpus(s);

        return n + slab_page_release_empty(s, SIZE_MAX);
}

/* ---- shrinker (reclaimable caches) ---- */

static int slab_reclaim_key_cmp(const void *a, const void *b) {
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
unsigned long slab_reclaim_count(void *userdata) {
        mb_cache *s = userdata;
        struct slab_ctx *ctx = s->ctx;
        _cleanup_(freep) uint64_t *keys = NULL;
        size_t nkeys = 0, alloc = 0;
        uint64_t cached = 0, would_empty = 0;
        uintptr_t base;

        if (slab_cache_inherited(s))
                return 0;
        for (unsigned cpu = 0; cpu < ctx->ncpus; cpu++)
                cached += cache_cpu_count(&s->cpu[cpu]);
        cached += __atomic_load_n(&s->barn_n, __ATOMIC_RELAXED);
        if (cached == 0)
                return (unsigned long) __atomic_load_n(&s->nr_empty, __ATOMIC_RELAXED);

        pthread_mutex_lock(&s->lock);
        base = s->base; /* known: there are objects */
        pthread_mutex_unlock(&s->lock);
        for (unsigned cpu = 0; cpu < ctx->ncpus; cpu++) {
                struct slab_pcpu *p = slab_pcpu_lock_cpu(ctx, cpu);
                struct cache_cpu *cc = &s->cpu[cpu];
                uint32_t count = cache_cpu_count(cc);

                if (nkeys + count > alloc) {
                        size_t a = MB_MAX(2 * alloc, nkeys + count);
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
                for (uint32_t i = 0; i < count; i++)
                        keys[nkeys++] = ((uintptr_t) cc->slots[i] - base) >> ctx->page_shift;
                slab_pcpu_unlock(p);
        }
        {
                size_t want = nkeys + __atomic_load_n(&s->barn_n, __ATOMIC_RELAXED);

                if (want > alloc) {
                        uint64_t *k = realloc(keys, want * sizeof(*k));

                        if (k) {
                                keys = k;
                                alloc = want;
                        }
                }
        }
        {
                MB_LOCK_GUARD(&s->barn_lock);
                size_t count = MB_MIN((size_t) s->barn_n, alloc - nkeys);

                /* What arrived since the peek waits for the next count. */
                for (size_t i = 0; i < count; i++)
                        keys[nkeys++] = ((uintptr_t) s->barn[i] - base) >> ctx->page_shift;
        }
        qsort(keys, nkeys, sizeof(*keys), slab_reclaim_key_cmp);

        pthread_mutex_lock(&s->lock);
        for (size_t i = 0, run; i < nkeys; i += run) {
                struct mb_slab *slab;

                for (run = 1; i + run < nkeys && keys[i + run] == keys[i]; run++)
                        ;
                slab = slab_page_lookup(s, (void *) (base + (uintptr_t) (keys[i] << ctx->page_shift)));
                if (slab && slab->list != SLAB_ON_EMPTY && slab->nfree + run == s->objects)
                        would_empty++;
        }
        would_empty += s->nr_empty;
        pthread_mutex_unlock(&s->lock);
        return (unsigned long) would_empty;
}

unsigned long slab_reclaim_scan(void *userdata, unsigned long nr_to_scan) {
        mb_cache *s = userdata;
        size_t n;

        if (slab_cache_inherited(s))
                return 0;
        n = slab_reclaim_drain_cpus(s);
        if (n < nr_to_scan)
                n += slab_page_release_empty(s, nr_to_scan - n);
        return (unsigned long) n;
}

