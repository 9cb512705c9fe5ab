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
struct conn;

/* Take over the accepted socket @fd (closed on failure). */
int conn_new(struct worker *w, int fd);
/* Disconnect and free everything the client held. */
void conn_free(struct conn *c);
