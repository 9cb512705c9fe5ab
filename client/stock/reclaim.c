/* SPDX-License-Identifier: MIT */
/*
 * reclaim.c - answers to the daemon's Reclaim and Drain, and the
 * application's shrinkers (mm/vmscan.c shrink_slab() for one client).
 *
 * Who answers.  The library's thread, or with MB_CONNECT_NO_THREAD the
 * thread that read the request: mb_process(), or a thread waiting for its
 * own reply (the way an allocating task runs direct reclaim in the kernel).
 * The answer takes stocked pages first (from every CPU, like
 * drain_all_stock()), then calls the shrinkers, and sends what they freed
 * in one Uncharge{reply_to}; it never waits for the daemon, so it is safe in
 * any of those threads.
 *
 * Nothing left.  A client with no shrinker registered (the library's own
 * count: mb_malloc() and reclaimable slab caches register theirs) whose
 * answer emptied its stocks on every CPU says so (Uncharge.nothing_left):
 * the daemon's job then skips it in its later rounds, as the kernel skips
 * anon pages without swap and shrinkers whose count was empty.  Its next
 * Charge ends that; a client with a shrinker never says it, since a cache
 * can grow from the stock without a Charge.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/client.h"
#include "macros.h"
#include "stock/reclaim.h"
#include "session/session.h"
#include "stock/stock.h"

/* While a thread answers a Reclaim, pages its shrinkers free that do not fit
 * the stock (the mb_page_free() slow path) join the answer instead of going
 * back on their own -- and never wait for the daemon. */
struct reclaim_ctx {
        mb_client *c;
        void **pages;
        size_t n, alloc;
};

static __thread struct reclaim_ctx *reclaim_ctx;

bool reclaim_running(const mb_client *c) {
        return reclaim_ctx && reclaim_ctx->c == c;
}

static int reclaim_ctx_add(struct reclaim_ctx *ctx, void **pages, size_t n) {
        if (ctx->n + n > ctx->alloc) {
                size_t a = MB_MAX(ctx->alloc * 2, ctx->n + n);
                void **v = realloc(ctx->pages, MB_MAX(a, (size_t) 64) * sizeof(void *));

                if (!v)
                        return -ENOMEM;
                ctx->pages = v;
                ctx->alloc = MB_MAX(a, (size_t) 64);
        }
        memcpy(ctx->pages + ctx->n, pages, n * sizeof(void *));
        ctx->n += n;
        return 0;
}

/*
 * Ask the shrinkers for @want pages, each in proportion to what its count()
 * says it could free (do_shrink_slab()'s share of the scan).  Returns how
 * many they freed.  The shrinkers run with no library lock held except
 * shrinker_lock for reading, so they may free pages (not allocate them).
 */
static bool reclaim_has_shrinkers(mb_client *c) {
        MB_RDLOCK_GUARD(&c->shrink.lock);
        return c->shrink.n > 0;
}

static unsigned long reclaim_shrink(mb_client *c, unsigned long want) {
        unsigned long total = 0, freed = 0;
        _cleanup_(freep) unsigned long *counts = NULL;

        mb_assert_mutex_not_held(&c->session.io_lock);
        MB_RDLOCK_GUARD(&c->shrink.lock);
        if (c->shrink.n == 0)
                return 0;
        counts = calloc(c->shrink.n, sizeof(*counts));
        if (!counts)
                return 0;
        for (size_t i = 0; i < c->shrink.n; i++) {
                counts[i] = c->shrink.list[i]->count(c->shrink.list[i]->userdata);
                total += counts[i];
        }
        for (size_t i = 0; i < c->shrink.n && total > 0 && freed < want; i++) {
                unsigned long nr;

                if (counts[i] == 0)
                        continue;
                /* Rounded up, so that a small request still reaches a
                 * shrinker with little to give. */
                nr = (unsigned long) (((unsigned __int128) want * counts[i] + total - 1) / total);
                nr = MB_MIN(nr, MB_MIN(counts[i], want - freed));
                freed += c->shrink.list[i]->scan(c->shrink.list[i]->userdata, nr);
        }
        return freed;
}

/*
 * Answer one Reclaim of @rq->pages (or Drain, pages UINT64_MAX): unused
 * stocked pages first (from every CPU, like drain_all_stock()), then the
 * shrinkers; what they freed goes back with the rest in one
 * Uncharge{reply_to}, never more than asked (an excess goes back on its
 * own), saying "nothing left" when there is no shrinker and the stocks
 * gave fewer pages than could have been taken.  io_lock not held; never
 * waits for the daemon.
 */
static void reclaim_answer(mb_client *c, const struct daemon_request *rq) {
        struct reclaim_ctx ctx = { .c = c }, *prev = reclaim_ctx;
        bool drain = rq->pages == UINT64_MAX;
        size_t room = stock_room_all(c);
        size_t want = drain ? room : (size_t) MB_MIN(rq->pages, (uint64_t) SIZE_MAX / 2);
        size_t cap = MB_MIN(want, room), got = 0, nanswer;
        _cleanup_(freep) void **buf = NULL;
        bool shrinkers;
        Mb__UnchargeReason reason = drain ? MB__UNCHARGE_REASON__UNCHARGE_DRAIN : MB__UNCHARGE_REASON__UNCHARGE_RECLAIM;

        if (session_broken(c))
                return;
        __atomic_add_fetch(&c->reclaim_requests, 1, __ATOMIC_RELAXED);
        /* Read before the stocks are taken: a shrinker registered after
         * this gets its objects from pages charged after it (a Charge, which
         * ends "nothing left") or freed into a stock after the take (which
         * the next job takes). */
        shrinkers = reclaim_has_shrinkers(c);
        buf = malloc(MB_MAX(2 * cap, (size_t) 1) * sizeof(void *));
        if (buf)
                got = stock_take_all(c, buf, cap);
        if (!drain && buf && got < want) {
                reclaim_ctx = &ctx;
                (void) reclaim_shrink(c, want - got);
                reclaim_ctx = prev;
                /* What the shrinkers freed went to the stocks (or to ctx
                 * when a stock was full). */
                if (ctx.n < want - got)
                        got += stock_take_all(c, buf + got, MB_MIN(want - got - ctx.n, 2 * cap - got));
        }
        nanswer = MB_MIN(ctx.n, want - got);
        if (nanswer > 0) {
                void **all = malloc((got + nanswer) * sizeof(void *));

                if (all) {
                        memcpy(all, buf, got * sizeof(void *));
                        memcpy(all + got, ctx.pages, nanswer * sizeof(void *));
                        free(buf);
                        buf = all;
                        got += nanswer;
                        memmove(ctx.pages, ctx.pages + nanswer, (ctx.n - nanswer) * sizeof(void *));
                        ctx.n -= nanswer;
                }
        }
        (void) session_answer(c, buf, got, reason, rq->seq, !shrinkers && buf && got < cap);
        /* Shrinkers freed more than asked, past the stocks: home too. */
        if (ctx.n > 0)
                (void) session_uncharge(c, ctx.pages, ctx.n, MB__UNCHARGE_REASON__UNCHARGE_FREE, false, false, 0);
        free(ctx.pages);
}


uint64_t mb_client_reclaim_requests(const mb_client *c) {
        return __atomic_load_n(&c->reclaim_requests, __ATOMIC_RELAXED);
}

int reclaim_collect(mb_client *c, void **pages, size_t n) {
        mb_assert_debug(reclaim_running(c));
        if (reclaim_ctx_add(reclaim_ctx, pages, n) < 0)
                return session_uncharge(c, pages, n, MB__UNCHARGE_REASON__UNCHARGE_FREE, false, false, 0);
        stock_account_unlock(c, stock_lock_this(c), -(int64_t) n);
        return 0;
}

int reclaim_collect_run(mb_client *c, void *first, size_t n) {
        _cleanup_(freep) void **v = malloc(n * sizeof(void *));

        mb_assert_debug(reclaim_running(c));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                v[i] = (uint8_t *) first + (i << c->page_shift);
        return reclaim_ctx_add(reclaim_ctx, v, n);
}

void reclaim_run_requests(mb_client *c) {
        mb_assert_mutex_not_held(&c->session.io_lock);
        for (;;) {
                struct daemon_request rq;

                {
                        MB_LOCK_GUARD(&c->session.io_lock);

                        if (c->session.nrequests == 0 || c->session.broken)
                                return;
                        rq = c->session.requests[0];
                        memmove(c->session.requests, c->session.requests + 1, (c->session.nrequests - 1) * sizeof(*c->session.requests));
                        c->session.nrequests--;
                }
                reclaim_answer(c, &rq);
        }
}

int mb_register_shrinker(mb_client *c, const struct mb_shrinker *s) {
        const struct mb_shrinker **v;

        if (!s || !s->count || !s->scan) {
                mb_set_error("mb_register_shrinker: a shrinker needs count() and scan()");
                return -EINVAL;
        }
        MB_WRLOCK_GUARD(&c->shrink.lock);
        for (size_t i = 0; i < c->shrink.n; i++)
                if (c->shrink.list[i] == s) {
                        mb_set_error("mb_register_shrinker: already registered");
                        return -EEXIST;
                }
        v = realloc(c->shrink.list, (c->shrink.n + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        c->shrink.list = v;
        c->shrink.list[c->shrink.n++] = s;
        return 0;
}

int mb_unregister_shrinker(mb_client *c, const struct mb_shrinker *s) {
        /* Waits for a reclaim that is running the shrinkers (like the
         * kernel's unregister_shrinker()). */
        MB_WRLOCK_GUARD(&c->shrink.lock);
        for (size_t i = 0; i < c->shrink.n; i++)
                if (c->shrink.list[i] == s) {
                        memmove(c->shrink.list + i, c->shrink.list + i + 1,
                                (c->shrink.n - i - 1) * sizeof(*c->shrink.list));
                        c->shrink.n--;
                        return 0;
                }
        mb_set_error("mb_unregister_shrinker: not registered");
        return -ENOENT;
}

