/* SPDX-License-Identifier: MIT */
/*
 * conn.h - one client connection (the protocol state machine of
 * docs/protocol.md).
 *
 *   HELLO  --Hello, admitted-->  READY  --Charge/Uncharge-->  READY
 *     |                            |
 *     +--- anything else --------->+--- bad input --> CLOSING (Error sent,
 *                                                      freed once flushed)
 *
 * A connection belongs to one worker and is only touched by its thread.
 * Freeing it (disconnect, crash, bad input, shutdown, or the exit of the
 * process that opened it, even while another process holds the socket)
 * returns every page the client held: hole-punched, given back to the arena,
 * uncharged -- except at a stop of the daemon, which keeps them for the next
 * daemon (the fd store) or leaves them to the client's mapping.  A connection must send its Hello, and finish any frame it
 * starts, within FrameTimeoutSec=.
 */
#pragma once

#include <sys/types.h>

#include <stdint.h>

struct broker;
struct worker;
struct tenant;
struct conn;

/* Take over the accepted socket @fd, admitted for @uid (guard_admit();
 * closed and released on failure).  The worker's thread. */
int conn_new(struct worker *w, int fd, uid_t uid);
/* Disconnect every connection of @w (conn_free() on each). */
void conn_free_all(struct worker *w);

/* The charge batch a client of @t is told: ChargeBatch= (the tenant's, an
 * ancestor's or the broker's), 4 x while nothing is limited up the tree and
 * the root is far from its capacity (no charge can meet a limit then).
 * @current: what the client was last told (hysteresis), 0 for a new client.
 * Any thread, no lock. */
unsigned conn_charge_batch(const struct broker *b, const struct tenant *t, unsigned current);
/* Disconnect and free everything the client held. */
void conn_free(struct conn *c);

/* ---- the reclaimer's side, on the connection's worker thread ---- */

/* Send Reclaim{seq, pages} (counts pgscan) / Drain{seq}. */
void conn_reclaim_request(struct conn *c, uint32_t seq, uint32_t pages);
void conn_drain_request(struct conn *c, uint32_t seq);
/* The parked charge @seq of @pages: @error 0 = the reclaimer charged it (go
 * on as a successful charge), else reply Error{@error, @reason}.  May end the
 * connection: the caller must not use @c afterwards. */
void conn_charge_resume(struct conn *c, uint32_t seq, uint32_t pages, int error, const char *reason);
/* The parked, charged, over-high charge @seq may be granted after
 * @delay_usec (the throttle).  May end the connection (see above). */
void conn_charge_grant_later(struct conn *c, uint32_t seq, uint64_t delay_usec);
/* Send Event{event, count, tenant} unless the client's output is backed up. */
void conn_send_event(struct conn *c, const char *event, uint64_t count, const char *tenant);

/* The connections as struct reclaim_client_ops (daemon/reclaim/reclaim.h) for the
 * reclaimer and the client event relay. */
extern const struct reclaim_client_ops conn_reclaim_client_ops;
/* The connections as struct worker_ops (daemon/service/worker.h), for the
 * workers. */
extern const struct worker_ops conn_worker_ops;

/**
 * conn_kill - send @sig to the process that opened @c, through the pidfd
 * taken when the connection was accepted (pidfd_send_signal()): never to a
 * pid that another process may have by now.  The worker thread of @c.
 * Returns 0 when sent or when the process has exited already (its session
 * then ends by itself, conn.c watches the pidfd); -EOPNOTSUPP on a kernel
 * without pidfds (nothing is sent); another negative errno otherwise.
 */
int conn_kill(struct conn *c, int sig);
/* The same from any thread, with the pidfd of a session (or a duplicate
 * of it, such as the reclaimer's handle keeps). */
int conn_kill_pidfd(int pidfd, int sig);
