#!/bin/bash
# SPDX-License-Identifier: MIT
# A limit write returns when the usage fits under it, as memory_max_write()
# drains, reclaims (and OOMs) before it returns and memory_high_write()
# reclaims first: `membrokerctl set TENANT MemoryMax=...` below the usage
# returns with the usage already under the new max (here behind a slow
# shrinker, one page per call); when nothing more can be reclaimed the
# limits still apply, and the command says how far it got and exits 1.  A
# reload stays asynchronous and logs the outcome.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

bus_setup "Capacity=64M" "ChargeBatch=16"
mb_write_tenant k "Path=k"
mb_write_tenant f "Path=f"
bus_run

pc_start cache k --shrink-max 1
assert_eq "cache ok 600" "$(pc cache cache 600)" "a cache of 600 pages"

mb_ctl set k MemoryMax=1M || fail "membrokerctl set MemoryMax=1M failed"
usage=$(tenant_prop k MemoryCurrent)
[ "$usage" -le $((1 << 20)) ] || fail "membrokerctl set returned with usage $usage above the new max of 1M"
pass "membrokerctl set returned with usage $usage <= 1M"
assert_eq $((1 << 20)) "$(tenant_prop k MemoryMax)" "MemoryMax"

mb_ctl set k MemoryHigh=512K || fail "membrokerctl set MemoryHigh=512K failed"
usage=$(tenant_prop k MemoryCurrent)
[ "$usage" -le $((512 << 10)) ] || fail "membrokerctl set returned with usage $usage above the new high of 512K"
pass "membrokerctl set MemoryHigh returned with usage $usage <= 512K"

# Nothing reclaimable: the limit applies, the command reports and fails.
pc_start app f
assert_eq "alloc ok 300" "$(pc app alloc 300)" "unreclaimable pages"
rc=0
out=$(mb_ctl set f MemoryMax=512K 2>&1) || rc=$?
assert_eq 1 "$rc" "exit status when the usage stays above the new max"
grep -q "limits of 'f' set: The limits apply, but the usage stays at [0-9]* bytes, above the new MemoryMax of 524288 bytes" <<<"$out" ||
        fail "unexpected output: $out"
pass "reported: $out"
assert_eq 524288 "$(tenant_prop f MemoryMax)" "MemoryMax of f applies"
expect_fail "above the new MemoryMax of 524288 bytes" mgr_call SetTenantLimits "sa{sv}b" f 1 MemoryMax t 524288 true

# A reload: asynchronous, its reclaim brings the usage under the new limit.
mb_write_tenant r "Path=r"
mgr_call Reload >/dev/null
pc_start rc r
assert_eq "cache ok 200" "$(pc rc cache 200)" "a cache of 200 pages in r"
mb_write_tenant r "Path=r" "MemoryMax=256K"
mgr_call Reload >/dev/null
wait_for 20 eval '[ "$(tenant_prop r MemoryMax)" = 262144 ] && [ "$(tenant_prop r MemoryCurrent)" -le 262144 ]' ||
        fail "the reload's reclaim did not bring r under MemoryMax=256K: $(tenant_prop r MemoryCurrent) bytes"
pass "the reload's reclaim brought r to $(tenant_prop r MemoryCurrent) bytes, under MemoryMax=256K"
pc_quit cache
pc_quit app
pc_quit rc
mb_daemon_alive
