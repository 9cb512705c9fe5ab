/* SPDX-License-Identifier: MIT */
/*
 * slab-fake-client.h - a stand-in for libmembroker's client, so that
 * client/slab/slab.h can be unit-tested without a daemon: pages come from a
 * private anonymous mapping, stats go to plain counters, the CPU slot can be
 * forced per thread (to make remote frees happen on purpose), and the
 * registered shrinkers can be called directly.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include "membroker.h"
#include "mb_stats_abi.h"

/* A fake client with an arena of @npages pages of @page_size bytes and
 * @ncpus CPU slots.  Aborts on failure. */
mb_client *fake_client_new(size_t npages, size_t page_size, unsigned ncpus);
void fake_client_free(mb_client *c);

/* Pages handed out and not freed. */
size_t fake_client_pages_in_use(mb_client *c);
/* Refuse allocations beyond @max pages in use (ENOMEM). */
void fake_client_set_page_limit(mb_client *c, size_t max);
/* Sum of the deltas written with mb_client_stat_add() for @item. */
int64_t fake_client_stat(mb_client *c, enum mb_stat_item item);

/* Force the calling thread's CPU slot (-1: the real CPU, folded). */
void fake_client_set_cpu(int cpu);

/* Registered shrinkers: how many, and the @i-th one. */
size_t fake_client_nshrinkers(mb_client *c);
const struct mb_shrinker *fake_client_shrinker(mb_client *c, size_t i);
