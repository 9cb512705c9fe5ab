#!/bin/bash
# SPDX-License-Identifier: MIT
# Lowering a limit below the usage reclaims the excess, like writing
# memory.max / memory.high: the cache gives way until the usage fits, the
# pages the application uses stay.  A max below what can be reclaimed
# counts oom (OOMPolicy=fail: nobody is killed) and new charges fail.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant l "Path=l"
bus_run

set_limit() { mgr_call SetTenantLimits 'sa{sv}b' l 1 "$1" t "$2" true; }
usage_of_l() { echo $(( $(tenant_prop l MemoryCurrent) / PAGE )); }
usage_below() { [ "$(usage_of_l)" -le "$1" ]; }

pc_start a l
assert_eq "alloc ok 96" "$(pc a alloc 96)" "l: the application's pages"
assert_eq "cache ok 900" "$(pc a cache 900)" "l: a cache"

set_limit MemoryMax $((2 << 20))                     # 512 pages
wait_for 20 usage_below 512 || fail "usage $(usage_of_l) stays above the new max of 512 pages"
assert_eq 96 "$(pc_field a app)" "the application keeps its pages"
pass "MemoryMax=2M: usage down to $(usage_of_l) pages"

set_limit MemoryHigh $((1 << 20))                    # 256 pages
wait_for 20 usage_below 256 || fail "usage $(usage_of_l) stays above the new high of 256 pages"
pass "MemoryHigh=1M: usage down to $(usage_of_l) pages"

# Below what can be reclaimed: oom, nobody killed, charges fail.
# The write returns when nothing more can be reclaimed, and says so.
expect_fail "the usage stays at $((96 * PAGE)) bytes, above the new MemoryMax of $((256 << 10)) bytes" \
        set_limit MemoryMax $((256 << 10))             # 64 pages < the 96 in use
assert_eq 0 "$(pc_field a cache)" "the cache is gone"
assert_eq 96 "$(pc_field a app)" "the application keeps its pages"
mb_dump_state
[ "$(mb_event_local l oom)" -ge 1 ] || fail "no oom event"
assert_eq 0 "$(mb_event_local l oom_kill)" "oom_kill events"
out=$(pc a alloc 16)
case "$out" in "alloc ENOMEM 0 "*) ;; *) fail "alloc above max: $out" ;; esac
settle
leak_check "usage above a lowered max"
pc_quit a
leak_check "after the client left"
