#!/bin/bash
# SPDX-License-Identifier: MIT
# Over high, reclaim that makes progress is preferred to throttling, as
# mem_cgroup_handle_over_high() retries reclaim_high() -- the pages charged
# per level over high, then SWAP_CLUSTER_MAX per retry -- while it frees
# something, and stops as soon as the penalty would be 10 ms or less.  A
# parent over its high whose only reclaimable memory sits behind a slow
# shrinker (one page per call) in a sibling: the charging client is never
# throttled, every pass counts a `high` event on the parent, and the
# parent's usage is held just above its high.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant p "Path=p" "MemoryHigh=2M"               # 512 pages
mb_write_tenant p-cache "Path=p/cache"
mb_write_tenant p-app "Path=p/app"
mb_start_daemon

pc_start cache p/cache --shrink-max 1
pc_start app p/app
assert_eq "cache ok 480" "$(pc cache cache 480)" "p/cache fills a cache below p's high"
assert_eq "alloc ok 200" "$(pc app alloc 200)" "p/app allocates past p's high"

settle 1.2  # the daemon's counters reach the tenants' stats
mb_dump_state
assert_eq 0 "$(mb_state p/app throttle_usec)" "throttle_usec of p/app (reclaim kept making progress)"
freed=$((480 - $(pc_field cache cache)))
[ "$freed" -gt 100 ] || fail "p/cache gave only $freed pages"
high_events=$(mb_event_local p high)
[ "$high_events" -gt 13 ] || fail "$high_events high events on p: not one per reclaim pass"
pass "p/cache gave $freed pages one at a time; $high_events high events on p (one per pass)"
usage=$(mb_state p usage)
# Stopped where the penalty of a 16-page charge is 10 ms or less: 12 pages
# over, plus the stocks (2 x 16 per client).
[ "$usage" -le $((512 + 12 + 64)) ] || fail "p's usage $usage is far above its high (512)"
pass "p's usage $usage pages, high 512"

leak_check "over high"
pc_quit cache
pc_quit app
