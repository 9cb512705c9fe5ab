#!/bin/bash
# SPDX-License-Identifier: MIT
# Siblings under pressure (shrink_node_memcgs() with effective protection
# relative to the tenant at max): unprotected tenants give pages back in
# proportion to their usage; a low-protected one gives only when nothing
# else can (and counts `low`); a min-protected one keeps its pages even when
# the charge then fails.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant p "Path=p" "MemoryMax=8M"               # 2048 pages
mb_write_tenant p-min "Path=p/min" "MemoryMin=1M"       # 256 pages
mb_write_tenant p-low "Path=p/low" "MemoryLow=1M"
mb_write_tenant p-a "Path=p/a"
mb_write_tenant p-b "Path=p/b"
mb_write_tenant p-x "Path=p/x"
mb_start_daemon

for t in min low a b x; do pc_start "$t" "p/$t"; done
assert_eq "cache ok 256" "$(pc min cache 256)" "p/min: a cache as large as its min"
assert_eq "cache ok 256" "$(pc low cache 256)" "p/low: a cache as large as its low"
assert_eq "cache ok 608" "$(pc a cache 608)" "p/a: a cache of 608 pages"
assert_eq "cache ok 304" "$(pc b cache 304)" "p/b: a cache of 304 pages"

# 1424 pages + 1008 for x > 2048: a and b give way, 2:1.
assert_eq "alloc ok 1008" "$(pc x alloc 1008)" "p/x allocates past p's max"
ca=$(pc_field a cache)
cb=$(pc_field b cache)
lost_a=$((608 - ca))
lost_b=$((304 - cb))
[ "$lost_b" -gt 0 ] || fail "p/b gave nothing (p/a gave $lost_a)"
# In proportion to usage: 2:1, give or take the rounding of each round.
[ $((lost_a * 10)) -ge $((lost_b * 14)) ] && [ $((lost_a * 10)) -le $((lost_b * 30)) ] ||
        fail "p/a gave $lost_a and p/b $lost_b pages: not in proportion to their usage (2:1)"
pass "unprotected siblings gave $lost_a and $lost_b pages (usage 608:304)"
assert_eq 256 "$(pc_field low cache)" "p/low keeps its cache while others can give"
assert_eq 256 "$(pc_field min cache)" "p/min keeps its cache"
mb_dump_state
assert_eq 0 "$(mb_event_local p/low low)" "low events of p/low"
settle
leak_check "unprotected siblings reclaimed"

# More than a and b have left: then p/low gives, and counts a low event.
left=$((ca + cb))
assert_eq "alloc ok $((left + 64))" "$(pc x alloc $((left + 64)))" "p/x allocates what only p/low can give"
[ "$(pc_field low cache)" -lt 256 ] || fail "p/low gave nothing"
mb_dump_state
[ "$(mb_event_local p/low low)" -ge 1 ] || fail "no low event on p/low"
assert_eq 0 "$(mb_event_local p/min low)" "low events of p/min"
assert_eq 256 "$(pc_field min cache)" "p/min keeps its cache"
pass "p/low gave $((256 - $(pc_field low cache))) pages only after p/a and p/b were empty"

# Even more: p/low empties, then the charge fails; p/min is never touched.
out=$(pc x alloc 400)
case "$out" in "alloc ENOMEM "*) ;; *) fail "p/x past everything reclaimable: $out" ;; esac
assert_eq 0 "$(pc_field low cache)" "p/low gave everything"
assert_eq 256 "$(pc_field min cache)" "p/min keeps its cache at OOM"
mb_dump_state
[ "$(mb_event_local p oom)" -ge 1 ] || fail "no oom event on p"
settle
leak_check "at OOM"

for t in min low a b x; do pc_quit "$t"; done
leak_check "after the clients left"
