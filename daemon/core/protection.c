/* SPDX-License-Identifier: MIT */
/*
 * protection.c - effective memory.min / memory.low, as the kernel's
 * effective_protection() and page_counter_calculate_protection().
 *
 * The rules (from the kernel's comment on effective_protection()):
 *
 * 1. At the first level of reclaim, effective protection equals the declared
 *    protection in min and low.
 * 2. At deeper levels effective protection is capped by the parent's
 *    effective protection, so that delegating a subtree is safe.
 * 3. Protection may be overcommitted at a level.  Then the parent's effective
 *    protection is distributed to the children in proportion to how much
 *    protection they declared and actually use ("protected usage").  This is
 *    work-conserving: what one child claims but does not use goes to its
 *    siblings.
 * 4. When protection is undercommitted, the parent's larger budget is NOT
 *    shared out in proportion: a child's protection is capped by its own
 *    setting.
 * 5. Except with memory_recursiveprot: then the unclaimed ("floating")
 *    remainder is distributed in proportion to each child's unprotected
 *    usage, so that a subtree as a whole is protected from its neighbours
 *    without each of its members declaring a share.
 *
 * 4 and 5 do not conflict: 4 is about siblings, 5 about neighbouring
 * subtrees.
 */
#include "protection.h"

#define relaxed memory_order_relaxed

/* a * b / c without intermediate overflow; saturates when the quotient does
 * not fit (only possible when c < b, i.e. with inconsistent inputs). */
static unsigned long mul_div(unsigned long a, unsigned long b, unsigned long c) {
        unsigned __int128 q = (unsigned __int128) a * b / c;

        return q > (unsigned __int128) ULONG_MAX ? ULONG_MAX : (unsigned long) q;
}

unsigned long effective_protection(unsigned long usage, unsigned long parent_usage,
                                   unsigned long setting, unsigned long parent_effective,
                                   unsigned long siblings_protected, bool recursive_protection) {
        unsigned long protected, ep;

        protected = usage < setting ? usage : setting;

        /*
         * If all children at this level combined claim and use more
         * protection than the parent affords them, distribute shares in
         * proportion to utilization (rule 3).  Actual utilization rather
         * than claimed protection keeps it work-conserving: claimed but
         * unused protection goes to siblings that would otherwise get less
         * than they claimed.
         */
        if (siblings_protected > parent_effective)
                return mul_div(protected, parent_effective, siblings_protected);

        /*
         * The protected usage of all children fits what the parent affords,
         * so whatever this child claims and uses is protected (rule 4).  If
         * it claims more than it uses, it is fully shielded while we return
         * a smaller value than it could enjoy in theory; that is fine, since
         * distribution always depends on actual consumption among siblings.
         */
        ep = protected;

        /*
         * Rule 5: if the children do not claim all the protection the parent
         * affords them, distribute the remainder in proportion to each
         * child's unprotected usage, so the same bytes are never protected
         * twice.  usage and parent_usage are not read atomically with the
         * protected sums, so both are checked to keep the division sane.
         */
        if (!recursive_protection)
                return ep;

        if (parent_effective > siblings_protected && parent_usage > siblings_protected &&
            usage > protected) {
                unsigned long unclaimed;

                unclaimed = mul_div(parent_effective - siblings_protected, usage - protected,
                                    parent_usage - siblings_protected);
                ep = ULONG_MAX - ep < unclaimed ? ULONG_MAX : ep + unclaimed;
        }

        return ep;
}

void page_counter_calculate_protection(struct page_counter *root, struct page_counter *counter,
                                       bool recursive_protection) {
        struct page_counter *parent = counter->parent;
        unsigned long usage, parent_usage;

        /*
         * The effective values of the reclaim root are ignored by the readers
         * (page_counter_protection()), so they may stay stale: writing them
         * here would break a concurrent walk from a higher root, for which
         * they are the parent's effective protection.
         */
        if (root == counter || !parent)
                return;

        usage = page_counter_read(counter);
        if (!usage)
                return;

        if (parent == root) {
                atomic_store_explicit(&counter->emin, page_counter_get_min(counter), relaxed);
                atomic_store_explicit(&counter->elow, page_counter_get_low(counter), relaxed);
                return;
        }

        parent_usage = page_counter_read(parent);

        atomic_store_explicit(&counter->emin,
                              effective_protection(usage, parent_usage,
                                                   page_counter_get_min(counter),
                                                   atomic_load_explicit(&parent->emin, relaxed),
                                                   (unsigned long) atomic_load_explicit(&parent->children_min_usage, relaxed),
                                                   recursive_protection),
                              relaxed);

        atomic_store_explicit(&counter->elow,
                              effective_protection(usage, parent_usage,
                                                   page_counter_get_low(counter),
                                                   atomic_load_explicit(&parent->elow, relaxed),
                                                   (unsigned long) atomic_load_explicit(&parent->children_low_usage, relaxed),
                                                   recursive_protection),
                              relaxed);
}

void page_counter_protection(const struct page_counter *root, const struct page_counter *counter,
                             unsigned long *ret_min, unsigned long *ret_low) {
        struct page_counter *c = (struct page_counter *) counter;

        /*
         * No protection applies to the target of a reclaim: its emin/elow may
         * have been computed for a walk from another root (see
         * page_counter_calculate_protection()).
         */
        if (root == counter) {
                *ret_min = *ret_low = 0;
                return;
        }

        *ret_min = atomic_load_explicit(&c->emin, relaxed);
        *ret_low = atomic_load_explicit(&c->elow, relaxed);
}

/*
 * mem_cgroup_unprotected(): the target of the reclaim and the root of the
 * whole tree (which has no parent to take protection from) are never
 * protected.
 */
static bool unprotected(const struct page_counter *root, const struct page_counter *counter) {
        return root == counter || !counter->parent;
}

bool page_counter_below_min(const struct page_counter *root, const struct page_counter *counter) {
        if (unprotected(root, counter))
                return false;

        return atomic_load_explicit(&((struct page_counter *) counter)->emin, relaxed) >=
                page_counter_read(counter);
}

bool page_counter_below_low(const struct page_counter *root, const struct page_counter *counter) {
        if (unprotected(root, counter))
                return false;

        return atomic_load_explicit(&((struct page_counter *) counter)->elow, relaxed) >=
                page_counter_read(counter);
}
