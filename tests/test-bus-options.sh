#!/bin/bash
# SPDX-License-Identifier: MIT
# The bus options of membrokerd and membrokerctl: --user finds the session
# bus from DBUS_SESSION_BUS_ADDRESS (as busctl --user does); membrokerd stops
# with a reason when it cannot reach its bus or the name is taken.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a"
command -v "$BUSCTL" >/dev/null || skip "busctl is not installed"
mb_start_bus # exports DBUS_SESSION_BUS_ADDRESS

# No bus at the address given: a non-zero exit with the reason.
rc=0
timeout 20 "$MEMBROKERD" --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" \
        --address "unix:path=$MB_TMP/nobus" >"$MB_TMP/nobus.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "membrokerd without its bus: exit status $rc"
grep -q "cannot connect to unix:path=$MB_TMP/nobus" "$MB_TMP/nobus.log" || fail "no reason: $(cat "$MB_TMP/nobus.log")"
pass "membrokerd without its bus exits with $rc and says why"

# --user: the session bus of DBUS_SESSION_BUS_ADDRESS.
rm -f "$MB_SOCK"
"$MEMBROKERD" --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" --user \
        >>"$MB_TMP/daemon.log" 2>&1 &
MB_DAEMON_PID=$!
wait_for 20 "$BUSCTL" --user status "$BUS_DEST" || fail "membrokerd --user did not take $BUS_DEST"
"$MEMBROKERCTL" --user status | grep -qx " *Tenants: 3" || fail "membrokerctl --user status: $("$MEMBROKERCTL" --user status 2>&1)"
pass "membrokerd --user and membrokerctl --user"

# A second daemon on the same bus: the name is taken.
rc=0
timeout 20 "$MEMBROKERD" --config-dir "$MB_ETC" --socket "$MB_TMP/second.sock" --state-dir "$MB_STATE" \
        --address "$MB_BUS_ADDRESS" >"$MB_TMP/second.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "second membrokerd: exit status $rc"
grep -q "cannot own org.membroker1" "$MB_TMP/second.log" || fail "no reason: $(cat "$MB_TMP/second.log")"
pass "a second membrokerd on the same bus exits with $rc and says why"
"$MEMBROKERCTL" --user status >/dev/null || fail "the first daemon was disturbed"
