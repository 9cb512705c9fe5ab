#!/bin/bash
# SPDX-License-Identifier: MIT
# The bus daemon goes away and comes back: membrokerd keeps serving its
# clients without the bus (a client holding pages keeps them, a new client
# can attach and allocate), then reconnects on its own, owns org.membroker1
# again, and the API works as before: properties show the clients' pages,
# SetTenantLimits applies, MemoryEvent signals are emitted.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
# Exact usage after a known allocation is what this checks: no charging
# ahead of need (tests/test-client-refill.sh covers it).
export MEMBROKER_REFILL=0

bus_setup "Capacity=64M"
mb_write_tenant app "Path=app" "MemoryMax=32M"
bus_run

load_start a app 4M
assert_eq $((4 << 20)) "$(tenant_prop app MemoryCurrent)" "MemoryCurrent before the bus goes"

# The bus daemon dies.
kill -TERM "$MB_BUS_PID"
wait "$MB_BUS_PID" 2>/dev/null || true
MB_BUS_PID=
wait_for 20 eval '[ "$(mb_dump_state; mb_dump_field bus connected)" = no ]' ||
        { cat "$MB_TMP/daemon.log"; fail "membrokerd did not notice that the bus went away"; }
assert_eq 1 "$(mb_dump_field bus losses)" "bus connections lost"
assert_eq 0 "$(mb_dump_field bus reconnects)" "reconnections while the bus is gone"

# Without a bus, the broker still serves: the holder is intact and a new
# client gets and frees pages.
kill -0 "$MB_DAEMON_PID" || fail "membrokerd died with the bus"
kill -0 "${LOAD_PID[a]}" || fail "the holding client died with the bus"
rc=0
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant app --hold 2M --seconds 1 >"$MB_TMP/b.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { cat "$MB_TMP/b.out"; fail "a client could not allocate while the bus was gone (rc $rc)"; }
pass "a client attached and allocated while the bus was gone"

# Let a few reconnection attempts fail, then bring the bus back at the same
# address.
sleep 1
rm -f "$MB_TMP/bus" "$MB_TMP/bus.address"
old_address=$MB_BUS_ADDRESS
mb_start_bus
# Same socket, new bus daemon: a new guid, which membrokerd's address
# (given with the old guid) must not pin when it reconnects.
assert_eq "${old_address%%,guid=*}" "${MB_BUS_ADDRESS%%,guid=*}" "the bus came back at the same path"
[ "$old_address" != "$MB_BUS_ADDRESS" ] || fail "the new bus daemon kept the old guid: the test proves nothing about it"
wait_for 40 "$BUSCTL" --address="$MB_BUS_ADDRESS" status org.membroker1 ||
        { cat "$MB_TMP/daemon.log"; fail "membrokerd did not take org.membroker1 again"; }
mb_dump_state
assert_eq yes "$(mb_dump_field bus connected)" "connected to the bus again"
assert_eq 1 "$(mb_dump_field bus reconnects)" "reconnections"

# The API after the reconnection: the holder's pages, a limit change, an
# event signal.
assert_eq $((4 << 20)) "$(tenant_prop app MemoryCurrent)" "MemoryCurrent after the reconnection"
assert_eq 1 "$(tenant_prop app NClients)" "NClients after the reconnection"
monitor_start ev "type='signal',sender='$BUS_DEST',member='MemoryEvent'"
mb_ctl set app MemoryMax=5M >/dev/null || fail "membrokerctl set failed after the reconnection"
assert_eq $((5 << 20)) "$(tenant_prop app MemoryMax)" "MemoryMax set after the reconnection"
rc=0
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant app --hold 4M --seconds 1 >"$MB_TMP/c.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "a client got 4M more under MemoryMax=5M"
monitor_wait ev '"max"' || fail "no MemoryEvent max signal after the reconnection"
pass "MemoryEvent signals after the reconnection"

load_stop a
[ "$LOAD_RC" -eq 0 ] || fail "the holding client failed (rc $LOAD_RC): $(cat "$MB_TMP/a.err")"
pass "the holding client kept its pages intact throughout"
