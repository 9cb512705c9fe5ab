/* SPDX-License-Identifier: MIT */
/*
 * conn.h - one client connection (protocol state machine, design.md §5).
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
 * uncharged.  A connection must send its Hello, and finish any frame it
 * starts, within FrameTimeoutSec=.
 */
#pragma once

struct worker;
struct manager;
struct tenant;
struct conn;

/* Take over the accepted socket @fd (closed on failure). */
int conn_new(struct worker *w, int fd);

/* The charge batch a client of @t is told: ChargeBatch= (the tenant's, an
 * ancestor's or the broker's), 4 x while nothing is limited up the tree and
 * the root is far from its capacity (seed 003).  @current: what the client
 * was last told (hysteresis), 0 for a new client.  Any thread, no lock. */
unsigned conn_charge_batch(const struct manager *m, const struct tenant *t, unsigned current);
/* Disconnect and free everything the client held. */
void conn_free(struct conn *c);

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
