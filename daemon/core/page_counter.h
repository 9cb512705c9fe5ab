/* SPDX-License-Identifier: MIT */
/*
 * page_counter.h - hierarchical, lock-free page counters.
 *
 * Mirrors the kernel's mm/page_counter.c and include/linux/page_counter.h
 * (struct page_counter, page_counter_try_charge(), page_counter_uncharge(),
 * page_counter_set_max(), propagate_protected_usage(), ...).  All counts are
 * in broker pages.  A counter charges itself and every ancestor; a charge
 * fails at the first ancestor whose usage would pass its `max`.
 *
 * Concurrency: charging, uncharging and every reader are lock-free and safe
 * from any number of threads.  The setters (set_max, set_high, set_min,
 * set_low, force_max, reset_watermark) must be serialised per counter by the
 * caller, like the kernel's cgroup file writes are; they may race freely with
 * charges.  The tolerated races are named at each function.
 *
 * Layout (the kernel's "mm: page_counter: rearrange struct page_counter fields",
 * Linux 6.1): `usage` is written by every charge on every CPU, while `max`,
 * `high`, `low`, `min` and `parent` are read on every charge but written
 * rarely.  Sharing one cache line makes every charge invalidate the line the
 * limit readers need (false sharing; +18% netperf throughput in the seed).
 * The default layout therefore has three cache lines:
 *
 *   line 0  usage, failcnt, underflows     written by every charge (failcnt
 *                                          and underflows only on paths that
 *                                          already write usage)
 *   line 1  emin/elow, *_min_usage,        written by protection propagation,
 *           *_low_usage, watermark         reclaim and new peaks
 *   line 2  protection_support, min, low,  read-mostly: read by every charge,
 *           high, max, parent              written by the setters
 *
 * Building with -DPAGE_COUNTER_UNPADDED selects the layout before that
 * commit (Linux 5.19, `usage` next to `max`), so that the benchmark can
 * compare the two.  Both layouts are aligned to a cache line, so the only
 * difference between them is where the fields sit.  Code that includes this
 * header must be built with the same setting as page_counter.c it links
 * (libmbcore.la: padded; libmbcore-unpadded.la: unpadded).
 *
 * Because the struct is cache-line aligned, a struct page_counter (or a
 * struct embedding one) allocated on the heap must come from aligned_alloc()
 * or posix_memalign() with PAGE_COUNTER_ALIGN_BYTES; malloc() only promises
 * 16 bytes, and UBSan reports the misaligned accesses.
 */
#pragma once

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Like the kernel on 64-bit: LONG_MAX / PAGE_SIZE, so that a byte count of
 * any counter value fits a long. */
#define PAGE_COUNTER_MAX (LONG_MAX / 4096L)

#define PAGE_COUNTER_ALIGN_BYTES 64
#define PAGE_COUNTER_ALIGN __attribute__((aligned(PAGE_COUNTER_ALIGN_BYTES)))
/* The kernel's CACHELINE_PADDING(): start the next field on a new line. */
#define PAGE_COUNTER_PADDING(name) char name[0] PAGE_COUNTER_ALIGN;

#ifndef PAGE_COUNTER_UNPADDED

struct page_counter {
        /* Hot: written by every charge and uncharge on every thread. */
        _Atomic long usage;
        _Atomic unsigned long failcnt;    /* charges refused at this level */
        _Atomic unsigned long underflows; /* uncharges that went below 0 */
        PAGE_COUNTER_PADDING(_pad1_)

        /* Effective memory.min and the usage it protects. */
        _Atomic unsigned long emin;
        _Atomic long min_usage;
        _Atomic long children_min_usage;

        /* Effective memory.low and the usage it protects. */
        _Atomic unsigned long elow;
        _Atomic long low_usage;
        _Atomic long children_low_usage;

        _Atomic unsigned long watermark; /* peak usage (memory.peak) */

        /* Read-mostly: kept away from `usage` (the kernel's page_counter field layout). */
        PAGE_COUNTER_PADDING(_pad2_)
        bool protection_support;
        _Atomic unsigned long min;
        _Atomic unsigned long low;
        _Atomic unsigned long high;       /* min(high_setting, high_auto): what charges obey */
        _Atomic unsigned long max;
        struct page_counter *parent;
        _Atomic unsigned long high_setting; /* memory.high as written */
        _Atomic unsigned long high_auto;    /* the right-sizing limit (daemon/core/rightsize.h) */
} PAGE_COUNTER_ALIGN;

#else /* PAGE_COUNTER_UNPADDED */

/* The Linux 5.19 layout: `usage` shares its cache line with the limits. */
struct page_counter {
        _Atomic long usage;
        _Atomic unsigned long min;
        _Atomic unsigned long low;
        _Atomic unsigned long high;
        _Atomic unsigned long max;

        _Atomic unsigned long emin;
        _Atomic long min_usage;
        _Atomic long children_min_usage;

        _Atomic unsigned long elow;
        _Atomic long low_usage;
        _Atomic long children_low_usage;

        _Atomic unsigned long watermark;
        _Atomic unsigned long failcnt;
        _Atomic unsigned long underflows;

        bool protection_support;
        /* 'parent' is placed here to be far from 'usage' (Linux 5.19). */
        struct page_counter *parent;
        _Atomic unsigned long high_setting;
        _Atomic unsigned long high_auto;
} PAGE_COUNTER_ALIGN;

#endif /* PAGE_COUNTER_UNPADDED */

/**
 * page_counter_init - initialise a counter: usage 0, no limits (max and high
 * at PAGE_COUNTER_MAX, as a new memory cgroup), no protection, watermark,
 * failcnt and underflows 0.  @parent may be NULL for the root.
 * @protection_support enables min_usage/low_usage propagation into the
 * parent's children_{min,low}_usage on every charge (the kernel enables it
 * for the memory counter only; the broker enables it for every tenant).
 * Must not race with any other use of @counter.
 */
void page_counter_init(struct page_counter *counter, struct page_counter *parent,
                       bool protection_support);

/**
 * page_counter_read - the current usage in pages.  A relaxed read: it may be
 * transiently up to (concurrent chargers × their nr_pages) above the
 * committed usage, because page_counter_try_charge() charges speculatively,
 * and never reports a negative value.
 */
static inline unsigned long page_counter_read(const struct page_counter *counter) {
        long v = atomic_load_explicit(&((struct page_counter *) counter)->usage, memory_order_relaxed);
        return v > 0 ? (unsigned long) v : 0;
}

/**
 * page_counter_headroom - the pages @counter and every ancestor may still be
 * charged before the nearest `high` or `max` on the path (0 when some level
 * is at or over one), ULONG_MAX when no level has a limit.  A relaxed read
 * (page_counter_read()): a hint for a client charging ahead of need, not a
 * promise; the charge itself still checks every `max`.
 */
unsigned long page_counter_headroom(const struct page_counter *counter);

/**
 * page_counter_charge - charge @nr_pages to @counter and its ancestors
 * unconditionally, ignoring every max (the kernel's page_counter_charge(),
 * used for charges that must not fail).  Updates the watermarks and
 * protected usage.  @nr_pages must not exceed PAGE_COUNTER_MAX.
 */
void page_counter_charge(struct page_counter *counter, unsigned long nr_pages);

/**
 * page_counter_try_charge - try to charge @nr_pages hierarchically.
 * Mirrors page_counter_try_charge(): the charge is applied level by level,
 * from @counter up to the root, with one atomic add each.  When a level's
 * new usage would pass its `max`, that level is backed out, its failcnt is
 * bumped, every level already charged below it is uncharged again, and the
 * failing level is stored in *@fail (@fail may be NULL when the caller does
 * not care).  On failure nothing stays charged anywhere.
 *
 * Tolerated races (as in the kernel):
 *  - the add is speculative: a racing reader of page_counter_read() may see
 *    usage above max for the moment between the add and the back-out; a
 *    committed charge never takes usage above max;
 *  - two chargers that together pass max may both fail and back out although
 *    one of them alone would have fitted; the error is bounded by the
 *    charges' sizes and the loser goes to reclaim a little early;
 *  - the watermark of the levels below the failing one may already record
 *    the speculative usage, as in the kernel.
 *
 * Returns true on success, false when a limit was hit.
 */
bool page_counter_try_charge(struct page_counter *counter, unsigned long nr_pages,
                             struct page_counter **fail);

/**
 * page_counter_cancel - take @nr_pages out of @counter alone (not its
 * ancestors), as the kernel's page_counter_cancel().  A counter that would
 * go below zero is clamped to 0 and its `underflows` counter is bumped (the
 * kernel WARNs once); returns false in that case, true otherwise.
 */
bool page_counter_cancel(struct page_counter *counter, unsigned long nr_pages);

/**
 * page_counter_uncharge - uncharge @nr_pages from @counter and its ancestors.
 * Mirrors page_counter_uncharge(): page_counter_cancel() at every level;
 * every level is uncharged even when a lower one underflowed.  Returns
 * false when an underflow was detected at any level (a caller bug: more
 * uncharged than charged), true otherwise.
 */
bool page_counter_uncharge(struct page_counter *counter, unsigned long nr_pages);

/**
 * page_counter_set_max - set the hard limit.  Mirrors page_counter_set_max():
 * returns -EBUSY when the current usage already exceeds @nr_pages (the
 * caller reclaims and retries, like memory.max writes on cgroup v1),
 * -EINVAL when @nr_pages > PAGE_COUNTER_MAX (use PAGE_COUNTER_MAX for
 * "max"), 0 on success.  Racing chargers either see the new limit or make
 * the setter retry, so once 0 is returned no charge commits usage above
 * @nr_pages.  Callers serialise setters on the same counter.
 */
int page_counter_set_max(struct page_counter *counter, unsigned long nr_pages);

/**
 * page_counter_force_max - set the hard limit even below current usage, the
 * way cgroup v2's memory_max_write() does (xchg, then the caller reclaims the
 * excess).  Every charge that starts afterwards sees the new limit; usage
 * already above it stays until uncharged.  -EINVAL when @nr_pages >
 * PAGE_COUNTER_MAX, else 0.  Callers serialise setters on the same counter.
 */
int page_counter_force_max(struct page_counter *counter, unsigned long nr_pages);

/**
 * page_counter_set_high - set memory.high (page_counter_set_high()).
 * page_counter_set_min, page_counter_set_low - set memory.min / memory.low
 * and re-propagate the protected usage of @counter and its ancestors into
 * their parents (page_counter_set_min()/page_counter_set_low()).  Setting
 * min or low makes sense on counters initialised with protection_support.
 * All return -EINVAL when @nr_pages > PAGE_COUNTER_MAX, else 0.  Callers
 * serialise setters on the same counter.
 */
int page_counter_set_high(struct page_counter *counter, unsigned long nr_pages);
/**
 * page_counter_set_high_auto - the right-sizing limit of MemoryPressureTarget=
 * (senpai writes memory.high; the broker keeps the setting apart from it):
 * the high that charges, reclaim and the throttle obey is the lower of
 * memory.high as written and this (PAGE_COUNTER_MAX: none).  -EINVAL when
 * @nr_pages > PAGE_COUNTER_MAX, else 0.  Callers serialise setters.
 */
int page_counter_set_high_auto(struct page_counter *counter, unsigned long nr_pages);
int page_counter_set_min(struct page_counter *counter, unsigned long nr_pages);
int page_counter_set_low(struct page_counter *counter, unsigned long nr_pages);

/**
 * page_counter_reset_watermark - memory.peak reset: watermark = current
 * usage (page_counter_reset_watermark()).  A charge racing with the reset
 * may raise the watermark again at once, which is correct.
 */
void page_counter_reset_watermark(struct page_counter *counter);

/* Convenience readers (relaxed: values may be stale by the time they are
 * used, as the kernel's READ_ONCE() readers). */
static inline unsigned long page_counter_get_max(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->max, memory_order_relaxed);
}
static inline unsigned long page_counter_get_high(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->high, memory_order_relaxed);
}
/* memory.high as written (page_counter_get_high() is the one obeyed). */
static inline unsigned long page_counter_get_high_setting(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->high_setting, memory_order_relaxed);
}
static inline unsigned long page_counter_get_high_auto(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->high_auto, memory_order_relaxed);
}
static inline unsigned long page_counter_get_low(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->low, memory_order_relaxed);
}
static inline unsigned long page_counter_get_min(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->min, memory_order_relaxed);
}
static inline unsigned long page_counter_get_watermark(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->watermark, memory_order_relaxed);
}
static inline unsigned long page_counter_get_failcnt(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->failcnt, memory_order_relaxed);
}
static inline unsigned long page_counter_get_underflows(const struct page_counter *c) {
        return atomic_load_explicit(&((struct page_counter *) c)->underflows, memory_order_relaxed);
}
