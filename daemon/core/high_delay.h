/* SPDX-License-Identifier: MIT */
/*
 * high_delay.h - the throttling penalty for charges above memory.high.
 *
 * Mirrors calculate_overage(), mem_find_max_overage(),
 * calculate_high_delay() and the decision in mem_cgroup_handle_over_high()
 * (mm/memcontrol.c): the penalty is quadratic in the largest relative
 * overage among the counter and its ancestors, scaled by
 * nr_pages / MEMCG_CHARGE_BATCH, capped at 2 s; a penalty of 10 ms or less
 * is not slept.
 *
 * The kernel computes in jiffies.  We compute the same integers with
 * HIGH_DELAY_HZ = 1000, so one jiffy is one millisecond and the table in the
 * kernel's comment holds exactly (high = 100M, 64 pages of 4K charged):
 *
 *      usage  101M  102M  105M  110M  115M  117M  >=118M
 *      ms        6    25   159   639  1439  1849    2000
 *
 * and expose the result in microseconds.
 *
 * The caller (the broker's try_charge path) counts the pages charged while
 * any level was over its high (current->memcg_nr_pages_over_high), then,
 * after reclaiming the overage, asks high_delay_throttle_usec() how long the
 * charging client must wait before it gets more memory.
 */
#pragma once

#include <stdint.h>
#include "page_counter.h"

#define MEMCG_CHARGE_BATCH 64U
#define HIGH_DELAY_HZ 1000U
/* MEMCG_MAX_HIGH_DELAY_JIFFIES: 2 s. */
#define HIGH_DELAY_MAX_JIFFIES (2ULL * HIGH_DELAY_HZ)
#define HIGH_DELAY_MAX_USEC (2ULL * 1000 * 1000)
/* mem_cgroup_handle_over_high() does not sleep for HZ / 100 or less. */
#define HIGH_DELAY_MIN_SLEEP_JIFFIES (HIGH_DELAY_HZ / 100)
#define HIGH_DELAY_MIN_SLEEP_USEC (10ULL * 1000)
/* Fixed-point bits of the overage, and the scaling of its square. */
#define MEMCG_DELAY_PRECISION_SHIFT 20
#define MEMCG_DELAY_SCALING_SHIFT 14

/**
 * high_delay_overage - calculate_overage(): how far @usage is above @high,
 * as a fraction of @high in 20-bit fixed point ((usage - high) << 20 / high);
 * 0 when not over.  A @high of 0 acts as 1 page.  Saturates at UINT64_MAX
 * where the kernel's shift would overflow (more than 2^44 pages over).
 */
uint64_t high_delay_overage(unsigned long usage, unsigned long high);

/**
 * high_delay_max_overage - mem_find_max_overage(): the largest overage
 * among @counter and all its ancestors.  The kernel stops below the root
 * memory cgroup, which has no memory.high; a broker's root tenant may have
 * one, so it is included.  Relaxed reads: concurrent charges may change the
 * answer, which only shifts the penalty.
 */
uint64_t high_delay_max_overage(const struct page_counter *counter);

/**
 * high_delay_calculate_jiffies - calculate_high_delay() before the cap: the
 * penalty in jiffies (ms at HIGH_DELAY_HZ) for @nr_pages charged at
 * @max_overage, i.e.
 *      ((max_overage^2 * HZ) >> 20 >> 14) * nr_pages / MEMCG_CHARGE_BATCH.
 * 0 when @max_overage is 0.  Saturates at UINT64_MAX where the kernel's
 * unsigned long arithmetic would wrap (overage above ~130 times high); any
 * such value is far above the 2 s cap.
 */
uint64_t high_delay_calculate_jiffies(uint64_t max_overage, unsigned int nr_pages);

/**
 * high_delay_usec - the penalty in usec for @nr_pages charged with the
 * largest overage among @counter and its ancestors, capped at
 * HIGH_DELAY_MAX_USEC (the kernel caps in mem_cgroup_handle_over_high(),
 * after adding the swap penalty; the broker has no swap).  0 when no level
 * is over its high.
 */
uint64_t high_delay_usec(const struct page_counter *counter, unsigned int nr_pages);

/**
 * high_delay_throttle_usec - mem_cgroup_handle_over_high(): the delay to
 * actually apply: high_delay_usec(), or 0 when the penalty is 10 ms
 * (HZ / 100 jiffies) or less, to be nice to those who go only a little over
 * their high and maybe have not been reclaimed hard enough yet.
 */
uint64_t high_delay_throttle_usec(const struct page_counter *counter, unsigned int nr_pages);
