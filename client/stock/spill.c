/* SPDX-License-Identifier: MIT */
/*
 * spill.c - charged pages passed between the CPUs' stocks of one client
 * (stock.h, "the spill").
 *
 * A per-CPU stock that would pass its limit returns a batch to the daemon
 * (refill_stock()'s drain), and an empty one charges a batch.  When one
 * thread frees what another allocates (a producer and a consumer, a slab
 * emptied by remote frees on another CPU), every batch the consumer's CPU
 * returns is charged again by the producer's CPU a moment later: two round
 * trips, the daemon's hole punch and a fault per page, for pages the
 * client never stopped needing.  tcmalloc puts a transfer cache between
 * its per-CPU caches and the central lists for the same reason.
 *
 * So while the stock of one CPU runs dry (it found the spill empty: `want`),
 * an overfull stock of another CPU spills its batch instead of returning
 * it, up to ncpus * charge_batch pages, and a stock that runs dry takes a
 * batch from the spill before it charges one.  Near a limit a thread alone
 * on its CPU never spills (the demand it leaves is its own CPU's), so the
 * stock protocol of one CPU (refill_stock()'s batch back) is the kernel's;
 * far from every limit (the spill's bound above the near one) it does too,
 * so that a program that frees megabytes in a burst and allocates them
 * again, or a producer and a consumer time-sliced on one CPU, keep them.
 * MEMBROKER_SPILL=0 turns the spill off.  Spilled pages stay charged and count as
 * `stock` in the stat (the stats slot of the CPU whose lock the move was
 * made under: the daemon sums the slots), are given back by a drain or a
 * reclaim like any stocked page (stock_take_all()), and are lost with the
 * session like the stocks.  The precision bound becomes ncpus * 3 *
 * charge_batch pages per client, or, far from every limit, ncpus * 2 *
 * charge_batch plus a sixteenth of the headroom the last Grant told (at
 * most STOCK_SPILL_FAR_BYTES).
 *
 * Locking: every move is made with a stock lock held (so that the slot
 * write has its single writer and a disabled stock, limit 0, keeps pages
 * out), then the spill's mutex, which nothing else is taken under.  The
 * hot paths never see it: only the slow paths of an empty or overfull
 * stock do, and they only try it (a busy spill is skipped, the daemon
 * serves as before).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/client.h"
#include "macros.h"
#include "stock/stock.h"

int stock_spill_setup(mb_client *c) {
        const char *e = getenv(STOCK_SPILL_ENV);

        /* MEMBROKER_SPILL=0: every CPU's stock on its own, as the kernel's
         * (tests that count one stock's pages exactly). */
        c->spill.cap = e && strcmp(e, "0") == 0 ? 0
                                                : (uint32_t) MB_MAX((size_t) c->ncpus * c->batch_cap,
                                                                    (size_t) STOCK_SPILL_FAR_BYTES / c->page_size);
        c->spill.pages = malloc(MB_MAX(c->spill.cap, 1u) * sizeof(void *));
        return c->spill.pages ? 0 : -ENOMEM;
}

/* The spill's bound now: a batch per CPU, or far from every limit (the
 * last Grant's headroom) a sixteenth of the headroom, up to
 * STOCK_SPILL_FAR_BYTES: a program whose live memory swings by megabytes
 * between two threads keeps it, as tcmalloc keeps what it freed, while a
 * tenant near its limit gives it back at once. */
static uint32_t stock_spill_limit(const mb_client *c) {
        uint64_t near = (uint64_t) c->ncpus * __atomic_load_n(&c->charge_batch, __ATOMIC_RELAXED);
        uint64_t far = __atomic_load_n(&c->refill.headroom, __ATOMIC_RELAXED) / 16;

        return (uint32_t) MB_MIN((uint64_t) c->spill.cap, MB_MAX(near, far));
}

/* Far from every limit: the headroom allows more than the near bound. */
static bool stock_spill_far(const mb_client *c) {
        return stock_spill_limit(c) > (uint64_t) c->ncpus * __atomic_load_n(&c->charge_batch, __ATOMIC_RELAXED);
}

size_t stock_spill_put_locked(mb_client *c, struct stock *s, void **pages, size_t n) {
        struct stock_spill *sp = &c->spill;
        size_t k;

        uint32_t want = __atomic_load_n(&sp->want, __ATOMIC_RELAXED);

        stock_assert_locked(s);
        if (n == 0 || s->limit == 0 || want == 0 ||
            (want == (uint32_t) (s - c->stocks) + 1 && !stock_spill_far(c)) ||
            pthread_mutex_trylock(&sp->lock) != 0)
                return 0;
        k = sp->n < stock_spill_limit(c) ? MB_MIN(n, (size_t) (stock_spill_limit(c) - sp->n)) : 0;
        memcpy(sp->pages + sp->n, pages, k * sizeof(void *));
        __atomic_store_n(&sp->n, sp->n + (uint32_t) k, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&sp->lock);
        if (k > 0)
                stock_slot_add(s->slot, MB_STAT_STOCK, (int64_t) k);
        return k;
}

/* Move up to @n spilled pages to @out for the stock @s; the caller counts
 * them.  An empty spill learns that @s waits for pages. */
static size_t stock_spill_pop(mb_client *c, const struct stock *s, void **out, size_t n, bool wait) {
        struct stock_spill *sp = &c->spill;
        size_t k;

        if (__atomic_load_n(&sp->n, __ATOMIC_RELAXED) == 0) {
                __atomic_store_n(&sp->want, (uint32_t) (s - c->stocks) + 1, __ATOMIC_RELAXED);
                return 0;
        }
        if (wait)
                pthread_mutex_lock(&sp->lock);
        else if (pthread_mutex_trylock(&sp->lock) != 0)
                return 0;
        k = MB_MIN(n, (size_t) sp->n);
        /* The most recently spilled (the warmest) first. */
        memcpy(out, sp->pages + sp->n - k, k * sizeof(void *));
        __atomic_store_n(&sp->n, sp->n - (uint32_t) k, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&sp->lock);
        return k;
}

size_t stock_spill_take_locked(mb_client *c, struct stock *s, void **out, size_t n) {
        size_t k;

        stock_assert_locked(s);
        k = stock_spill_pop(c, s, out, n, true);
        if (k > 0) {
                stock_slot_add(s->slot, MB_STAT_STOCK, -(int64_t) k);
                stock_slot_commit(c, s, k);
        }
        return k;
}

size_t stock_spill_refill_locked(mb_client *c, struct stock *s) {
        uint32_t nr = stock_nr(s), batch = __atomic_load_n(&c->charge_batch, __ATOMIC_RELAXED);
        size_t k;

        stock_assert_locked(s);
        /* Up to a batch, never past three quarters of the limit (the
         * refill's mark: room for frees before the stock overflows). */
        if (s->limit == 0 || nr >= s->limit - s->limit / 4)
                return 0;
        k = stock_spill_pop(c, s, s->pages + nr, MB_MIN((size_t) batch, (size_t) (s->limit - s->limit / 4 - nr)), false);
        /* Stocked before and stocked now: the stat does not move. */
        if (k > 0)
                stock_set_nr(s, nr + (uint32_t) k);
        return k;
}

void stock_spill_clear(mb_client *c) {
        MB_LOCK_GUARD(&c->spill.lock);

        __atomic_store_n(&c->spill.n, 0u, __ATOMIC_RELAXED);
}

uint32_t stock_spill_count(const mb_client *c) {
        return __atomic_load_n(&c->spill.n, __ATOMIC_RELAXED);
}
