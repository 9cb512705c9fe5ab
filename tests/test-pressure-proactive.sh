#!/bin/bash
# SPDX-License-Identifier: MIT
# Proactive reclaim (memory.reclaim): Reclaim(path, bytes) over D-Bus asks
# the subtree's clients for the pages and returns what it got -- exactly
# the drop in usage, never more than asked.  Like memory_reclaim(), a
# reclaim that cannot get all it was asked for fails with EAGAIN
# (org.membroker1.Error.Again, the bytes got in the message; membrokerctl
# exits 1).  Like memory.reclaim, the target's own protection does not
# shield it; its descendants' does.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant pr-a "Path=pr/a"
mb_write_tenant q "Path=q" "MemoryMin=4M"
mb_write_tenant r-m "Path=r/m" "MemoryMin=4M"
bus_run

pc_start a pr/a
assert_eq "alloc ok 64" "$(pc a alloc 64)" "pr/a allocates"
assert_eq "cache ok 512" "$(pc a cache 512)" "pr/a caches"
before=$(tenant_prop pr MemoryCurrent)
out=$(mgr_call Reclaim st pr $((1 << 20)))
assert_eq "t 1048576" "$out" "Reclaim(pr, 1M)"
after=$(tenant_prop pr MemoryCurrent)
assert_eq $((1 << 20)) $((before - after)) "usage dropped by what was reclaimed"
mb_dump_state
[ "$(mb_state pr/a pgsteal)" -ge 256 ] || fail "pgsteal of pr/a: $(mb_state pr/a pgsteal)"
[ "$(mb_state pr/a pgscan)" -ge 256 ] || fail "pgscan of pr/a: $(mb_state pr/a pgscan)"

# More than is reclaimable: what the cache and the stock hold comes back,
# the pages the application uses stay.
before=$after
out=$("${DSEND[@]}" "$BUS_MGR_PATH" "$BUS_MGR_IFACE.Reclaim" string:pr uint64:$((100 << 20)) 2>&1) &&
        fail "Reclaim(pr, 100M) succeeded: $out"
got=$(sed -n "s/^Error org\.membroker1\.Error\.Again: Reclaimed \([0-9]*\) of $((100 << 20)) bytes from 'pr': .*/\1/p" <<<"$out")
[ -n "$got" ] || fail "Reclaim(pr, 100M): $out"
after=$(tenant_prop pr MemoryCurrent)
assert_eq $((before - after)) "$got" "Reclaim(pr, 100M) reported the drop in usage"
[ "$got" -ge $((256 * PAGE)) ] || fail "Reclaim(pr, 100M) got only $got bytes"
assert_eq 64 "$(pc_field a app)" "the application keeps its pages"
assert_eq 0 "$(pc_field a cache)" "the cache is empty"
pass "Reclaim(pr, 100M) -> EAGAIN after $got bytes"
rc=0
out=$(mb_ctl reclaim pr/a 64K 2>&1) || rc=$?
assert_eq 1 "$rc" "membrokerctl reclaim exit status when nothing is left"
assert_eq "membrokerctl: reclaim: Reclaimed 0 of 65536 bytes from 'pr/a': nothing more could be reclaimed" "$out" \
        "membrokerctl reclaim message"

# The target's own min does not shield it ...
pc_start q q
assert_eq "cache ok 256" "$(pc q cache 256)" "q caches (below its min)"
assert_eq "t 524288" "$(mgr_call Reclaim st q 524288)" "Reclaim(q, 512K) despite q's MemoryMin"
# ... its descendants' does.
pc_start m r/m
assert_eq "cache ok 256" "$(pc m cache 256)" "r/m caches (below its min)"
expect_fail "Reclaimed 0 of 524288 bytes from 'r'" mgr_call Reclaim st r 524288
assert_eq 256 "$(pc_field m cache)" "r/m keeps its cache"

settle
leak_check "after proactive reclaim"
pc_quit a
pc_quit q
pc_quit m
leak_check "after the clients left"
