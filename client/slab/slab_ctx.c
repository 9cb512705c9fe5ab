/* SPDX-License-Identifier: MIT */
/*
 * slab_ctx.c - the slab state of one client (slab.h): its per-CPU slots
 * (lock and byte stock), the registry of contexts, and the slab stats
 * (mb_slab_stats(), mb_slab_drain()).
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

pthread_mutex_t slab_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slab_ctx *slab_registry;

/* Whether the per-CPU slab locks of a new context take rseq mode
 * (pcpu_lock.h): MEMBROKER_SLAB_RSEQ=0 says no. */
static bool slab_ctx_rseq_mode(void) {
        const char *e = secure_getenv(SLAB_RSEQ_ENV);

        if (e && strcmp(e, "0") == 0)
                return false;
        return pcpu_rseq_usable();
}

void slab_ctx_stat_write(struct slab_ctx *ctx, unsigned stat, int64_t delta) {
        if (delta == 0)
                return;
        mb_client_stat_add(ctx->client,
                           stat == SLAB_STAT_RECLAIMABLE ? MB_STAT_SLAB_RECLAIMABLE : MB_STAT_SLAB_UNRECLAIMABLE,
                           delta);
        __atomic_fetch_add(&ctx->written[stat], delta, __ATOMIC_RELAXED);
}

/* The bytes of the objects on CPU @cpu's lists, per stat: charged when
 * they entered the list (slab.h), not live.  ctx->lock and the CPU's lock
 * held. */
static void slab_ctx_list_bytes(struct slab_ctx *ctx, unsigned cpu, int64_t ret[static _SLAB_STAT_NR]) {
        for (unsigned i = 0; i < _SLAB_STAT_NR; i++)
                ret[i] = 0;
        for (struct slab_list_node *n = ctx->caches.next; n != &ctx->caches; n = n->next) {
                mb_cache *s = slab_container_of(n, mb_cache, ctx_node);

                ret[s->stat] += (int64_t) cache_cpu_count(&s->cpu[cpu]) * s->object_bytes;
        }
}

/* drain_obj_stock() of one CPU (caller holds ctx->lock and the CPU's
 * lock): take the pending stat deltas into @ret_flush (to write after
 * unlocking), all but the bytes of the objects on the CPU's lists, which
 * stay pending so that the written stat is the bytes of live objects; and
 * uncharge the whole pages' worth of the stock. */
static void slab_ctx_pcpu_drain(struct slab_ctx *ctx, unsigned cpu, int64_t ret_flush[static _SLAB_STAT_NR]) {
        struct slab_pcpu *p = &ctx->pcpu[cpu];
        int64_t listed[_SLAB_STAT_NR];

        slab_ctx_list_bytes(ctx, cpu, listed);
        for (unsigned i = 0; i < _SLAB_STAT_NR; i++) {
                ret_flush[i] = p->pending[i] - listed[i];
                p->pending[i] = listed[i];
        }
        if (p->nr_bytes >= (int64_t) ctx->page_size) {
                p->uncharged_pages += (uint64_t) p->nr_bytes >> ctx->page_shift;
                p->nr_bytes &= (int64_t) ctx->page_size - 1;
        }
}

/* ---- per-client context ---- */

static void slab_ctx_free(struct slab_ctx *ctx) {
        if (!ctx)
                return;
        pthread_mutex_destroy(&ctx->lock);
        free(ctx->pcpu);
        free(ctx);
}

int slab_ctx_get(mb_client *c, struct slab_ctx **ret) {
        struct slab_ctx *ctx;
        size_t ps;

        mb_assert_mutex_held(&slab_registry_lock);
        for (ctx = slab_registry; ctx; ctx = ctx->next)
                if (ctx->client == c) {
                        ctx->refs++;
                        *ret = ctx;
                        return 0;
                }

        ps = mb_page_size(c);
        if (!slab_is_pow2(ps) || mb_client_ncpus(c) == 0 || mb_client_ncpus(c) > SLAB_MAX_CPUS)
                return -EINVAL;
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
                return -ENOMEM;
        ctx->client = c;
        ctx->refs = 1;
        ctx->ncpus = mb_client_ncpus(c);
        ctx->page_size = ps;
        ctx->page_shift = (unsigned) __builtin_ctzl(ps);
        ctx->rseq = slab_ctx_rseq_mode();
        ctx->rseq_area = __rseq_offset;
        ctx->cpu_offset = mb_client_cpu_offset(c);
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
        MB_LOCK_GUARD(&ctx->lock);
        for (unsigned cpu = 0; cpu < ctx->ncpus; cpu++) {
                int64_t flush[_SLAB_STAT_NR];

                slab_pcpu_lock_cpu(ctx, cpu);
                slab_ctx_pcpu_drain(ctx, cpu, flush);
                slab_pcpu_unlock(&ctx->pcpu[cpu]);
                for (unsigned i = 0; i < _SLAB_STAT_NR; i++)
                        slab_ctx_stat_write(ctx, i, flush[i]);
        }
}

void slab_ctx_put(struct slab_ctx *ctx) {
        mb_assert_mutex_held(&slab_registry_lock);
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

/* The slab stats of @ctx into @st.  slab_registry_lock held. */
static void slab_ctx_stats(struct slab_ctx *ctx, struct mb_slab_stats *st) {
        MB_LOCK_GUARD(&ctx->lock);
        for (unsigned cpu = 0; cpu < ctx->ncpus; cpu++) {
                struct slab_pcpu *p = slab_pcpu_lock_cpu(ctx, cpu);
                int64_t listed[_SLAB_STAT_NR];

                slab_ctx_list_bytes(ctx, cpu, listed);
                st->charged_pages += p->charged_pages;
                st->uncharged_pages += p->uncharged_pages;
                st->stock_bytes += (uint64_t) (p->nr_bytes + listed[SLAB_STAT_RECLAIMABLE] +
                                               listed[SLAB_STAT_UNRECLAIMABLE]);
                st->pending_reclaimable_bytes += p->pending[SLAB_STAT_RECLAIMABLE] - listed[SLAB_STAT_RECLAIMABLE];
                st->pending_unreclaimable_bytes +=
                        p->pending[SLAB_STAT_UNRECLAIMABLE] - listed[SLAB_STAT_UNRECLAIMABLE];
                slab_pcpu_unlock(p);
        }
        st->reclaimable_bytes = __atomic_load_n(&ctx->written[SLAB_STAT_RECLAIMABLE], __ATOMIC_RELAXED);
        st->unreclaimable_bytes = __atomic_load_n(&ctx->written[SLAB_STAT_UNRECLAIMABLE], __ATOMIC_RELAXED);
}

int mb_slab_stats(mb_client *c, struct mb_slab_stats *ret) {
        struct mb_slab_stats st = {};

        if (!c || !ret)
                return -EINVAL;
        {
                MB_LOCK_GUARD(&slab_registry_lock);
                struct slab_ctx *ctx = slab_ctx_find(c);

                if (ctx)
                        slab_ctx_stats(ctx, &st);
        }
        *ret = st;
        return 0;
}

void mb_slab_drain(mb_client *c) {
        struct slab_ctx *ctx;

        MB_LOCK_GUARD(&slab_registry_lock);
        ctx = slab_ctx_find(c);
        if (ctx)
                slab_ctx_drain(ctx);
}

__attribute__((noinline)) struct slab_pcpu *slab_pcpu_lock_this_slow(struct slab_ctx *ctx, unsigned *ret_cpu) {
        return slab_pcpu_lock_this_loop(ctx, ret_cpu);
}
