/* SPDX-License-Identifier: MIT */
/*
 * mb_internal.h - what the client object offers the library's other
 * layers (not installed): implemented by client.c and stock.c, used by the
 * slab caches (slab.h) and by white-box tests, which may link a fake client
 * in its place (tests/slab-fake-client.c).  The client's own modules share
 * client.h instead.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "membroker.h"
#include "mb_stats_abi.h"

/* The CPU slot the caller runs on (rseq cpu_id, sched_getcpu() fallback),
 * always < mb_client_ncpus(). */
unsigned mb_client_cpu(const mb_client *c);
unsigned mb_client_ncpus(const mb_client *c);

/* Where a fast path may read mb_client_cpu() inline: the offset of rseq
 * cpu_id from the thread pointer (pcpu_rseq_cpu(); a value >= ncpus means
 * "call mb_client_cpu()"), or -1: always call mb_client_cpu(). */
ptrdiff_t mb_client_cpu_offset(const mb_client *c);

/* Add @delta to @item in the caller's CPU slot of the stats region; safe
 * against other threads of the process (takes the CPU's stock lock, so do
 * not call it with one held).  A no-op in a fork() child. */
void mb_client_stat_add(mb_client *c, enum mb_stat_item item, int64_t delta);

/* Return every page stocked on any CPU to the daemon now, as the answer to
 * the daemon's Drain does (drain_all_stock()), while the application may
 * run on every CPU.  Never waits for the daemon.  Returns the number of
 * pages returned, or a negative errno. */
long mb_client_drain_stocks(mb_client *c);

/* The longest mb_last_error() message, with its NUL (core/error.c). */
#define MB_ERROR_MESSAGE_BYTES 512

/* Set the thread's mb_last_error() message. */
void mb_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The client's mapping of its stats region (tests read slots through it). */
const struct mb_stats_region *mb_client_stats_region(const mb_client *c);

/* How many allocations of @c found the stock of their CPU empty (and went
 * to the daemon, or waited for a charge in flight): 0 under a churn that
 * charging ahead keeps up with. */
uint64_t mb_client_stock_misses(const mb_client *c);

/* How many of the daemon's Reclaim and Drain requests @c answered (tests
 * count the round trips one reclaim job cost a client). */
uint64_t mb_client_reclaim_requests(const mb_client *c);

/* Whether no stock of @c waits for a batch charged ahead: every batch the
 * library's thread was asked for (stock_refill_kick()) has been stocked or
 * given up.  Tests wait for it before a window that must see no stock
 * traffic of that thread. */
bool mb_client_refill_idle(const mb_client *c);
