#!/bin/bash
# SPDX-License-Identifier: MIT
# `low` events on intermediate tenants: shrink_node_memcgs() counts
# MEMCG_LOW on every memcg it visits below its effective low in the pass
# below low -- a parent without pages of its own too, once per visit.  A
# parent q below its MemoryLow, with a leaf q/c that claims the same low and
# holds a cache; a sibling x charges past the top's max with nothing else
# to reclaim: the pass below low takes from q/c, and both q/c and q count
# `low`.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant t "Path=t" "MemoryMax=4M"                 # 1024 pages
mb_write_tenant t-q "Path=t/q" "MemoryLow=2M"             # 512 pages
mb_write_tenant t-q-c "Path=t/q/c" "MemoryLow=2M"
mb_write_tenant t-x "Path=t/x"
mb_start_daemon

pc_start c t/q/c
pc_start x t/x
assert_eq "cache ok 400" "$(pc c cache 400)" "t/q/c caches below its low"
assert_eq "alloc ok 700" "$(pc x alloc 700)" "t/x allocates what only t/q/c can give"
[ "$(pc_field c cache)" -lt 400 ] || fail "t/q/c gave nothing"
mb_dump_state
lc=$(mb_event_local t/q/c low)
lq=$(mb_event_local t/q low)
[ "$lc" -ge 1 ] || fail "no low event on the leaf t/q/c"
[ "$lq" -ge 1 ] || fail "no low event on the intermediate t/q (visited below its low)"
assert_eq "$lq" "$(mb_event_local t/q low)" "t/q low events"
[ "$(mb_state t/q events | tr ',' '\n' | sed -n 's/^low://p')" -ge $((lq + lc)) ] ||
        fail "t/q's hierarchical low count misses its own or its child's"
assert_eq 0 "$(mb_event_local t low)" "low events of t (the reclaim root is never below low)"
pass "low events: t/q/c $lc, t/q $lq"
settle
leak_check "after reclaim below low"
pc_quit c
pc_quit x
mb_daemon_alive
