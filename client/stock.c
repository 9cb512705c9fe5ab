/* SPDX-License-Identifier: MIT */
/*
 * stock.c - the per-CPU stocks of charged pages (stock.h) and the page fast
 * paths: mb_page_alloc(), mb_page_free() and their bulk forms when the
 * stock covers them read the CPU from rseq, take that CPU's stock lock,
 * pop or push a pointer, bump the CPU's stats slot and unlock: no system
 * call, no daemon.  The slow paths charge and return pages in batches
 * through the session (session.h) under conn_lock, as the kernel's
 * try_charge() and refill_stock() do for memcg_stock_pcp.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "macros.h"
#include "reclaim.h"
#include "session.h"
#include "stock.h"

bool stock_rseq_mode(void) {
        const char *e = getenv("MEMBROKER_RSEQ");

        if (e && strcmp(e, "0") == 0)
                return false;
        return pcpu_rseq_usable();
}

__attribute__((noinline)) struct stock *stock_lock_cpu(const mb_client *c, unsigned cpu) {
        struct stock *s = &c->stocks[cpu];

        pcpu_lock_remote(&s->lock, cpu, c->rseq_lock);
        return s;
}

__attribute__((noinline)) struct stock *stock_lock_slow(const mb_client *c) {
#if PCPU_HAVE_RSEQ
        if (c->rseq_lock) {
                for (;;) {
                        uint32_t cpu = pcpu_rseq_cpu(c->rseq_offset);
                        struct stock *s;
                        int r;

                        if (cpu >= c->ncpus)
                                /* No valid rseq CPU for this thread. */
                                return stock_lock_cpu(c, pcpu_fallback_cpu(c->ncpus));
                        s = &c->stocks[cpu];
                        r = pcpu_rseq_trylock(&s->lock, cpu, c->rseq_area);
                        if (r == PCPU_RSEQ_LOCKED)
                                return s;
                        if (r == PCPU_RSEQ_BUSY)
                                pcpu_wait_unlocked(&s->lock);
                }
        }
#endif
        {
                struct stock *s = &c->stocks[pcpu_current_cpu(c->rseq_offset, c->ncpus)];

                pcpu_lock_atomic(&s->lock);
                return s;
        }
}

void stock_take_locked(const mb_client *c, struct stock *s, void **out, uint32_t take) {
        stock_assert_locked(s);
        s->nr -= take;
        memcpy(out, s->pages + s->nr, take * sizeof(void *));
        stock_slot_add(s->slot, MB_STAT_STOCK, -(int64_t) take);
        stock_slot_commit(c, s, take);
}

void stock_disable_all(mb_client *c) {
        for (unsigned i = 0; i < c->ncpus; i++) {
                struct stock *s = stock_lock_cpu(c, i);

                s->nr = 0;
                s->limit = 0;
                stock_unlock(s);
        }
}

size_t stock_take_all(mb_client *c, void **out, size_t n) {
        size_t got = 0;
        unsigned first = pcpu_current_cpu(c->rseq_offset, c->ncpus);

        for (unsigned k = 0; k < c->ncpus && got < n; k++) {
                unsigned cpu = (first + k) % c->ncpus;
                struct stock *s;
                uint32_t take;

                /* A racy peek spares locking (a membarrier in rseq mode)
                 * an empty stock; pages that arrive meanwhile stay there. */
                if (__atomic_load_n(&c->stocks[cpu].nr, __ATOMIC_RELAXED) == 0)
                        continue;
                s = stock_lock_cpu(c, cpu);
                take = (uint32_t) MB_MIN((size_t) s->nr, n - got);
                if (take > 0)
                        stock_take_locked(c, s, out + got, take);
                stock_unlock(s);
                got += take;
        }
        return got;
}

void stock_account_unlock(const mb_client *c, struct stock *s, int64_t n) {
        stock_assert_locked(s);
        if (n > 0) {
                stock_slot_add(s->slot, MB_STAT_PAGES, n);
                stock_slot_add(s->slot, MB_STAT_PGALLOC, n);
        } else {
                stock_slot_add(s->slot, MB_STAT_PAGES, n);
                stock_slot_add(s->slot, MB_STAT_PGFREE, -n);
        }
        stock_slot_commit(c, s, (uint64_t) (n > 0 ? n : -n));
        stock_unlock(s);
}

/* Take up to @n pages from the stock of this CPU only. */
static size_t stock_take_local(mb_client *c, void **out, size_t n) {
        struct stock *s = stock_lock_this(c);
        uint32_t take = (uint32_t) MB_MIN((size_t) s->nr, n);

        if (take > 0)
                stock_take_locked(c, s, out, take);
        stock_unlock(s);
        return take;
}


/*
 * The daemon told a new batch (Grant.charge_batch): a limit appeared on a
 * tenant that had none, whose clients charged the larger batch of an
 * unlimited tenant, or ChargeBatch= changed.  The stocks keep their room (2 * batch_cap + 1
 * pages), so a batch can grow up to what the Welcome allowed
 * (charge_batch_max, else its batch) and no further.  A
 * smaller batch trims every stock to its new limit at once, the excess
 * going back to the daemon, so that the precision bound (ncpus * 2 *
 * charge_batch pages) holds from now on, not only after the stocks happen
 * to overflow.  conn_lock held.
 */
int stock_adopt_batch_locked(mb_client *c, uint32_t batch) {
        _cleanup_(freep) void **back = NULL;
        size_t n = 0;

        mb_assert_mutex_held(&c->conn_lock);
        batch = MB_MAX(1u, MB_MIN(batch, c->batch_cap));
        if (batch == c->charge_batch)
                return 0;
        back = malloc((size_t) c->ncpus * (2u * c->batch_cap + 1u) * sizeof(void *));
        if (!back)
                return -ENOMEM; /* keep the old batch; the daemon does not tell again */
        __atomic_store_n(&c->charge_batch, batch, __ATOMIC_RELAXED);
        for (unsigned i = 0; i < c->ncpus; i++) {
                struct stock *s = stock_lock_cpu(c, i);

                /* limit 0: disabled (fork, lost session): stays so */
                if (s->limit != 0) {
                        s->limit = 2u * batch;
                        if (s->nr > s->limit) {
                                uint32_t take = s->nr - s->limit;

                                stock_take_locked(c, s, back + n, take);
                                n += take;
                        }
                }
                stock_unlock(s);
        }
        return session_uncharge(c, back, n, MB__UNCHARGE_REASON__UNCHARGE_FREE, true, false, 0);
}

/*
 * Give @n pages to this CPU's stock.  When the stock would pass its limit
 * (2 * charge_batch), whole batches go back to the daemon until it does not,
 * the coldest pages first (the bottom of the stock, then the oldest of
 * @pages): for one page that is the one Uncharge of charge_batch pages of
 * the stock protocol, as the kernel's refill_stock() drains an overfull stock.
 * @freed of the pages come from the application (counted as pgfree).
 * conn_lock held.
 */
static int stock_put_locked(mb_client *c, void **pages, size_t n, size_t freed) {
        _cleanup_(freep) void **back = NULL;
        size_t total, nback = 0;
        struct stock *s;

        mb_assert_mutex_held(&c->conn_lock);
        if (n == 0)
                return 0;
        /* nr <= limit, so at most n rounded up to a batch goes back; no
         * allocation under the stock lock. */
        back = malloc((n + c->charge_batch) * sizeof(void *));
        if (!back)
                return -ENOMEM;

        s = stock_lock_this(c);
        if (s->limit == 0) {
                /* The session broke while we were on our way: nothing to keep. */
                stock_unlock(s);
                return session_lost(c);
        }
        total = s->nr + n;
        if (total > s->limit)
                nback = DIV_ROUND_UP(total - s->limit, c->charge_batch) * c->charge_batch;
        if (nback <= s->nr) {
                memcpy(back, s->pages, nback * sizeof(void *));
                memmove(s->pages, s->pages + nback, (s->nr - nback) * sizeof(void *));
                memcpy(s->pages + s->nr - nback, pages, n * sizeof(void *));
        } else {
                size_t from_new = nback - s->nr;

                memcpy(back, s->pages, s->nr * sizeof(void *));
                memcpy(back + s->nr, pages, from_new * sizeof(void *));
                memcpy(s->pages, pages + from_new, (n - from_new) * sizeof(void *));
        }
        s->nr = (uint32_t) (total - nback);
        stock_slot_add(s->slot, MB_STAT_STOCK, (int64_t) n - (int64_t) nback);
        if (freed > 0) {
                stock_slot_add(s->slot, MB_STAT_PAGES, -(int64_t) freed);
                stock_slot_add(s->slot, MB_STAT_PGFREE, (int64_t) freed);
        }
        stock_slot_commit(c, s, (n > nback ? n - nback : nback - n) + freed);
        stock_unlock(s);

        return session_uncharge(c, back, nback, MB__UNCHARGE_REASON__UNCHARGE_FREE, true, false, 0);
}

/*
 * Charge @n (<= MB_CHARGE_MAX_PAGES) pages for the application into @out.
 * Charges a whole batch when @n is smaller and stocks the rest; at a limit
 * the daemon charges exactly @n instead (Charge.need), as try_charge()
 * falls back from MEMCG_CHARGE_BATCH to nr_pages before counting `max`.
 * conn_lock held.
 */
static int stock_charge_batched_locked(mb_client *c, void **out, size_t n, unsigned flags) {
        _cleanup_(freep) void **buf = NULL;
        size_t want = MB_MAX(n, (size_t) c->charge_batch), got = 0;
        int r;

        mb_assert_mutex_held(&c->conn_lock);
        if (want == n)
                return session_charge_locked(c, (uint32_t) n, (uint32_t) n, out, &got, flags);
        buf = malloc(want * sizeof(void *));
        if (!buf)
                return -ENOMEM;
        r = session_charge_locked(c, (uint32_t) want, (uint32_t) n, buf, &got, flags);
        if (r < 0)
                return r;
        memcpy(out, buf, n * sizeof(void *));
        /* The extra pages are ours whatever happens next. */
        if (got > n)
                (void) stock_put_locked(c, buf + n, got - n, 0);
        return 0;
}

/* stock_alloc_slow() under conn_lock, the session not broken. */
static int stock_alloc_locked(mb_client *c, void **out, size_t n, unsigned flags) {
        size_t got;
        int r = 0;

        mb_assert_mutex_held(&c->conn_lock);
        got = stock_take_local(c, out, n);
        while (got < n) {
                size_t chunk = MB_MIN(n - got, (size_t) MB_CHARGE_MAX_PAGES), k;

                r = stock_charge_batched_locked(c, out + got, chunk, flags);
                if (r == 0) {
                        got += chunk;
                        continue;
                }
                if (r != -ENOMEM)
                        break;
                k = stock_take_all(c, out + got, n - got);
                if (k == 0)
                        break;
                got += k;
                r = 0;
        }
        if (got < n) {
                char reason[ERROR_MESSAGE_BYTES];

                /* All or nothing: what we took goes back, the reason stays. */
                snprintf(reason, sizeof(reason), "%s", mb_last_error());
                if (!session_broken(c))
                        (void) stock_put_locked(c, out, got, 0);
                mb_set_error("%s", reason);
                return r == 0 ? -ENOMEM : r;
        }
        stock_account_unlock(c, stock_lock_this(c), (int64_t) n);
        return 0;
}

/*
 * The slow path of every allocation: @n pages into @out, all or nothing.
 * Takes what this CPU's stock has (another thread may have refilled it),
 * charges the rest in batches, and at a limit takes the other CPUs' stocks
 * before failing (drain_all_stock() before the OOM path).
 */
static int stock_alloc_slow(mb_client *c, void **out, size_t n, unsigned flags) {
        int r;

        if (c->forked)
                return session_lost(c);
        if (reclaim_running(c)) {
                /* conn_lock may be ours already (direct reclaim). */
                mb_set_error("a shrinker must not allocate broker pages beyond the stock");
                return -EDEADLK;
        }
        {
                MB_LOCK_GUARD(&c->conn_lock);
                r = session_broken(c) ? session_lost(c) : stock_alloc_locked(c, out, n, flags);
        }
        session_dispatch_events(c);
        return r;
}

/* The slow path of free: the stock is full (or disabled). */
static int stock_free_slow(mb_client *c, void **pages, size_t n) {
        int r;

        if (c->forked)
                return session_lost(c);
        if (reclaim_running(c))
                /* A shrinker frees while this thread answers a Reclaim: the
                 * pages join the answer. */
                return reclaim_collect(c, pages, n);
        {
                MB_LOCK_GUARD(&c->conn_lock);
                r = session_broken(c) ? session_lost(c) : stock_put_locked(c, pages, n, n);
        }
        session_dispatch_events(c);
        return r;
}

static __attribute__((noinline)) void *stock_page_alloc_slow(mb_client *c, unsigned flags) {
        void *p;
        int r;

        r = stock_alloc_slow(c, &p, 1, flags);
        if (r < 0) {
                errno = -r;
                return NULL;
        }
        return p;
}

static __attribute__((noinline)) int stock_page_free_slow(mb_client *c, void *page) {
        return stock_free_slow(c, &page, 1);
}

/* ---- the fast paths ---- */

void *mb_page_alloc(mb_client *c) {
        struct stock *s = stock_lock_this(c);
        uint32_t nr = s->nr;

        if (_likely_(nr > 0)) {
                void *p = s->pages[nr - 1];

                stock_use(c, s, 1);
                stock_unlock_nr(s, nr - 1);
                return p;
        }
        stock_unlock(s);
        return stock_page_alloc_slow(c, 0);
}

int mb_page_alloc_bulk(mb_client *c, void **pages, size_t n) {
        struct stock *s;

        if (n == 0)
                return 0;
        if (!pages) {
                mb_set_error("mb_page_alloc_bulk: no array");
                return -EINVAL;
        }
        s = stock_lock_this(c);
        if (_likely_(s->nr >= n)) {
                s->nr -= (uint32_t) n;
                memcpy(pages, s->pages + s->nr, n * sizeof(void *));
                stock_use(c, s, (int64_t) n);
                stock_unlock(s);
                return 0;
        }
        stock_unlock(s);
        return stock_alloc_slow(c, pages, n, 0);
}

void *mb_page_alloc_flags(mb_client *c, unsigned flags) {
        struct stock *s;
        uint32_t nr;

        if (flags & ~(MB_ALLOC_NOWAIT | MB_ALLOC_NORETRY)) {
                mb_set_error("mb_page_alloc_flags: unknown flags 0x%x", flags);
                errno = EINVAL;
                return NULL;
        }
        s = stock_lock_this(c);
        nr = s->nr;
        if (_likely_(nr > 0)) {
                void *p = s->pages[nr - 1];

                stock_use(c, s, 1);
                stock_unlock_nr(s, nr - 1);
                return p;
        }
        stock_unlock(s);
        if (flags & MB_ALLOC_NOWAIT) {
                /* GFP_NOWAIT: no trip to the daemon, and no wait for a
                 * lock another allocation holds; a lost session says so. */
                if (c->forked || session_broken(c))
                        errno = -session_lost(c);
                else {
                        mb_set_error("mb_page_alloc_flags: the stock is empty (MB_ALLOC_NOWAIT)");
                        errno = EAGAIN;
                }
                return NULL;
        }
        return stock_page_alloc_slow(c, flags);
}

int mb_page_alloc_bulk_flags(mb_client *c, void **pages, size_t n, unsigned flags) {
        struct stock *s;

        if (flags & ~(MB_ALLOC_NOWAIT | MB_ALLOC_NORETRY)) {
                mb_set_error("mb_page_alloc_bulk_flags: unknown flags 0x%x", flags);
                return -EINVAL;
        }
        if (n == 0)
                return 0;
        if (!pages) {
                mb_set_error("mb_page_alloc_bulk_flags: no array");
                return -EINVAL;
        }
        s = stock_lock_this(c);
        if (_likely_(s->nr >= n)) {
                s->nr -= (uint32_t) n;
                memcpy(pages, s->pages + s->nr, n * sizeof(void *));
                stock_use(c, s, (int64_t) n);
                stock_unlock(s);
                return 0;
        }
        stock_unlock(s);
        if (flags & MB_ALLOC_NOWAIT) {
                if (c->forked || session_broken(c))
                        return session_lost(c);
                mb_set_error("mb_page_alloc_bulk_flags: the stock holds fewer than %zu pages (MB_ALLOC_NOWAIT)", n);
                return -EAGAIN;
        }
        return stock_alloc_slow(c, pages, n, flags);
}

static int stock_bad_page(const mb_client *c, const void *page) {
        mb_set_error("%p is not a page of the arena of tenant %s", page, c->tenant);
        return -EINVAL;
}

int mb_page_free(mb_client *c, void *page) {
        struct stock *s;
        uint32_t nr;

        if (_unlikely_(!client_page_valid(c, page)))
                return stock_bad_page(c, page);
        s = stock_lock_this(c);
        nr = s->nr;
        if (_likely_(nr < s->limit)) {
                s->pages[nr] = page;
                stock_use(c, s, -1);
                stock_unlock_nr(s, nr + 1);
                return 0;
        }
        stock_unlock(s);
        return stock_page_free_slow(c, page);
}

int mb_page_free_bulk(mb_client *c, void **pages, size_t n) {
        struct stock *s;
        size_t push;

        if (n == 0)
                return 0;
        if (!pages) {
                mb_set_error("mb_page_free_bulk: no array");
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++)
                if (!client_page_valid(c, pages[i]))
                        return stock_bad_page(c, pages[i]);

        s = stock_lock_this(c);
        push = MB_MIN(n, (size_t) (s->nr < s->limit ? s->limit - s->nr : 0));
        if (push > 0) {
                memcpy(s->pages + s->nr, pages, push * sizeof(void *));
                s->nr += (uint32_t) push;
                stock_use(c, s, -(int64_t) push);
        }
        stock_unlock(s);
        if (_likely_(push == n))
                return 0;
        return stock_free_slow(c, pages + push, n - push);
}


int stock_setup(mb_client *c) {
        size_t cap = 2u * (size_t) c->batch_cap + 1u;
        /* Each CPU's page array starts on a cache line of its own. */
        size_t stride = DIV_ROUND_UP(cap * sizeof(void *), MB_CACHELINE_BYTES) * MB_CACHELINE_BYTES;

        c->stocks = aligned_alloc(MB_CACHELINE_BYTES, c->ncpus * sizeof(struct stock));
        c->stock_pages = aligned_alloc(MB_CACHELINE_BYTES, c->ncpus * stride);
        if (!c->stocks || !c->stock_pages)
                return -ENOMEM;
        for (unsigned i = 0; i < c->ncpus; i++)
                c->stocks[i] = (struct stock) {
                        .limit = 2u * c->charge_batch,
                        .cap = (uint32_t) cap,
                        .pages = (void **) ((uint8_t *) c->stock_pages + i * stride),
                        .slot = &c->stats->slot[i],
                };
        return 0;
}
