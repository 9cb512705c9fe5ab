#!/bin/bash
# SPDX-License-Identifier: MIT
# Over high: the charge succeeds, `high` is counted, the overage is
# reclaimed, and when reclaim cannot bring the tenant back the charging
# client is throttled as calculate_high_delay() says -- the penalty grows
# with the square of the overage, so throttle_usec grows with it.  A tenant
# whose client has a cache is brought back to its high instead.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
# 2M = 512 pages each; batches of 16 pages.
mb_write_tenant h1 "Path=h1" "MemoryHigh=2M"
mb_write_tenant h2 "Path=h2" "MemoryHigh=2M"
mb_write_tenant h3 "Path=h3" "MemoryHigh=2M"
mb_start_daemon

pc_start a h1
pc_start b h2
pc_start c h3
# Nothing reclaimable: a little over high (~3%), then more (~12%).
assert_eq "alloc ok 528" "$(pc a alloc 528)" "h1: 16 pages over high"
assert_eq "alloc ok 576" "$(pc b alloc 576)" "h2: 64 pages over high"
# A cache: the overage comes out of it.
assert_eq "cache ok 800" "$(pc c cache 800)" "h3: a cache of 800 pages"

settle 1.2  # the daemon's counters reach the tenants' stats
mb_dump_state
t1=$(mb_state h1 throttle_usec)
t2=$(mb_state h2 throttle_usec)
t3=$(mb_state h3 throttle_usec)
[ "$(mb_event_local h1 high)" -gt 0 ] || fail "no high event on h1"
[ "$(mb_event_local h2 high)" -gt 0 ] || fail "no high event on h2"
[ "$(mb_event_local h3 high)" -gt 0 ] || fail "no high event on h3"
pass "high events: h1 $(mb_event_local h1 high), h2 $(mb_event_local h2 high), h3 $(mb_event_local h3 high)"
[ "$t1" -gt 0 ] || fail "h1 was not throttled"
[ "$t2" -gt "$t1" ] || fail "throttle_usec does not grow with the overage: h1 $t1, h2 $t2"
pass "throttle_usec: h1 (3% over) $t1, h2 (12% over) $t2"

# h3: usage back to high (within one batch and the stock) and no throttle.
u3=$(mb_state h3 usage)
[ "$u3" -le $((512 + 16)) ] || fail "h3 stays above its high: $u3 pages"
[ "$(mb_state h3 pgsteal)" -gt 0 ] || fail "h3: nothing reclaimed"
[ "$t3" -lt "$t1" ] || fail "h3 was throttled ($t3 usec) although its cache could give"
pass "h3 brought back to $u3 pages (high 512) from its cache, throttle_usec $t3"
[ "$(pc_field c cache)" -lt 800 ] || fail "h3's cache did not shrink"

leak_check "over high"
pc_quit a
pc_quit b
pc_quit c
leak_check "after the clients left"
