/* SPDX-License-Identifier: MIT */
/*
 * high_delay.h - the throttling penalty for charges above memory.high.
 *
 * Mirrors calculate_overage(), calculate_high_delay() and the decision in
 * mem_cgroup_handle_over_high() (mm/memcontrol.c): the penalty is quadratic
 * in the largest relative overage among the counter and its ancestors,
 * scaled by nr_pages / MEMCG_CHARGE_BATCH, capped at MEMCG_MAX_HIGH_DELAY
 * (2 s); a penalty of 10 ms or less is not slept (returns 0 from
 * high_delay_throttle_usec()).  The kernel computes in jiffies with HZ=1000
 * semantics for the table in the tests; we compute the same numbers in usec.
 */
#pragma once

#include <stdint.h>
#include "page_counter.h"

#define MEMCG_CHARGE_BATCH 64U
#define HIGH_DELAY_MAX_USEC (2ULL * 1000 * 1000)
#define HIGH_DELAY_MIN_SLEEP_USEC (10ULL * 1000)

/* calculate_overage(): (usage - high) << 20 / high, 0 when not over. */
uint64_t high_delay_overage(unsigned long usage, unsigned long high);

/* calculate_high_delay(): penalty in usec for @nr_pages charged with the
 * largest overage among @counter and its ancestors.  0 when none is over. */
uint64_t high_delay_usec(const struct page_counter *counter, unsigned int nr_pages);

/* mem_cgroup_handle_over_high(): the delay to actually apply: the penalty,
 * or 0 when it is <= 10 ms. */
uint64_t high_delay_throttle_usec(const struct page_counter *counter, unsigned int nr_pages);
