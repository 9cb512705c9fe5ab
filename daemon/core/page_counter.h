/* SPDX-License-Identifier: MIT */
/*
 * page_counter.h - hierarchical, lock-free page counters.
 *
 * Mirrors the kernel's mm/page_counter.c (struct page_counter,
 * page_counter_try_charge(), page_counter_uncharge(), ...).  All counts are in
 * broker pages.  A counter charges itself and every ancestor; a charge fails
 * at the first ancestor whose usage would pass its `max`.
 *
 * Layout (seed 000, "mm: page_counter: rearrange struct page_counter fields"):
 * `usage` is written by every charge on every CPU, while `max`, `high`, `low`,
 * `min` and `parent` are read on every charge but written rarely.  Keeping
 * them on one cache line makes every charge invalidate the line the limit
 * readers need (false sharing).  The default layout puts `usage` (and the
 * other charge-time writes) on its own cache line; configure the build with
 * -DPAGE_COUNTER_UNPADDED to get the packed layout the benchmark compares.
 */
#pragma once

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define PAGE_COUNTER_MAX (LONG_MAX / 4096L) /* like the kernel: LONG_MAX / PAGE_SIZE */

#ifdef PAGE_COUNTER_UNPADDED
#  define PAGE_COUNTER_PADDING(name)
#  define PAGE_COUNTER_ALIGN
#else
#  define PAGE_COUNTER_PADDING(name) char name[0] __attribute__((aligned(64)));
#  define PAGE_COUNTER_ALIGN __attribute__((aligned(64)))
#endif

struct page_counter {
        /* Hot: written by every charge and uncharge. */
        _Atomic long usage;
        PAGE_COUNTER_PADDING(_pad1_)

        /* Effective memory.min / memory.low and the usage they protect. */
        _Atomic unsigned long emin;
        _Atomic long min_usage;
        _Atomic long children_min_usage;
        _Atomic unsigned long elow;
        _Atomic long low_usage;
        _Atomic long children_low_usage;

        _Atomic unsigned long watermark; /* peak usage (memory.peak) */
        _Atomic unsigned long failcnt;   /* charges refused at this level */
        _Atomic unsigned long underflows; /* uncharges that would go below 0 */

        /* Read-mostly: kept away from `usage` (seed 000). */
        PAGE_COUNTER_PADDING(_pad2_)
        bool protection_support;
        _Atomic unsigned long min;
        _Atomic unsigned long low;
        _Atomic unsigned long high;
        _Atomic unsigned long max;
        struct page_counter *parent;
} PAGE_COUNTER_ALIGN;

/**
 * page_counter_init - initialise a counter: usage 0, no limits (max/high at
 * PAGE_COUNTER_MAX), no protection.  @parent may be NULL for the root.
 * @protection_support enables min/low usage propagation (the kernel enables
 * it only for the memory counter; we enable it for every tenant).
 */
void page_counter_init(struct page_counter *counter, struct page_counter *parent,
                       bool protection_support);

static inline unsigned long page_counter_read(const struct page_counter *counter) {
        long v = atomic_load_explicit(&((struct page_counter *) counter)->usage, memory_order_relaxed);
        return v > 0 ? (unsigned long) v : 0;
}

/**
 * page_counter_charge - charge @nr_pages to @counter and its ancestors
 * unconditionally (the kernel's page_counter_charge(), used for forced
 * charges).  Updates the watermarks.
 */
void page_counter_charge(struct page_counter *counter, unsigned long nr_pages);

/**
 * page_counter_try_charge - try to charge @nr_pages hierarchically.
 * Mirrors page_counter_try_charge(): the charge is applied level by level
 * with an atomic add; when a level would pass its `max`, that level is
 * backed out, its failcnt is bumped, every level already charged below it is
 * uncharged again, and the failing level is returned in *@fail.
 * Tolerated race (as in the kernel): two concurrent chargers may both see
 * room and then both back out; neither ever leaves usage above max.
 * Returns true on success (nothing is left partially charged on failure).
 */
bool page_counter_try_charge(struct page_counter *counter, unsigned long nr_pages,
                             struct page_counter **fail);

/**
 * page_counter_uncharge - uncharge @nr_pages from @counter and its ancestors.
 * Mirrors page_counter_uncharge()/page_counter_cancel(): a level that would
 * go below zero is clamped to 0 and its `underflows` counter is bumped.
 * Returns false when an underflow was detected at any level.
 */
bool page_counter_uncharge(struct page_counter *counter, unsigned long nr_pages);

/**
 * page_counter_set_max - set the hard limit.  Mirrors page_counter_set_max():
 * returns -EBUSY when current usage already exceeds @nr_pages (the caller
 * reclaims and retries), -EINVAL when @nr_pages > PAGE_COUNTER_MAX
 * (use PAGE_COUNTER_MAX for "max"), 0 on success.
 */
int page_counter_set_max(struct page_counter *counter, unsigned long nr_pages);

/**
 * page_counter_force_max - set the hard limit even below current usage, the
 * way memory_max_write() does (xchg, then reclaim the excess).  The next
 * charge sees the new limit.  -EINVAL when out of range.
 */
int page_counter_force_max(struct page_counter *counter, unsigned long nr_pages);

/* Setters for high, min, low; -EINVAL when > PAGE_COUNTER_MAX.  set_min and
 * set_low re-propagate protected usage (propagate_protected_usage()). */
int page_counter_set_high(struct page_counter *counter, unsigned long nr_pages);
int page_counter_set_min(struct page_counter *counter, unsigned long nr_pages);
int page_counter_set_low(struct page_counter *counter, unsigned long nr_pages);

/* memory.peak reset: watermark = current usage. */
void page_counter_reset_watermark(struct page_counter *counter);

/* Convenience readers (relaxed). */
static inline unsigned long page_counter_get_max(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->max, memory_order_relaxed);
}
static inline unsigned long page_counter_get_high(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->high, memory_order_relaxed);
}
static inline unsigned long page_counter_get_low(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->low, memory_order_relaxed);
}
static inline unsigned long page_counter_get_min(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->min, memory_order_relaxed);
}
