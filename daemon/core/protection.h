/* SPDX-License-Identifier: MIT */
/*
 * protection.h - effective memory.min / memory.low.
 *
 * Mirrors the kernel's effective_protection() and
 * page_counter_calculate_protection() (mm/page_counter.c since Linux 6.10,
 * formerly mem_cgroup_calculate_protection() in mm/memcontrol.c), including
 * the proportional distribution of a parent's protection among children that
 * claim more than it has, and the memory_recursiveprot variant; and the
 * readers reclaim uses, mem_cgroup_protection(), mem_cgroup_below_min() and
 * mem_cgroup_below_low() (include/linux/memcontrol.h).
 *
 * How a reclaimer uses it (shrink_node_memcgs() in mm/vmscan.c).  Effective
 * protection is not a stored property of a counter: it is recomputed for one
 * reclaim, relative to that reclaim's root (the counter whose limit was hit,
 * or the tree root for capacity pressure, or the target of memory.reclaim),
 * by walking the root's subtree top-down so that every parent's emin/elow is
 * fresh before its children use it.  mem_cgroup_iter() walks pre-order,
 * which gives that:
 *
 *      bool low_reclaim = false, low_skipped;
 *  again:
 *      low_skipped = false;
 *      for (t = root; t; t = next_in_preorder(t, root)) {
 *              page_counter_calculate_protection(&root->memory, &t->memory,
 *                                                tree->recursive_protection);
 *              if (page_counter_below_min(&root->memory, &t->memory))
 *                      continue;                 // hard protection
 *              if (page_counter_below_low(&root->memory, &t->memory)) {
 *                      if (!low_reclaim) {       // soft protection
 *                              low_skipped = true;
 *                              continue;
 *                      }
 *                      tenant_memory_event(t, MB_EVENT_LOW);
 *              }
 *              reclaim from t's own pages (leaves hold the pages)
 *      }
 *      if (nothing reclaimed && low_skipped && !low_reclaim) {
 *              low_reclaim = true;               // do_try_to_free_pages()
 *              goto again;
 *      }
 *
 * The walk is not stateless: emin/elow of the counters in the subtree are
 * overwritten.  Concurrent walks from different roots are tolerated as in
 * the kernel: the root of a walk never has its emin/elow written and its own
 * protection is ignored by the readers below (see mem_cgroup_protection()),
 * because a value written for one root would be wrong for the other walk.
 * The values are inputs to reclaim decisions, not a report; anything that
 * displays them should recompute them relative to the tree root first.
 */
#pragma once

#include <stdbool.h>
#include "page_counter.h"

/**
 * effective_protection - the kernel's effective_protection(): the effective
 * memory.min or memory.low of a counter with @usage whose own setting is
 * @setting, given its parent's @parent_usage and @parent_effective
 * (emin/elow) and @siblings_protected, the parent's children_min_usage or
 * children_low_usage (the protected usage of all children, this one
 * included).  With @recursive_protection (the memory_recursiveprot mount
 * option) a parent's unclaimed protection floats down to children in
 * proportion to their unprotected usage.
 *
 * Same results as the kernel wherever the kernel's unsigned long
 * arithmetic does not wrap; the two products are computed in 128 bits so
 * that a parent with protection "max" (PAGE_COUNTER_MAX) still divides
 * correctly, where the kernel's 64-bit product would overflow.
 */
unsigned long effective_protection(unsigned long usage, unsigned long parent_usage,
                                   unsigned long setting, unsigned long parent_effective,
                                   unsigned long siblings_protected, bool recursive_protection);

/**
 * page_counter_calculate_protection - compute @counter's emin and elow
 * (stored in @counter) for a reclaim rooted at @root, which is @counter or
 * one of its ancestors.  The caller walks @root's subtree top-down, parents
 * before children, as shown above; @counter's parent must have been
 * computed in the same walk unless it is @root.
 *
 * As in the kernel: nothing is written when @counter == @root (the readers
 * below ignore the root's protection instead), nor when @counter's usage is
 * 0 (there is nothing to reclaim, and its children have no usage either);
 * a child of @root gets its own min/low as they are.
 */
void page_counter_calculate_protection(struct page_counter *root, struct page_counter *counter,
                                       bool recursive_protection);

/**
 * page_counter_protection - the effective protection of @counter in the
 * reclaim rooted at @root, after page_counter_calculate_protection(): its
 * emin and elow, or 0 and 0 when @counter is @root ("there is no reclaim
 * protection applied to a targeted reclaim").  Mirrors
 * mem_cgroup_protection().
 */
void page_counter_protection(const struct page_counter *root, const struct page_counter *counter,
                             unsigned long *ret_min, unsigned long *ret_low);

/**
 * page_counter_below_min, page_counter_below_low - whether @counter's whole
 * usage is within its effective min (never reclaim) or low (reclaim only
 * when nothing unprotected is left, and count a low event).  Always false
 * for @root itself and for the root of the whole tree.  Mirror
 * mem_cgroup_below_min() / mem_cgroup_below_low().
 */
bool page_counter_below_min(const struct page_counter *root, const struct page_counter *counter);
bool page_counter_below_low(const struct page_counter *root, const struct page_counter *counter);
