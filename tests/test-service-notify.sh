#!/bin/bash
# SPDX-License-Identifier: MIT
# The sd_notify(3) protocol, seen by a test-side notify socket
# (tests/fake-systemd): READY=1 comes once, and only when the client socket
# accepts connections AND org.membroker1 is owned (checked synchronously
# when READY=1 arrives); it carries a STATUS= line; WATCHDOG=1 pings keep
# coming at half $WATCHDOG_USEC, so the watchdog never fires; a reload is
# RELOADING=1 ... READY=1; the stop is STOPPING=1.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/service-lib.sh"
command -v "$BUSCTL" >/dev/null || skip "busctl is not installed"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant a "Path=a" "MemoryMax=16M"
mb_start_bus

check="test -S '$MB_SOCK' && '$top_builddir/tests/wire-client' --socket '$MB_SOCK' hello a expect-ok >/dev/null && \
'$BUSCTL' --address='$MB_BUS_ADDRESS' status org.membroker1 >/dev/null"
mb_sd_start --watchdog-usec 1000000 --on-ready "$check"

wait_for 30 grep -q 'on-ready status=' "$MB_SD_LOG" || fail "the READY=1 check did not finish"
grep -q 'on-ready status=0' "$MB_SD_LOG" ||
        { cat "$MB_SD_LOG"; fail "when READY=1 arrived, the socket or the bus name was not there yet"; }
pass "READY=1 came after the socket and the bus name"
grep 'notify .*READY=1' "$MB_SD_LOG" | grep -q 'STATUS=Serving 2 tenants' ||
        fail "READY=1 carries no STATUS= line: $(grep READY=1 "$MB_SD_LOG")"
pass "READY=1 carries STATUS="

# Three watchdog intervals: pings arrive every half interval, the harness
# (like systemd) never has to fire.
sleep 3
pings=$(mb_sd_count 'notify .*WATCHDOG=1')
[ "$pings" -ge 3 ] || fail "only $pings WATCHDOG=1 in 3 s with WatchdogSec=1s"
! grep -q 'watchdog-timeout' "$MB_SD_LOG" || fail "the watchdog fired"
pass "$pings watchdog pings, no timeout"

# A reload is announced and completed.
kill -HUP "$(mb_sd_main_pid)"
wait_for 20 mb_sd_at_least 1 'notify .*RELOADING=1' || fail "no RELOADING=1"
mb_sd_wait_ready 2
pass "SIGHUP: RELOADING=1 then READY=1"
assert_eq 1 "$(mb_sd_count '^start ')" "starts of the daemon (no restart so far)"

mb_sd_stop
grep -q 'notify .*STOPPING=1' "$MB_SD_LOG" || fail "no STOPPING=1"
grep -q 'exit pid=[0-9]* status=exited:0' "$MB_SD_LOG" || fail "membrokerd did not exit with 0: $(tail -3 "$MB_SD_LOG")"
pass "SIGTERM: STOPPING=1, exit status 0"
