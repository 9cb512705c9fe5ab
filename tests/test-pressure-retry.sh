#!/bin/bash
# SPDX-License-Identifier: MIT
# MAX_RECLAIM_RETRIES counts passes that free nothing, and every pass calls
# the shrinkers again (try_charge_memcg() -> try_to_free_mem_cgroup_pages()
# -> shrink_slab() on each retry): a client whose shrinker frees nothing on
# its first call is asked again, and the charge that needs its pages
# succeeds without an oom.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"
# The exact content of a stock after whole batches is part of what this
# checks: no charging ahead of need (tests/test-client-refill.sh covers it).
export MEMBROKER_REFILL=0

pr_setup
mb_write_tenant k "Path=k" "MemoryMax=4M"       # 1024 pages
mb_start_daemon

pc_start a k --shrink-skip 1 --cpu 0  # one stock: its fill leaves it empty
pc_start b k
assert_eq "alloc ok 256" "$(pc a alloc 256)" "A allocates"
assert_eq "cache ok 608" "$(pc a cache 608)" "A fills its cache"
# 864 pages, whole batches of 16: A's stock is empty, so the drain before
# the first reclaim of B's charge finds nothing and that charge depends on
# A's shrinker, which frees nothing on its first call.
assert_eq 0 "$(pc_field a stock)" "A's stock"
assert_eq "alloc ok 400" "$(pc b alloc 400)" "B allocates at max"
scans=$(pc_field a scans)
freed=$(pc_field a freed)
[ "$scans" -ge 2 ] || fail "A's shrinker was called $scans times (not asked again after freeing nothing)"
[ "$freed" -gt 0 ] || fail "A's shrinker freed nothing"
pass "A's shrinker was called $scans times and freed $freed pages"
assert_eq 0 "$(pc_field b oom)" "oom events seen by B"
mb_dump_state
[ "$(mb_event_local k max)" -gt 0 ] || fail "no max event"
assert_eq 0 "$(mb_event_local k oom)" "oom events"
settle
leak_check "after the charges"
pc_quit a
pc_quit b
mb_daemon_alive
