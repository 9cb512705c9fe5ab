/* SPDX-License-Identifier: MIT */
/*
 * conn-charge.c - a client's charges (see conn.h, conn-internal.h):
 * Charge decided by the accounting core, the Grant from the arena, parking
 * for the reclaimer at a max or over a high, the throttle, Uncharge, and
 * the reclaimer's side of the connection (struct reclaim_client_ops).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "charge.h"
#include "conn-internal.h"
#include "log.h"
#include "macros.h"
#include "mb_limits.h"
#include "reclaim.h"
#include "worker.h"

/* ---- Charge ---- */

static void conn_charge_start(struct conn *c, uint32_t seq, uint32_t n, uint32_t need, uint32_t flags, bool waiting,
                              bool contig);

/*
 * memory.pressure: the client is stalled while the daemon holds a Charge
 * an application thread waits for -- parked (reclaim at a max, the high
 * throttle) or queued behind the parked one.  psi_task_change() on the
 * transitions only: a Charge answered at once never touches the groups.
 */
static void conn_psi_update(struct conn *c) {
        bool stalled = c->psi.member && ((c->charge.parked && c->charge.parked_waiting) || c->charge.nqueued_waiting > 0);

        if (stalled == c->psi.stalled)
                return;
        c->psi.stalled = stalled;
        tenant_pressure_change(c->tenant, 0, stalled ? 1 : -1);
}

/* Tell the client the headroom left and a new batch, and send @grant. */
static void conn_grant_send(struct conn *c, Mb__Grant *grant, uint32_t seq) {
        Mb__Msg msg = MB__MSG__INIT;
        unsigned long room = page_counter_headroom(&c->tenant->memory);
        unsigned batch;

        grant->has_headroom = true;
        grant->headroom = room == ULONG_MAX ? UINT64_MAX : (uint64_t) room;
        batch = conn_charge_batch(c->b, c->tenant, c->told_batch);
        if (batch != c->told_batch) {
                grant->has_charge_batch = true;
                grant->charge_batch = batch;
                c->told_batch = batch;
        }
        msg.body_case = MB__MSG__BODY_GRANT;
        msg.grant = grant;
        if (conn_send(c, &msg) < 0)
                conn_fail(c, true, seq, ENOMEM, "cannot queue the Grant");
}

/* Grant @n charged pages of the client's own mapping (Charge.flags
 * OUTSIDE): counted, no arena pages.  The kernel charges the anonymous
 * pages a task faults wherever they are mapped (mem_cgroup_charge() from
 * the fault path); the pages stay the client's until it says its mapping
 * went (Uncharge.outside_pages) or the session ends. */
static void conn_grant_outside(struct conn *c, uint32_t seq, uint32_t n, uint64_t throttle_usec) {
        Mb__Grant grant = MB__GRANT__INIT;

        c->outside += n;
        reclaim_client_set_outside(c->rc, c->outside);
        conn_daemon_stat(c, MB_STAT_ANON_MMAP, n);
        grant.seq = seq;
        grant.has_throttle_usec = throttle_usec > 0;
        grant.throttle_usec = throttle_usec;
        conn_grant_send(c, &grant, seq);
}

/* How often a grant that finds its arena full waits for the punches other
 * workers have pending (one sched_yield() each). */
#define CONN_PUNCH_WAIT_TRIES 1000u

/* Grant @n charged pages: pick them in the arena, record them, reply. */
static void conn_grant(struct conn *c, uint32_t seq, uint32_t n, uint64_t throttle_usec) {
        struct tenant *t = c->tenant;
        struct worker *w = c->w;
        Mb__Grant grant = MB__GRANT__INIT;
        int nextents, max_extents, r;

        if (c->charge.outside)
                return conn_grant_outside(c, seq, n, throttle_usec);
        /* A contiguous charge (alloc_pages(order)): one extent or nothing. */
        max_extents = c->charge.contig ? 1 : MB_FRAME_MAX_EXTENTS;
        nextents = arena_alloc(c->arena, c->owner, n, w->extents, max_extents);
        if (nextents < 0 && w->npunch > 0) {
                /* Pages this worker returned wait for their punch: do it
                 * now, they are free after it. */
                worker_flush_punch(w);
                nextents = arena_alloc(c->arena, c->owner, n, w->extents, max_extents);
        }
        /* Pages another worker returned are free at the end of its loop
         * turn (a short wait, and only where the tenant's charge fills
         * the arena). */
        for (unsigned i = 0; nextents < 0 && i < CONN_PUNCH_WAIT_TRIES &&
                             atomic_load_explicit(&c->arena->npending, memory_order_relaxed) > 0;
             i++) {
                sched_yield();
                nextents = arena_alloc(c->arena, c->owner, n, w->extents, max_extents);
        }
        if (nextents < 0 && c->charge.contig) {
                page_counter_uncharge(&t->memory, n);
                log_debug("tenant %s: no run of %u free pages in its arena (%" PRIu64 " of %" PRIu64 " in use)",
                          t->path, n, arena_used(c->arena), c->arena->npages);
                conn_send_error(c, true, seq, ENOMEM, "the arena of the tenant has no free run that long");
                return;
        }
        if (nextents < 0) {
                page_counter_uncharge(&t->memory, n);
                log_warning("tenant %s: its arena cannot supply %u more pages (%" PRIu64 " of %" PRIu64 " in use)",
                            t->path, n, arena_used(c->arena), c->arena->npages);
                conn_send_error(c, true, seq, ENOMEM, "the arena of the tenant is full");
                return;
        }
        /* Zero pages only, and the tmpfs size grown to cover them. */
        r = arena_grant_prepare(c->arena, w->extents, (size_t) nextents);
        if (r < 0) {
                (void) arena_release(c->arena, c->owner, w->extents, (size_t) nextents);
                page_counter_uncharge(&t->memory, n);
                log_warning_errno(r, "tenant %s: cannot grow its arena for %u more pages: %m", t->path, n);
                conn_send_error(c, true, seq, ENOMEM, "the arena of the tenant cannot grow");
                return;
        }
        c->held += n;
        reclaim_client_set_held(c->rc, c->held);
        /* Pages it may stock: it has something to give again (a Charge
         * granted after it answered "nothing left"). */
        reclaim_client_charged(c->rc);

        for (int i = 0; i < nextents; i++) {
                mb__extent__init(&w->pb_extents[i]);
                w->pb_extents[i].start = w->extents[i].start;
                w->pb_extents[i].count = w->extents[i].count;
                w->pb_extent_ptrs[i] = &w->pb_extents[i];
        }
        grant.seq = seq;
        grant.n_extents = (size_t) nextents;
        grant.extents = w->pb_extent_ptrs;
        grant.has_throttle_usec = throttle_usec > 0;
        grant.throttle_usec = throttle_usec;
        conn_grant_send(c, &grant, seq);
}

static void conn_park(struct conn *c, uint32_t seq, uint32_t n, bool charged) {
        c->charge.parked = true;
        c->charge.parked_charged = charged;
        c->charge.parked_seq = seq;
        c->charge.parked_pages = n;
        c->charge.parked_throttle_usec = 0;
        c->charge.parked_waiting = c->charge.waiting;
        conn_psi_update(c);
}

/* The parked charge is done: run the Charges that queued up behind it. */
static void conn_charge_next(struct conn *c) {
        c->charge.parked = false;
        c->charge.parked_charged = false;
        while (!c->charge.parked && c->charge.nqueued > 0 && c->state == CONN_READY) {
                struct conn_queued_charge q = c->charge.queued[c->charge.queued_head];

                c->charge.queued_head = (c->charge.queued_head + 1) % c->charge.queued_alloc;
                c->charge.nqueued--;
                if (q.waiting)
                        c->charge.nqueued_waiting--;
                conn_charge_start(c, q.seq, q.pages, q.need, q.flags, q.waiting, q.contig);
        }
        conn_psi_update(c);
        /* Last: this may end the connection (and free @c). */
        if (c->reading_paused && c->charge.nqueued < CONN_QUEUED_CHARGES_MAX && c->state == CONN_READY) {
                c->reading_paused = false;
                bufferevent_enable(c->bev, EV_READ);
                conn_process_input(c);
                (void) conn_maybe_finish(c);
        }
}

/* Count the events the charge decision returned (memcg_memory_event()). */
static void conn_charge_events(struct conn *c, const struct tenant_charge *res) {
        for (size_t i = 0; i < res->nevents; i++)
                broker_memory_event(c->b, res->events[i].tenant, res->events[i].event);
}

/* The pages are charged.  mem_cgroup_handle_over_high(): when the charge
 * left the tenant or an ancestor above its high (@res->over_high), hold the
 * Grant while the reclaimer counts `high`, takes the overage back and
 * computes the throttle. */
static void conn_charge_charged(struct conn *c, uint32_t seq, uint32_t n, const struct tenant_charge *res) {
        conn_charge_events(c, res);
        if (res->over_high) {
                conn_park(c, seq, n, true);
                reclaim_charge_over_high(c->rc, seq, n);
                return;
        }
        conn_grant(c, seq, n, 0);
}

static void conn_charge_start(struct conn *c, uint32_t seq, uint32_t n, uint32_t need, uint32_t flags, bool waiting,
                              bool contig) {
        struct tenant_charge res;

        c->charge.waiting = waiting;
        /* One charge at a time is in progress (the others queue behind a
         * parked one), so the flag stays with it until its reply. */
        c->charge.contig = contig;
        c->charge.outside = flags & WIRE_CHARGE_FLAG_OUTSIDE;
        conn_daemon_stat(c, MB_STAT_CHARGE_REQUESTS, 1);
        if (!tenant_try_charge(c->tenant, n, need, 0, &res)) {
                /* `max` counted; the reclaimer drains the stocks of the
                 * failing subtree, reclaims there and retries
                 * (tenant_charge_next()); the reply comes from
                 * conn_charge_resume().  Still @need pages: the batch fell
                 * back first. */
                n = MB_MIN(n, need);
                conn_charge_events(c, &res);
                conn_park(c, seq, n, false);
                reclaim_charge_failed(c->rc, seq, n, flags);
                return;
        }
        conn_charge_charged(c, seq, (uint32_t) res.charged, &res);
}

void conn_charge(struct conn *c, const Mb__Charge *charge) {
        uint32_t n = charge->pages, need = charge->has_need ? charge->need : n;
        uint32_t flags = charge->has_flags ? charge->flags : 0;
        bool waiting = charge->has_waiting && charge->waiting;
        bool contig = charge->has_contig_pages;
        bool outside = flags & WIRE_CHARGE_FLAG_OUTSIDE;

        if (outside && (contig || need != n || n < 1 || n > MB_OUTSIDE_MAX_PAGES))
                return conn_fail(c, true, charge->seq, EINVAL,
                                 "charge of %u pages outside the arena with need=%u%s (need must equal pages, "
                                 "in 1..%u, not contiguous)",
                                 n, need, contig ? ", contiguous" : "", MB_OUTSIDE_MAX_PAGES);
        if (contig && (charge->contig_pages < 1 || charge->contig_pages > MB_CONTIG_MAX_PAGES))
                return conn_fail(c, true, charge->seq, EINVAL, "contiguous charge of %u pages is outside 1..%u",
                                 charge->contig_pages, MB_CONTIG_MAX_PAGES);
        if (contig && (n != charge->contig_pages || need != n))
                return conn_fail(c, true, charge->seq, EINVAL,
                                 "contiguous charge of %u pages with pages=%u need=%u (all three must agree)",
                                 charge->contig_pages, n, need);
        if (n < 1 || (!contig && !outside && n > MB_CHARGE_MAX_PAGES))
                return conn_fail(c, true, charge->seq, EINVAL, "charge of %u pages is outside 1..%u", n,
                                 MB_CHARGE_MAX_PAGES);
        if (need < 1 || need > n)
                return conn_fail(c, true, charge->seq, EINVAL, "charge needing %u pages is outside 1..%u", need,
                                 n);
        if (flags & ~WIRE_CHARGE_FLAGS_KNOWN)
                return conn_fail(c, true, charge->seq, EINVAL, "charge with unknown flags 0x%x", flags);
        /* A Charge: the reclaim job that has it marked "nothing left" asks
         * it again (set_shrinker_bit() when a shrinker gets objects). */
        reclaim_client_charged(c->rc);

        if (c->charge.parked) {
                /* Replies keep their order: wait behind the parked one. */
                if (c->charge.nqueued == c->charge.queued_alloc) {
                        size_t a = MB_MAX(c->charge.queued_alloc * 2, (size_t) 4);
                        struct conn_queued_charge *q = malloc(a * sizeof(*q));

                        if (!q)
                                return conn_fail(c, true, charge->seq, ENOMEM, "out of memory");
                        for (size_t i = 0; i < c->charge.nqueued; i++)
                                q[i] = c->charge.queued[(c->charge.queued_head + i) % c->charge.queued_alloc];
                        free(c->charge.queued);
                        c->charge.queued = q;
                        c->charge.queued_alloc = a;
                        c->charge.queued_head = 0;
                }
                c->charge.queued[(c->charge.queued_head + c->charge.nqueued) % c->charge.queued_alloc] = (struct conn_queued_charge) {
                        .seq = charge->seq, .pages = n, .need = need, .flags = flags, .waiting = waiting,
                        .contig = contig
                };
                c->charge.nqueued++;
                if (waiting) {
                        c->charge.nqueued_waiting++;
                        conn_psi_update(c);
                }
                return;
        }
        conn_charge_start(c, charge->seq, n, need, flags, waiting, contig);
}

/* ---- the reclaimer's side (reclaim.h) ---- */

void conn_charge_resume(struct conn *c, uint32_t seq, uint32_t pages, int error, const char *reason) {
        struct tenant_charge res;

        if (!c->charge.parked || c->charge.parked_charged || c->charge.parked_seq != seq || c->charge.parked_pages != pages) {
                log_error("client %" PRIu64 ": the reclaimer completed charge %u, which is not waiting", c->client_id,
                          seq);
                if (error == 0)
                        page_counter_uncharge(&c->tenant->memory, pages);
                return;
        }
        if (c->state != CONN_READY) {
                if (error == 0)
                        page_counter_uncharge(&c->tenant->memory, pages);
                c->charge.parked = false;
                return;
        }
        if (error != 0) {
                log_debug("client %" PRIu64 ": %s", c->client_id, reason ? reason : strerror(error));
                conn_send_error(c, true, seq, error, reason ? reason : strerror(error));
                conn_charge_next(c);
                return;
        }
        c->charge.parked = false;
        /* The reclaimer charged; the high half of the decision is ours. */
        res = (struct tenant_charge) {};
        tenant_charge_check_high(c->tenant, &res);
        c->charge.waiting = c->charge.parked_waiting; /* the same Charge, parked again over a high */
        conn_charge_charged(c, seq, pages, &res);
        if (!c->charge.parked)
                conn_charge_next(c);
}

static void conn_throttle_cb(evutil_socket_t fd, short what, void *userdata) {
        struct conn *c = userdata;
        uint32_t seq = c->charge.parked_seq, n = c->charge.parked_pages;
        uint64_t throttle = c->charge.parked_throttle_usec;

        c->charge.parked = false;
        c->charge.parked_charged = false;
        if (c->state != CONN_READY) {
                page_counter_uncharge(&c->tenant->memory, n);
                return;
        }
        conn_grant(c, seq, n, throttle);
        conn_charge_next(c);
}

void conn_charge_grant_later(struct conn *c, uint32_t seq, uint64_t delay_usec) {
        struct timeval tv = { .tv_sec = (time_t) (delay_usec / 1000000), .tv_usec = (suseconds_t) (delay_usec % 1000000) };

        if (!c->charge.parked || !c->charge.parked_charged || c->charge.parked_seq != seq) {
                log_error("client %" PRIu64 ": the reclaimer released charge %u, which is not waiting", c->client_id,
                          seq);
                return;
        }
        c->charge.parked_throttle_usec = delay_usec;
        if (delay_usec == 0) {
                conn_throttle_cb(-1, 0, c);
                return;
        }
        /* mem_cgroup_handle_over_high(): the penalty, slept by the
         * charging client only (its Grant waits; nobody else does). */
        conn_daemon_stat(c, MB_STAT_THROTTLE_USEC, (int64_t) delay_usec);
        if (!c->charge.throttle_timer)
                c->charge.throttle_timer = evtimer_new(c->w->base, conn_throttle_cb, c);
        if (!c->charge.throttle_timer || evtimer_add(c->charge.throttle_timer, &tv) < 0)
                conn_throttle_cb(-1, 0, c);
}

void conn_reclaim_request(struct conn *c, uint32_t seq, uint32_t pages) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Reclaim rq = MB__RECLAIM__INIT;

        if (c->state != CONN_READY)
                return;
        rq.seq = seq;
        rq.pages = pages;
        msg.body_case = MB__MSG__BODY_RECLAIM;
        msg.reclaim = &rq;
        /* pgscan: pages asked for. */
        conn_daemon_stat(c, MB_STAT_PGSCAN, pages);
        if (conn_send(c, &msg) < 0)
                conn_fail(c, false, 0, ENOMEM, "cannot queue a Reclaim");
}

void conn_drain_request(struct conn *c, uint32_t seq) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Drain d = MB__DRAIN__INIT;

        if (c->state != CONN_READY)
                return;
        d.seq = seq;
        msg.body_case = MB__MSG__BODY_DRAIN;
        msg.drain = &d;
        if (conn_send(c, &msg) < 0)
                conn_fail(c, false, 0, ENOMEM, "cannot queue a Drain");
}

void conn_send_event(struct conn *c, const char *event, uint64_t count, const char *tenant) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Event e = MB__EVENT__INIT;

        /* Events are advisory: a client that does not read gets none. */
        if (c->state != CONN_READY ||
            evbuffer_get_length(bufferevent_get_output(c->bev)) > RECLAIM_EVENT_OUTPUT_MAX_BYTES)
                return;
        e.event = (char *) event;
        e.count = count;
        e.tenant = (char *) tenant;
        msg.body_case = MB__MSG__BODY_EVENT;
        msg.event = &e;
        (void) conn_send(c, &msg);
}

/* OOMPolicy=kill: the process that opened the session, through the pidfd
 * the reclaimer's handle keeps, never a pid another process may have now. */
static int conn_rc_kill(struct reclaim_client *rc) {
        return conn_kill_pidfd(rc->pidfd, SIGKILL);
}

/* How the reclaimer and the event relay reach the connections. */
const struct reclaim_client_ops conn_reclaim_client_ops = {
        .reclaim_request = conn_reclaim_request,
        .drain_request = conn_drain_request,
        .charge_resume = conn_charge_resume,
        .charge_grant_later = conn_charge_grant_later,
        .send_event = conn_send_event,
        .kill = conn_rc_kill,
};

/* ---- Uncharge ---- */

static int extent_cmp(const void *a, const void *b) {
        const struct arena_extent *x = a, *y = b;

        return x->start < y->start ? -1 : x->start > y->start;
}

static bool extents_sorted(const struct arena_extent *e, size_t n) {
        for (size_t i = 1; i < n; i++)
                if (e[i].start < e[i - 1].start)
                        return false;
        return true;
}

void conn_uncharge(struct conn *c, const Mb__Uncharge *u) {
        struct worker *w = c->w;
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Ack ack = MB__ACK__INIT;
        uint64_t bad = 0, released = 0;
        int r;

        if (u->n_extents > WORKER_MAX_UNCHARGE_EXTENTS)
                return conn_fail(c, true, u->seq, EINVAL, "too many extents");
        if (u->has_outside_pages && u->outside_pages > c->outside)
                return conn_fail(c, true, u->seq, EINVAL,
                                 "uncharge of %" PRIu64 " pages outside the arena, but %" PRIu64 " are charged",
                                 u->outside_pages, c->outside);
        for (size_t i = 0; i < u->n_extents; i++) {
                if (u->extents[i]->count == 0)
                        return conn_fail(c, true, u->seq, EINVAL, "extent at page %" PRIu64 " of 0 pages",
                                         u->extents[i]->start);
                w->extents[i].start = u->extents[i]->start;
                w->extents[i].count = u->extents[i]->count;
        }

        /* Check every page before changing anything. */
        if (!arena_check_owned(c->arena, c->owner, w->extents, u->n_extents, &bad))
                return conn_fail(c, true, u->seq, EINVAL, "page %" PRIu64 " is not held by this client", bad);

        /* One hole punch per run of pages: put the extents in order first
         * (libmembroker sends them sorted and coalesced already). */
        if (!extents_sorted(w->extents, u->n_extents))
                qsort(w->extents, u->n_extents, sizeof(*w->extents), extent_cmp);

        conn_daemon_stat(c, MB_STAT_UNCHARGE_REQUESTS, 1);
        if (u->n_extents > 0) {
                /* Uncharged and no longer this client's at once; the punch
                 * (and the shrink after it) runs once the Ack is written,
                 * coalesced with the other returns of this loop turn.  The
                 * pages stay marked used until then: nobody gets them
                 * before they are zero.  Past the cap on pages waiting for
                 * their punch (one slack per arena: the bound on its
                 * backing), this worker's pending punches run first, and
                 * if that is not enough these pages are punched now. */
                r = arena_release_begin(c->arena, w->extents, u->n_extents, &released);
                if (r < 0 && w->npunch > 0) {
                        worker_flush_punch(w);
                        r = arena_release_begin(c->arena, w->extents, u->n_extents, &released);
                }
                if (r < 0)
                        released = arena_release(c->arena, c->owner, w->extents, u->n_extents);
                else
                        worker_defer_punch(w, c->arena, w->extents, u->n_extents);
                c->held -= released;
                reclaim_client_set_held(c->rc, c->held);
                page_counter_uncharge(&c->tenant->memory, released);
        }

        if (u->has_outside_pages && u->outside_pages > 0) {
                /* Its mapping is gone: uncharged at once (no punch). */
                c->outside -= u->outside_pages;
                reclaim_client_set_outside(c->rc, c->outside);
                conn_daemon_stat(c, MB_STAT_ANON_MMAP, -(int64_t) u->outside_pages);
                page_counter_uncharge(&c->tenant->memory, u->outside_pages);
        }

        /* The answer to a Reclaim (pgsteal: pages got back) or a Drain.
         * "Nothing left" only spares the client later rounds of the job
         * that asked: a client that says so falsely keeps its pages
         * charged to itself, and cannot make anyone else skipped. */
        if (u->has_reply_to && u->reason != MB__UNCHARGE_REASON__UNCHARGE_FREE) {
                if (u->reason == MB__UNCHARGE_REASON__UNCHARGE_RECLAIM)
                        conn_daemon_stat(c, MB_STAT_PGSTEAL, (int64_t) released);
                reclaim_answered(c->rc, u->reply_to, released, u->has_nothing_left && u->nothing_left);
        }

        ack.seq = u->seq;
        ack.pages = released + (u->has_outside_pages ? u->outside_pages : 0);
        msg.body_case = MB__MSG__BODY_ACK;
        msg.ack = &ack;
        if (conn_send(c, &msg) < 0)
                conn_fail(c, true, u->seq, ENOMEM, "cannot queue the Ack");
}

