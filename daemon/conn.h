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
 * Freeing it (disconnect, crash, bad input, shutdown) returns every page the
 * client held: hole-punched, given back to the arena, uncharged.
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
