#!/bin/bash
# SPDX-License-Identifier: MIT
# A client's pressure trigger (mb_pressure_trigger()) survives a restart of
# membrokerd with its fd store: the library reconnects by itself and arms
# the trigger again in the new daemon, so a stall after the restart still
# makes the trigger's descriptor readable.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/service-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"
command -v "$BUSCTL" >/dev/null || skip "busctl is not installed"
export MEMBROKER_REFILL=0

pr_setup
mb_write_tenant slow "Path=work/slow" "MemoryHigh=2M" # 512 pages
mb_start_bus
mb_sd_start --restart 1 -- --address "$MB_BUS_ADDRESS"

pc_start w work/slow
fd=$(pc w trigger some 50000 1000000 | sed -n 's/^trigger ok //p')
[ -n "$fd" ] || fail "mb_pressure_trigger failed"
assert_eq "events 0" "$(pc w events "$fd")" "no event before the restart"

pid=$(mb_sd_main_pid)
kill -TERM "$pid"
mb_sd_wait_ready 2
[ "$(mb_sd_main_pid)" != "$pid" ] || fail "the harness did not restart membrokerd"
wait_for 30 mb_has_clients work/slow || { tail -20 "$MB_TMP/daemon.log"; fail "the client did not reconnect"; }
pass "membrokerd restarted, the client reconnected"

pc_start s1 work/slow
assert_eq "alloc ok 600" "$(pc s1 alloc 600)" "s1: 88 pages over high after the restart"
events=0
count() {
        local n
        n=$(pc w events "$fd" | sed -n 's/^events //p')
        events=$((events + n))
        [ "$events" -gt 0 ]
}
wait_for 20 count || fail "the trigger did not fire after the restart"
pass "the trigger armed before the restart fired after it ($events event(s))"
pc_quit s1
pc_quit w
