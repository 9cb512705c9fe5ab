/* SPDX-License-Identifier: MIT */
/*
 * protection.h - effective memory.min / memory.low.
 *
 * Mirrors the kernel's effective_protection() and
 * page_counter_calculate_protection() (mm/page_counter.c, formerly
 * mem_cgroup_calculate_protection() in mm/memcontrol.c), including the
 * proportional distribution of a parent's protection among children that
 * claim more than it has, and the memory_recursiveprot variant.
 */
#pragma once

#include <stdbool.h>
#include "page_counter.h"

/**
 * effective_protection - the kernel's effective_protection(), verbatim in
 * semantics: @usage, @parent_usage, @setting (this counter's min or low),
 * @parent_effective (parent's emin/elow), @siblings_protected (parent's
 * children_min_usage/children_low_usage), @recursive_protection.
 */
unsigned long effective_protection(unsigned long usage, unsigned long parent_usage,
                                   unsigned long setting, unsigned long parent_effective,
                                   unsigned long siblings_protected, bool recursive_protection);

/**
 * page_counter_calculate_protection - compute @counter's emin/elow relative
 * to the reclaim root @root (both stored in @counter).  The caller walks the
 * subtree top-down (parents before children), as shrink_node_memcgs() does.
 * When @counter == @root, its own protection does not apply (emin = elow = 0),
 * as for memory.reclaim and for the kernel's reclaim root.
 */
void page_counter_calculate_protection(struct page_counter *root, struct page_counter *counter,
                                       bool recursive_protection);
