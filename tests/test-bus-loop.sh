#!/bin/bash
# SPDX-License-Identifier: MIT
# The bus is served from the daemon's libevent loop while clients charge:
# many concurrent busctl calls during churn all get answers, the clients
# are unaffected, and membrokerd leaves the bus cleanly on SIGTERM (the name
# is released, exit status 0).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M" "StatsFlushIntervalSec=1"
mb_write_tenant a "Path=app/a"
mb_write_tenant b "Path=app/b"
bus_run
load_start a app/a 4M --churn 5000
load_start b app/b 2M --churn 5000 --threads 2

pids=()
for i in $(seq 1 40); do
        case $((i % 4)) in
        0) mgr_call DumpStats ;;
        1) mgr_call GetStatText s app/a ;;
        2) mb_busctl get-property "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" MemoryCurrent NClients ;;
        3) mb_busctl --json=short call "$BUS_DEST" "$BUS_MGR_PATH" org.freedesktop.DBus.ObjectManager GetManagedObjects ;;
        esac >"$MB_TMP/c$i.out" 2>&1 &
        pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
assert_eq 0 "$failed" "failed calls among 40 concurrent ones"

load_stop a
assert_eq 0 "$LOAD_RC" "client a (churning) exit status"
load_stop b
assert_eq 0 "$LOAD_RC" "client b (churning) exit status"
grep -q "verify=ok" "$MB_TMP/a.out" || fail "client a: $(cat "$MB_TMP/a.out")"

rc=0
kill -TERM "$MB_DAEMON_PID"
wait "$MB_DAEMON_PID" || rc=$?
MB_DAEMON_PID=
assert_eq 0 "$rc" "membrokerd exit status after SIGTERM"
out=$(mb_busctl status "$BUS_DEST" 2>&1) && fail "org.membroker1 is still owned: $out"
pass "org.membroker1 released"
