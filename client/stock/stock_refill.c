/* SPDX-License-Identifier: MIT */
/*
 * stock_refill.c - the stocks' traffic with the daemon that the
 * application does not wait for: charging the next batch ahead of need,
 * and adopting a batch the daemon tells.
 *
 * The kernel charges in-process, so its refill of a memcg_stock_pcp costs
 * a few atomic operations on the allocating CPU.  Here a charge costs a
 * round trip to the daemon, so the stock asks for its next batch before it
 * is empty: a pop that leaves fewer than refill_low pages (one batch)
 * marks the stock and wakes the library's thread, which charges what
 * fills the stock to 1.5 * charge_batch (a batch of runway below, half a
 * batch of room for frees below its limit of 2 * charge_batch) and pushes
 * them onto that stock while the application keeps popping what is
 * left; before the push it faults them in (MADV_POPULATE_WRITE, after
 * letting go of conn_lock), so that the application's first touch of a
 * page charged ahead costs no fault either.  Under steady churn the Grant
 * lands before the stock is empty; an application that outruns it finds
 * conn_lock held by the charge in flight, waits for the rest of that one
 * trip, and takes its pages (or, while they are faulted in, charges its
 * own).
 *
 * Precision: a stock receives pages ahead only below refill_low <= batch
 * pages, and never beyond its limit (2 * charge_batch; the excess goes
 * back), so the bound of the stocks stays ncpus * 2 * charge_batch pages
 * per client, plus the pages in flight on the library's thread between
 * its Grant and its push (fewer than 2 * charge_batch).  Near a limit
 * nothing is charged ahead: only while the last Grant's headroom (pages before the nearest high or
 * max on the tenant's path) leaves room for the charge and for all this
 * client's stocks may hold (ncpus * 2 * charge_batch) besides, and with
 * MB_ALLOC_NORETRY, so that a charge ahead never makes the daemon reclaim
 * or wait; there the application's own charge decides, as try_charge()
 * does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "core/client.h"
#include "macros.h"
#include "session/session.h"
#include "stock/stock.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Pages charged ahead are faulted in and stocked this many bytes at a
 * time (at least one page). */
#define STOCK_REFILL_CHUNK_BYTES (256u * 1024u)

/* Whether charging ahead also faults the pages in (MEMBROKER_POPULATE=0:
 * no; a kernel without MADV_POPULATE_WRITE: no, found at the first try). */
static int stock_refill_populate_on = -1;

/*
 * Fault the @n charged pages @pages in, writable, from the library's
 * thread (MADV_POPULATE_WRITE: the kernel allocates and zeroes each shmem
 * page, as a first write would), so that the application's first touch
 * costs no fault.  The arena's file holds no data where the daemon grants
 * (it punched every returned page), so the pages read zero as before.
 * Runs of consecutive pages go in one call.
 */
static bool stock_populate_enabled(void) {
        int on = __atomic_load_n(&stock_refill_populate_on, __ATOMIC_RELAXED);

        if (on < 0) {
                const char *e = getenv("MEMBROKER_POPULATE");

                on = !(e && strcmp(e, "0") == 0);
                __atomic_store_n(&stock_refill_populate_on, on, __ATOMIC_RELAXED);
        }
        return on > 0;
}

void stock_populate_range(const mb_client *c, void *start, size_t n) {
        if (n == 0 || !stock_populate_enabled())
                return;
        if (madvise(start, n * c->page_size, MADV_POPULATE_WRITE) < 0 && errno == EINVAL)
                __atomic_store_n(&stock_refill_populate_on, 0, __ATOMIC_RELAXED);
}

void stock_populate_pages(const mb_client *c, void **pages, size_t n) {
        if (!stock_populate_enabled())
                return;
        for (size_t i = 0; i < n;) {
                uint8_t *start = pages[i];
                size_t run = 1;

                while (i + run < n && (uint8_t *) pages[i + run] == start + run * c->page_size)
                        run++;
                if (madvise(start, run * c->page_size, MADV_POPULATE_WRITE) < 0 && errno == EINVAL) {
                        __atomic_store_n(&stock_refill_populate_on, 0, __ATOMIC_RELAXED);
                        return;
                }
                i += run;
        }
}

void stock_refill_setup(mb_client *c) {
        const char *e = getenv("MEMBROKER_REFILL");
        bool off = e && strcmp(e, "0") == 0;

        __atomic_store_n(&c->refill.headroom, c->unlimited ? UINT64_MAX : 0, __ATOMIC_RELAXED);
        __atomic_store_n(&c->refill.low, off ? 0u : MB_MAX(1u, c->charge_batch), __ATOMIC_RELAXED);
}

/* Whether a charge ahead of @n pages fits the last Grant's headroom with
 * room to spare for everything this client's stocks and spill may hold
 * (ncpus * 3 * batch): far from a limit only, so that pages charged ahead
 * never make another thread or client of the tenant meet it. */
static bool stock_refill_room(const mb_client *c, uint64_t n) {
        uint64_t spare = (uint64_t) c->ncpus * 3u * __atomic_load_n(&c->charge_batch, __ATOMIC_RELAXED);

        return __atomic_load_n(&c->refill.headroom, __ATOMIC_RELAXED) >= n + spare;
}

void stock_refill_kick(mb_client *c, unsigned cpu) {
        struct stock *s = &c->stocks[cpu];

        if (!c->session.thread_started || c->forked || session_broken(c) ||
            !stock_refill_room(c, 2u * (uint64_t) __atomic_load_n(&c->charge_batch, __ATOMIC_RELAXED)))
                return;
        if (__atomic_load_n(&s->refill_ask, __ATOMIC_RELAXED) ||
            __atomic_exchange_n(&s->refill_ask, 1u, __ATOMIC_ACQ_REL))
                return;
        __atomic_store_n(&c->refill.pending, 1, __ATOMIC_RELEASE);
        (void) eventfd_write(c->session.wake_fd, 1);
}

int stock_refill_put(mb_client *c, unsigned cpu, void **pages, size_t n) {
        struct stock *s = stock_lock_cpu(c, cpu);
        uint32_t nr = stock_nr(s);
        size_t k = nr < s->limit ? MB_MIN(n, (size_t) (s->limit - nr)) : 0;

        if (k > 0) {
                memcpy(s->pages + nr, pages, k * sizeof(void *));
                stock_set_nr(s, nr + (uint32_t) k);
                stock_slot_add(s->slot, MB_STAT_STOCK, (int64_t) k);
                stock_slot_commit(c, s, k);
        }
        stock_unlock(c, s);
        return session_uncharge(c, pages + k, n - k, MB__UNCHARGE_REASON__UNCHARGE_FREE, false, false, 0);
}

/* Charge what fills the stock of CPU @cpu to three quarters of its limit
 * (1.5 * batch) into @buf: a batch of runway below the watermark, half a
 * batch of room above for frees before the stock overflows and returns a
 * batch.  Returns how many pages were charged.  conn_lock held. */
static size_t stock_refill_charge_locked(mb_client *c, unsigned cpu, void **buf) {
        const struct stock *s = &c->stocks[cpu];
        uint32_t nr = stock_nr(s), limit = __atomic_load_n(&s->limit, __ATOMIC_RELAXED), n;
        size_t got = 0;

        mb_assert_mutex_held(&c->session.conn_lock);
        /* Asked below the watermark: fill up even if frees raised it a
         * little since (a stock hovering there asks once, not again and
         * again). */
        if (nr >= limit - limit / 4 || session_broken(c))
                return 0;
        n = MB_MIN(limit - limit / 4 - nr, (uint32_t) MB_CHARGE_MAX_PAGES);
        if (!stock_refill_room(c, n))
                return 0;
        /* At a limit after all (another client charged meanwhile):
         * -ENOMEM, nothing charged; the application's own charge decides
         * (and reclaims). */
        if (session_charge_locked(c, n, n, buf, &got, MB_ALLOC_NORETRY | SESSION_CHARGE_AHEAD) < 0)
                return 0;
        return got;
}

void stock_refill_run(mb_client *c) {
        _cleanup_(freep) void **buf = NULL;

        session_assert_unlocked(c);
        __atomic_store_n(&c->refill.pending, 0, __ATOMIC_RELEASE);
        buf = malloc(2u * (size_t) c->batch_cap * sizeof(void *));
        for (unsigned cpu = 0; cpu < c->ncpus; cpu++) {
                struct stock *s = &c->stocks[cpu];
                size_t got;

                if (!__atomic_load_n(&s->refill_ask, __ATOMIC_ACQUIRE))
                        continue;
                /* Pages another CPU spilled come first: no charge, no
                 * fault (they were in use); an empty spill learns that
                 * this CPU waits for pages. */
                if (stock_spill_count(c) > 0) {
                        struct stock *ls = stock_lock_cpu(c, cpu);

                        (void) stock_spill_refill_locked(c, ls);
                        stock_unlock(c, ls);
                } else
                        __atomic_store_n(&c->spill.want, cpu + 1, __ATOMIC_RELAXED);
                /* The application talks to the daemon itself (its own
                 * charge, or a return): no charge ahead now; its stock
                 * asks again while it stays below the watermark. */
                if (buf && pthread_mutex_trylock(&c->session.conn_lock) == 0) {
                        got = stock_refill_charge_locked(c, cpu, buf);
                        pthread_mutex_unlock(&c->session.conn_lock);
                        /* Faulted in without conn_lock, and stocked a
                         * chunk at a time as they are: an application that
                         * outruns the refill takes the first ones (or
                         * charges on its own) instead of waiting for all
                         * the faults (a batch of 2 MiB pages is
                         * milliseconds of zeroing).  The pages are this
                         * client's, in no stock until their populate is
                         * done: no free can return them under it. */
                        for (size_t k = 0, m; k < got; k += m) {
                                m = MB_MIN(got - k, MB_MAX((size_t) 1, STOCK_REFILL_CHUNK_BYTES / c->page_size));
                                stock_populate_pages(c, buf + k, m);
                                (void) stock_refill_put(c, cpu, buf + k, m);
                        }
                }
                __atomic_store_n(&s->refill_ask, 0u, __ATOMIC_RELEASE);
        }
}

/*
 * The daemon told a new batch (Grant.charge_batch): a limit appeared on a
 * tenant that had none, whose clients charged the larger batch of an
 * unlimited tenant, or ChargeBatch= changed.  The stocks keep their room
 * (2 * batch_cap + 1 pages), so a batch can grow up to what the Welcome
 * allowed (charge_batch_max, else its batch) and no further.  A smaller
 * batch trims every stock to its new limit at once, the excess
 * going back to the daemon, so that the precision bound (ncpus * 2 *
 * charge_batch pages) holds from now on, not only after the stocks happen
 * to overflow.  conn_lock held.
 */
int stock_adopt_batch_locked(mb_client *c, uint32_t batch) {
        _cleanup_(freep) void **back = NULL;
        size_t n = 0;

        mb_assert_mutex_held(&c->session.conn_lock);
        batch = MB_MAX(1u, MB_MIN(batch, c->batch_cap));
        if (batch == c->charge_batch)
                return 0;
        back = malloc(stock_room_all(c) * sizeof(void *));
        if (!back)
                return -ENOMEM; /* keep the old batch; the daemon does not tell again */
        __atomic_store_n(&c->charge_batch, batch, __ATOMIC_RELAXED);
        if (c->refill.low > 0)
                __atomic_store_n(&c->refill.low, MB_MAX(1u, batch), __ATOMIC_RELAXED);
        for (unsigned i = 0; i < c->ncpus; i++) {
                struct stock *s = stock_lock_cpu(c, i);

                /* limit 0: disabled (fork, lost session): stays so */
                if (s->limit != 0) {
                        s->limit = 2u * batch;
                        if (stock_nr(s) > s->limit) {
                                uint32_t take = stock_nr(s) - s->limit;

                                stock_take_locked(c, s, back + n, take);
                                n += take;
                        }
                }
                stock_unlock(c, s);
        }
        /* The spill's bound is a batch per CPU: what passes the new one
         * goes back too. */
        if (stock_spill_count(c) > c->ncpus * batch) {
                struct stock *s = stock_lock_this(c);
                uint32_t have = stock_spill_count(c), bound = c->ncpus * batch;

                /* Another thread may have taken some meanwhile. */
                n += stock_spill_take_locked(c, s, back + n, have > bound ? have - bound : 0);
                stock_unlock(c, s);
        }
        return session_uncharge(c, back, n, MB__UNCHARGE_REASON__UNCHARGE_FREE, true, false, 0);
}


uint64_t mb_client_stock_misses(const mb_client *c) {
        return __atomic_load_n(&c->refill.misses, __ATOMIC_RELAXED);
}

bool mb_client_refill_idle(const mb_client *c) {
        for (unsigned cpu = 0; cpu < c->ncpus; cpu++)
                if (__atomic_load_n(&c->stocks[cpu].refill_ask, __ATOMIC_ACQUIRE))
                        return false;
        return true;
}
