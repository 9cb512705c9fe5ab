/* SPDX-License-Identifier: MIT */
/*
 * page_counter.c - lock-free hierarchical page accounting and limiting.
 *
 * Mirrors the kernel's mm/page_counter.c.  Memory ordering: every field is a
 * C11 atomic.  Statistics (watermark, failcnt, underflows, protected usage)
 * use relaxed operations: their exactness comes from atomic read-modify-write,
 * not from ordering.  The one place where ordering matters is the handshake
 * between page_counter_try_charge() and page_counter_set_max(): the charger
 * writes usage then reads max, the setter writes max then reads usage (a
 * store-buffering pattern), so those four accesses are sequentially
 * consistent, like the kernel's fully ordered atomic_long_add_return() and
 * xchg().
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <string.h>

#include "page_counter.h"

#define relaxed memory_order_relaxed

static bool track_protection(const struct page_counter *c) {
        return c->protection_support;
}

/*
 * propagate_protected_usage - publish how much of @c's @usage its own
 * memory.min and memory.low protect, as a delta into the parent's
 * children_min_usage / children_low_usage (the sums effective_protection()
 * divides by).  Mirrors propagate_protected_usage().
 *
 * The xchg makes every delta count exactly once, so a parent's
 * children_*_usage always equals the sum of its children's *_usage once
 * the charges quiesce.  Tolerated race (as in the kernel): two concurrent
 * propagations for the same counter may publish in the opposite order of
 * their usage updates, leaving min_usage/low_usage reflecting the older
 * usage until the next charge, uncharge or set_min/set_low of @c.
 */
static void propagate_protected_usage(struct page_counter *c, unsigned long usage) {
        unsigned long protected, setting;
        long old_protected, delta;

        if (!c->parent)
                return;

        setting = atomic_load_explicit(&c->min, relaxed);
        protected = usage < setting ? usage : setting;
        old_protected = atomic_load_explicit(&c->min_usage, relaxed);
        if ((long) protected != old_protected) {
                old_protected = atomic_exchange_explicit(&c->min_usage, (long) protected, relaxed);
                delta = (long) protected - old_protected;
                if (delta)
                        atomic_fetch_add_explicit(&c->parent->children_min_usage, delta, relaxed);
        }

        setting = atomic_load_explicit(&c->low, relaxed);
        protected = usage < setting ? usage : setting;
        old_protected = atomic_load_explicit(&c->low_usage, relaxed);
        if ((long) protected != old_protected) {
                old_protected = atomic_exchange_explicit(&c->low_usage, (long) protected, relaxed);
                delta = (long) protected - old_protected;
                if (delta)
                        atomic_fetch_add_explicit(&c->parent->children_low_usage, delta, relaxed);
        }
}

/*
 * Record a new peak.  The kernel does "if (new > READ_ONCE(wm))
 * WRITE_ONCE(wm, new)" and accepts that a racing smaller store may win.  A
 * compare-and-swap loop keeps the watermark a true maximum of every usage a
 * successful charge produced, at the same cost on the common path (one
 * relaxed load that finds no new peak).
 */
static void update_watermark(struct page_counter *c, long new) {
        unsigned long wm = atomic_load_explicit(&c->watermark, relaxed);

        while ((unsigned long) new > wm)
                if (atomic_compare_exchange_weak_explicit(&c->watermark, &wm, (unsigned long) new,
                                                          relaxed, relaxed))
                        break;
}

void page_counter_init(struct page_counter *counter, struct page_counter *parent,
                       bool protection_support) {
        memset(counter, 0, sizeof(*counter));
        atomic_init(&counter->usage, 0);
        atomic_init(&counter->failcnt, 0);
        atomic_init(&counter->underflows, 0);
        atomic_init(&counter->emin, 0);
        atomic_init(&counter->min_usage, 0);
        atomic_init(&counter->children_min_usage, 0);
        atomic_init(&counter->elow, 0);
        atomic_init(&counter->low_usage, 0);
        atomic_init(&counter->children_low_usage, 0);
        atomic_init(&counter->watermark, 0);
        atomic_init(&counter->min, 0);
        atomic_init(&counter->low, 0);
        /* mem_cgroup_css_alloc() sets memory.high to "max" as well. */
        atomic_init(&counter->high, PAGE_COUNTER_MAX);
        atomic_init(&counter->high_setting, PAGE_COUNTER_MAX);
        atomic_init(&counter->high_auto, PAGE_COUNTER_MAX);
        atomic_init(&counter->max, PAGE_COUNTER_MAX);
        counter->protection_support = protection_support;
        counter->parent = parent;
}

bool page_counter_cancel(struct page_counter *counter, unsigned long nr_pages) {
        bool ok = true;
        long new;

        new = atomic_fetch_sub_explicit(&counter->usage, (long) nr_pages, relaxed) - (long) nr_pages;
        /* More uncharges than charges? */
        if (new < 0) {
                /*
                 * The kernel WARNs and stores 0, which would also wipe out a
                 * charge racing in between.  Adding back only our excess
                 * clamps our own contribution at 0 and keeps racing charges.
                 * Tolerated race: a charger running between the two atomics
                 * sees the too-low value and may commit up to -new pages
                 * above max; this only happens after a caller bug, which is
                 * reported through `underflows` and the return value.
                 */
                atomic_fetch_add_explicit(&counter->usage, -new, relaxed);
                atomic_fetch_add_explicit(&counter->underflows, 1, relaxed);
                new = 0;
                ok = false;
        }
        if (track_protection(counter))
                propagate_protected_usage(counter, (unsigned long) new);
        return ok;
}

unsigned long page_counter_headroom(const struct page_counter *counter) {
        unsigned long room = ULONG_MAX;

        for (const struct page_counter *c = counter; c; c = c->parent) {
                unsigned long high = atomic_load_explicit(&((struct page_counter *) c)->high, memory_order_relaxed);
                unsigned long lim = atomic_load_explicit(&((struct page_counter *) c)->max, memory_order_relaxed);
                unsigned long usage = page_counter_read(c);

                if (high < lim)
                        lim = high;
                if (lim >= PAGE_COUNTER_MAX)
                        continue;
                if (usage >= lim)
                        return 0;
                if (lim - usage < room)
                        room = lim - usage;
        }
        return room;
}

void page_counter_charge(struct page_counter *counter, unsigned long nr_pages) {
        bool protection = track_protection(counter);

        for (struct page_counter *c = counter; c; c = c->parent) {
                long new;

                new = atomic_fetch_add_explicit(&c->usage, (long) nr_pages, relaxed) + (long) nr_pages;
                if (protection)
                        propagate_protected_usage(c, (unsigned long) new);
                update_watermark(c, new);
        }
}

bool page_counter_try_charge(struct page_counter *counter, unsigned long nr_pages,
                             struct page_counter **fail) {
        bool protection = track_protection(counter);
        struct page_counter *c, *failed;

        for (c = counter; c; c = c->parent) {
                long new;

                /*
                 * Charge speculatively to avoid an expensive compare-and-swap
                 * loop.  If a bigger charge fails, it might falsely lock out a
                 * racing smaller charge and send it into reclaim early, but
                 * the error is limited to the difference between the sizes.
                 *
                 * The sequentially consistent add, followed by a sequentially
                 * consistent read of max, pairs with page_counter_set_max():
                 * either we see the new limit, or the setter sees that usage
                 * changed and retries.
                 */
                new = atomic_fetch_add(&c->usage, (long) nr_pages) + (long) nr_pages;
                if ((unsigned long) new > atomic_load(&c->max)) {
                        atomic_fetch_sub_explicit(&c->usage, (long) nr_pages, relaxed);
                        /*
                         * The kernel tolerates a racy failcnt++; an atomic
                         * add costs nothing extra here since we just wrote
                         * the same cache line, and keeps the count exact.
                         */
                        atomic_fetch_add_explicit(&c->failcnt, 1, relaxed);
                        failed = c;
                        goto failed;
                }
                if (protection)
                        propagate_protected_usage(c, (unsigned long) new);
                update_watermark(c, new);
        }
        return true;

failed:
        for (c = counter; c != failed; c = c->parent)
                (void) page_counter_cancel(c, nr_pages);
        if (fail)
                *fail = failed;
        return false;
}

bool page_counter_uncharge(struct page_counter *counter, unsigned long nr_pages) {
        bool ok = true;

        for (struct page_counter *c = counter; c; c = c->parent)
                if (!page_counter_cancel(c, nr_pages))
                        ok = false;
        return ok;
}

int page_counter_set_max(struct page_counter *counter, unsigned long nr_pages) {
        if (nr_pages > PAGE_COUNTER_MAX)
                return -EINVAL;

        for (;;) {
                unsigned long old;
                long usage;

                /*
                 * Update the limit while making sure that it's not below the
                 * concurrently-changing usage.  The read-swap-read sequence
                 * is sequentially consistent and so ordered against
                 * page_counter_try_charge(), which modifies usage before it
                 * reads the limit: if a charger saw the old limit, we see its
                 * modified usage here and retry.
                 */
                usage = atomic_load(&counter->usage);
                if (usage > 0 && (unsigned long) usage > nr_pages)
                        return -EBUSY;

                old = atomic_exchange(&counter->max, nr_pages);

                /* Usage did not grow, or the limit was raised: done. */
                if (atomic_load(&counter->usage) <= usage || nr_pages >= old)
                        return 0;

                atomic_store(&counter->max, old);
                sched_yield(); /* the kernel's cond_resched() */
        }
}

int page_counter_force_max(struct page_counter *counter, unsigned long nr_pages) {
        if (nr_pages > PAGE_COUNTER_MAX)
                return -EINVAL;

        /* memory_max_write(): xchg(&memcg->memory.max, max), reclaim later. */
        (void) atomic_exchange(&counter->max, nr_pages);
        return 0;
}

int page_counter_set_high(struct page_counter *counter, unsigned long nr_pages) {
        if (nr_pages > PAGE_COUNTER_MAX)
                return -EINVAL;

        atomic_store_explicit(&counter->high_setting, nr_pages, relaxed);
        atomic_store_explicit(&counter->high, nr_pages < page_counter_get_high_auto(counter) ? nr_pages : page_counter_get_high_auto(counter), relaxed);
        return 0;
}

int page_counter_set_high_auto(struct page_counter *counter, unsigned long nr_pages) {
        if (nr_pages > PAGE_COUNTER_MAX)
                return -EINVAL;

        atomic_store_explicit(&counter->high_auto, nr_pages, relaxed);
        atomic_store_explicit(&counter->high, nr_pages < page_counter_get_high_setting(counter) ? nr_pages : page_counter_get_high_setting(counter), relaxed);
        return 0;
}

int page_counter_set_min(struct page_counter *counter, unsigned long nr_pages) {
        if (nr_pages > PAGE_COUNTER_MAX)
                return -EINVAL;

        atomic_store_explicit(&counter->min, nr_pages, relaxed);
        for (struct page_counter *c = counter; c; c = c->parent)
                propagate_protected_usage(c, page_counter_read(c));
        return 0;
}

int page_counter_set_low(struct page_counter *counter, unsigned long nr_pages) {
        if (nr_pages > PAGE_COUNTER_MAX)
                return -EINVAL;

        atomic_store_explicit(&counter->low, nr_pages, relaxed);
        for (struct page_counter *c = counter; c; c = c->parent)
                propagate_protected_usage(c, page_counter_read(c));
        return 0;
}

void page_counter_reset_watermark(struct page_counter *counter) {
        atomic_store_explicit(&counter->watermark, page_counter_read(counter), relaxed);
}
