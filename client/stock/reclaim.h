/* SPDX-License-Identifier: MIT */
/*
 * reclaim.h - answers to the daemon's Reclaim and Drain requests and the
 * application's shrinkers (reclaim.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/client.h"

/**
 * reclaim_run_requests - answer the queued Reclaim and Drain requests of
 * @c, in order, until none is left or the session is lost.  io_lock not
 * held (conn_lock may be: direct reclaim of a thread waiting for a reply).
 */
void reclaim_run_requests(mb_client *c);

/* Whether the calling thread is answering a Reclaim of @c right now (its
 * shrinkers are running). */
bool reclaim_running(const mb_client *c);

/**
 * reclaim_collect - the shrinkers of the Reclaim this thread answers freed
 * @n pages that do not fit the stock: they join the answer (accounted as
 * freed by the application).  Only while reclaim_running(@c).  Returns 0,
 * or the result of sending them back on their own when out of memory.
 */
int reclaim_collect(mb_client *c, void **pages, size_t n);

/**
 * reclaim_collect_run - a shrinker of the Reclaim this thread answers freed
 * the contiguous run of @n pages at @first (mb_page_free_contig()): its
 * pages join the answer, so that they count as got back (pgsteal), as the
 * kernel credits the pages a shrinker freed to the reclaim that ran it
 * (reclaim_state->reclaimed).  Only while reclaim_running(@c); the caller
 * has checked the run.  Never waits for the daemon.  Returns 0, or
 * -ENOMEM (nothing done: the caller uncharges the run itself).
 */
int reclaim_collect_run(mb_client *c, void *first, size_t n);
