#!/bin/bash
# SPDX-License-Identifier: MIT
# PressureReclaim=yes: each host memory pressure event (here injected
# through a FIFO given as --pressure-file) asks the tenants above their
# effective low for a part of the excess; a tenant within its low is not
# touched, and the others shrink toward their low event after event.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"
# How much each cache gives is what this checks, and a reclaim takes the
# stock first: no charging ahead of need, whose stock varies with timing
# (tests/test-client-refill.sh covers it).
export MEMBROKER_REFILL=0

pr_setup "PressureReclaim=yes"
mb_write_tenant prot "Path=prot" "MemoryLow=1M"       # 256 pages
mb_write_tenant a "Path=a"
mb_write_tenant b "Path=b"
mkfifo "$MB_TMP/psi"
mb_start_daemon --pressure-file "$MB_TMP/psi"
mb_dump_state
grep -qxF "state: pressure watching=yes kind=fifo source=$MB_TMP/psi" "$MB_TMP/state.dump" ||
        fail "the pressure source is not watched: $(grep '^state: pressure' "$MB_TMP/state.dump")"

pc_start prot prot
pc_start a a
pc_start b b
assert_eq "cache ok 256" "$(pc prot cache 256)" "prot caches within its low"
assert_eq "cache ok 400" "$(pc a cache 400)" "a caches"
assert_eq "cache ok 208" "$(pc b cache 208)" "b caches"

shrunk() { [ "$(pc_field a cache)" -lt "$1" ]; }
echo pressure >"$MB_TMP/psi"
wait_for 20 shrunk 400 || fail "no reclaim after a pressure event"
settle
ca=$(pc_field a cache)
cb=$(pc_field b cache)
[ "$cb" -lt 208 ] || fail "b gave nothing"
# A quarter of the excess (608 pages) per event: about 150 pages in all.
[ $((400 - ca + 208 - cb)) -le 200 ] || fail "one event took $((400 - ca + 208 - cb)) pages, more than a part of the excess"
assert_eq 256 "$(pc_field prot cache)" "prot keeps its cache"
pass "one pressure event: a $((400 - ca)) and b $((208 - cb)) pages, prot none"

for i in 1 2 3 4 5 6; do
        echo pressure >"$MB_TMP/psi"
        wait_for 20 shrunk "$ca" || break
        ca=$(pc_field a cache)
done
[ "$ca" -lt 200 ] || fail "a did not keep shrinking under pressure ($ca pages)"
assert_eq 256 "$(pc_field prot cache)" "prot keeps its cache"
mb_dump_state
events=$(sed -n 's/^state: reclaim .* pressure_events=\([0-9]*\) .*/\1/p' "$MB_TMP/state.dump")
[ "$events" -ge 2 ] || fail "pressure events counted: $events"
assert_eq 0 "$(mb_event_local prot low)" "low events of prot"
pass "under sustained pressure a is down to $ca pages, prot untouched ($events pressure events)"
settle
leak_check "after pressure reclaim"
for t in prot a b; do pc_quit "$t"; done
leak_check "after the clients left"
