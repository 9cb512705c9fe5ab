/* SPDX-License-Identifier: MIT */
/*
 * session.h - the request engine of a client (session.c): the reader role,
 * the threads waiting for replies, the calls to the daemon and the state of
 * the session (broken or not).  Lock order and fields: client.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/client.h"
#include "membroker.pb-c.h"

/*
 * What the session tells the parts above it.  The session (the wire, the
 * reader, the waiters, reconnection) knows nothing of stocks, slabs or
 * malloc: mb_connect() composes the client and registers these.
 */
struct session_hooks {
        /* The session broke (io_lock held): stop the fast paths, so that
         * every allocation comes to the session and hears why. */
        void (*broken_locked)(mb_client *c);
        /* The daemon's Reclaim and Drain requests wait in c->requests:
         * answer them (no lock held). */
        void (*run_requests)(mb_client *c);
        /* A stock asked for pages ahead (the library's thread, no lock
         * held). */
        void (*refill)(mb_client *c);
        /* A Grant moved the charge batch to @batch pages (conn_lock held). */
        int (*batch_changed_locked)(mb_client *c, uint32_t batch);
        /* The socket failed in a way a restarted daemon may cure: carry the
         * session over; 0 when it goes on, else the error to end it with. */
        int (*reconnect)(mb_client *c);
};

/* Free what the session owns of @c (the connection, the held pages'
 * record); the rest is client_free()'s. */
void session_done(mb_client *c);

/* Negative errno once the session is lost, else 0 (no lock needed). */
static inline int session_broken(const mb_client *c) {
        return __atomic_load_n(&c->session.broken, __ATOMIC_ACQUIRE);
}

/* "No library lock held" (the application's callbacks may call back into
 * the library), asserted in debug builds. */
#define session_assert_unlocked(c)                          \
        do {                                                \
                mb_assert_mutex_not_held(&(c)->session.conn_lock);  \
                mb_assert_mutex_not_held(&(c)->session.io_lock);    \
                mb_assert_mutex_not_held(&(c)->session.send_lock);  \
                mb_assert_mutex_not_held(&(c)->ev.lock);    \
        } while (0)

/**
 * session_lost - the error for a request on a session that is over: -ECHILD
 * in a fork() child, else the error that ended it, with mb_set_error()
 * saying why.  Takes io_lock.
 */
int session_lost(mb_client *c);

/**
 * session_break_locked - the session is over: remember @err and @reason
 * (the first time only), empty and disable the stocks, drop the queued
 * daemon requests, wake every waiter.  io_lock held.  Returns @err.
 */
int session_break_locked(mb_client *c, int err, const char *reason);

/* session_break_locked() with this thread's mb_last_error() as the reason;
 * takes io_lock. */
int session_break(mb_client *c, int err);

/* The end of the connection without an Error: the daemon went away (a
 * restart).  Can this session be carried over (reconnect.h)? */
bool session_can_reconnect(const mb_client *c, int err);

/* The next request sequence number. */
uint32_t session_next_seq(mb_client *c);

/**
 * session_pressure_trigger_locked - PressureTrigger{id, @trigger} (NULL:
 * remove trigger @id) and wait for its Ack.  conn_lock held.  Returns 0,
 * -EINVAL when the daemon refused it (the session goes on), or the error
 * that ended the session.
 */
int session_pressure_trigger_locked(mb_client *c, uint32_t id, const char *trigger);

/* After a reconnection: send the accepted triggers to the new daemon
 * without waiting (io_lock and send_lock held, c->conn the new one). */
void session_pressure_resend_locked(mb_client *c);

/* session_charge_locked() flag, beside the MB_ALLOC_* ones: the library's
 * thread charges ahead of need; no application thread waits for it, so the
 * Charge is not marked `waiting` (it is no memory stall). */
#define SESSION_CHARGE_AHEAD 0x80000000u

/**
 * session_charge_locked - Charge @n (<= MB_CHARGE_MAX_PAGES) pages, or only
 * @need (<= @n) of them when @n do not fit under a limit (Charge.need):
 * their addresses into @out, their number into *@ret_got.  Adopts a new
 * batch the Grant carries (stock_adopt_batch_locked()).  @flags:
 * MB_ALLOC_NORETRY goes in Charge.flags; without SESSION_CHARGE_AHEAD the
 * Charge says an application thread waits (Charge.waiting).  conn_lock held.
 * Returns 0, -ENOMEM at a limit (the session goes on), or the error that
 * ended the session.
 */
int session_charge_locked(mb_client *c, uint32_t n, uint32_t need, void **out, size_t *ret_got, unsigned flags);

/**
 * session_charge_contig_locked - Charge @n (1..MB_CONTIG_MAX_PAGES) pages
 * as one extent (Charge.contig_pages, as alloc_pages(order) takes its pages
 * at once): the address of the first into *@ret.  conn_lock held.
 * Returns 0, -ENOMEM at a limit or when the arena has no free run that long
 * (the session goes on), or the error that ended the session.
 */
int session_charge_contig_locked(mb_client *c, uint32_t n, unsigned flags, void **ret);

/**
 * session_charge_outside_locked - Charge @n (1..MB_OUTSIDE_MAX_PAGES) pages
 * of the application's own mapping (Charge.flags OUTSIDE: counted against
 * the limits, no arena pages granted).  Only when the daemon takes them
 * (c->outside_ok).  @flags: MB_ALLOC_NORETRY.  conn_lock held.  Returns 0,
 * -ENOMEM at a limit (the session goes on), or the error that ended the
 * session.
 */
int session_charge_outside_locked(mb_client *c, uint32_t n, unsigned flags);

/* Give back @n pages charged with session_charge_outside_locked()
 * (Uncharge.outside_pages), without waiting for the Ack.  Any thread.  0 or
 * the error that ended the session. */
int session_uncharge_outside(mb_client *c, uint64_t n);

/* Return one extent right away (Uncharge without waiting for the Ack: the
 * daemon hole-punches it).  Any thread.  0 or the error that ended the
 * session. */
int session_uncharge_extent(mb_client *c, uint64_t start, uint32_t count);

/* The same for @n (<= SESSION_UNCHARGE_EXTENTS_MAX) extents in one
 * Uncharge. */
#define SESSION_UNCHARGE_EXTENTS_MAX 64u
int session_uncharge_extents(mb_client *c, const uint64_t *starts, const uint32_t *counts, size_t n);

/**
 * session_uncharge - send Uncharge frames for @pages (sorted in place,
 * coalesced into extents, a bounded number of extents per frame).  With
 * @wait, wait for each Ack (conn_lock held: the application's slow paths);
 * without, the Acks are dropped when they arrive (any thread, never waits
 * for the daemon).  With @has_reply_to the last frame answers the daemon's
 * request @reply_to (always at least one frame then, possibly without
 * extents).  Returns 0 or a negative errno (the session is then broken,
 * except for -ENOMEM).
 */
int session_uncharge(mb_client *c, void **pages, size_t n, Mb__UnchargeReason reason, bool wait, bool has_reply_to,
                     uint32_t reply_to);

/**
 * session_answer - answer the daemon's request @reply_to with @pages, as
 * session_uncharge() without waiting; @nothing_left sets
 * Uncharge.nothing_left in the frame that answers (the client has no
 * shrinker and this answer emptied its stocks).  0 or a negative errno.
 */
int session_answer(mb_client *c, void **pages, size_t n, Mb__UnchargeReason reason, uint32_t reply_to,
                   bool nothing_left);

/* Call the event callback for queued events.  No library lock may be held. */
void session_dispatch_events(mb_client *c);

/* The library's thread (unless MB_CONNECT_NO_THREAD): reads the socket
 * whenever no other thread does, answers Reclaim and Drain, calls the event
 * callback, until c->closing.  pthread_create() start routine. */
void *session_thread(void *userdata);
