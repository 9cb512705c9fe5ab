/* SPDX-License-Identifier: MIT */
/*
 * high_delay.c - the memory.high throttling penalty, as the kernel's
 * calculate_high_delay().
 *
 * The penalty should be lenient on small overages and increasingly harsh
 * when a tenant makes clear it has no intention of stopping, so it grows
 * with the square of the overage.  MEMCG_DELAY_PRECISION_SHIFT keeps
 * precision while turning the overage ratio into a delay;
 * MEMCG_DELAY_SCALING_SHIFT is simply the number that scales the square to a
 * reasonable number of jiffies: not much at first, then quickly more.
 */
#include "high_delay.h"

uint64_t high_delay_overage(unsigned long usage, unsigned long high) {
        uint64_t overage;

        if (usage <= high)
                return 0;

        /* Prevent division by 0: act as if it were a threshold of 1 page. */
        if (high < 1)
                high = 1;

        overage = usage - high;
        if (overage > (UINT64_MAX >> MEMCG_DELAY_PRECISION_SHIFT))
                return UINT64_MAX;
        overage <<= MEMCG_DELAY_PRECISION_SHIFT;
        return overage / high;
}

uint64_t high_delay_max_overage(const struct page_counter *counter) {
        uint64_t max_overage = 0;

        for (const struct page_counter *c = counter; c; c = c->parent) {
                uint64_t overage = high_delay_overage(page_counter_read(c), page_counter_get_high(c));

                if (overage > max_overage)
                        max_overage = overage;
        }
        return max_overage;
}

uint64_t high_delay_calculate_jiffies(uint64_t max_overage, unsigned int nr_pages) {
        uint64_t penalty_jiffies;

        if (!max_overage)
                return 0;

        if (__builtin_mul_overflow(max_overage, max_overage, &penalty_jiffies) ||
            __builtin_mul_overflow(penalty_jiffies, (uint64_t) HIGH_DELAY_HZ, &penalty_jiffies))
                return UINT64_MAX;
        penalty_jiffies >>= MEMCG_DELAY_PRECISION_SHIFT;
        penalty_jiffies >>= MEMCG_DELAY_SCALING_SHIFT;

        /*
         * Factor in the charger's own contribution to the overage, such that
         * four N-sized charges are throttled about as much as one 4N-sized
         * charge.  MEMCG_CHARGE_BATCH pages is nominal.
         */
        if (__builtin_mul_overflow(penalty_jiffies, (uint64_t) nr_pages, &penalty_jiffies))
                return UINT64_MAX;
        return penalty_jiffies / MEMCG_CHARGE_BATCH;
}

static uint64_t capped_jiffies(const struct page_counter *counter, unsigned int nr_pages) {
        uint64_t penalty_jiffies;

        penalty_jiffies = high_delay_calculate_jiffies(high_delay_max_overage(counter), nr_pages);

        /*
         * Clamp the delay per charge so as to keep the client moving forward
         * and permit diagnostics, albeit extremely slowly.
         */
        return penalty_jiffies < HIGH_DELAY_MAX_JIFFIES ? penalty_jiffies : HIGH_DELAY_MAX_JIFFIES;
}

static uint64_t jiffies_to_usec(uint64_t j) {
        return j * (1000000U / HIGH_DELAY_HZ);
}

uint64_t high_delay_usec(const struct page_counter *counter, unsigned int nr_pages) {
        return jiffies_to_usec(capped_jiffies(counter, nr_pages));
}

uint64_t high_delay_throttle_usec(const struct page_counter *counter, unsigned int nr_pages) {
        uint64_t penalty_jiffies = capped_jiffies(counter, nr_pages);

        /*
         * Don't sleep if the amount owed is so low that it's not even worth
         * it (mem_cgroup_handle_over_high()).
         */
        if (penalty_jiffies <= HIGH_DELAY_MIN_SLEEP_JIFFIES)
                return 0;

        return jiffies_to_usec(penalty_jiffies);
}
