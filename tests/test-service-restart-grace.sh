#!/bin/bash
# SPDX-License-Identifier: MIT
# After a restart through the fd store, pages whose client does not come back
# within RestartGraceSec= are hole-punched and returned; the clients that do
# come back keep theirs.  The late client then finds its memory gone and its
# session ends with a clear error (not a crash).  Without a service manager
# (no fd store) a stop ends every session and its accounting, and a reconnecting client that held
# pages is refused the same way, while a client that held nothing carries on.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/service-lib.sh"
command -v "$BUSCTL" >/dev/null || skip "busctl is not installed"

mb_write_broker_conf "Capacity=128M" "RestartGraceSec=2"
mb_write_tenant a "Path=a"
mb_write_tenant b "Path=b"
mb_start_bus
mb_sd_start --restart 1 -- --address "$MB_BUS_ADDRESS"

mb_load_bg keep --tenant a --hold 4M
keep=$MB_BG_PID
mb_load_bg late --tenant b --hold 2M
late=$MB_BG_PID
mb_wait_holding keep
mb_wait_holding late
usage_a=$(mb_usage a)
usage_b=$(mb_usage b)
[ "$usage_b" -ge $((2 << 20)) ] || fail "usage of b: $usage_b"

# The late client sleeps through the restart.
kill -STOP "$late"
kill -KILL "$(mb_sd_main_pid)"
mb_sd_wait_ready 2
wait_for 30 mb_has_clients a || fail "the client of a did not reconnect"
assert_eq "$usage_b" "$(mb_usage b)" "usage of b right after the restart (its pages wait for it)"
wait_for 20 mb_usage_is b 0 || fail "the grace period did not end: usage of b $(mb_usage b)"
assert_eq 0 "$(mb_usage b)" "usage of b after the grace period"
assert_eq "$usage_a" "$(mb_usage a)" "usage of a after the grace period"
assert_eq "$usage_a" "$(mb_usage /)" "usage of the root after the grace period"

kill -CONT "$late"
rc=0
wait "$late" || rc=$?
[ $rc -ne 0 ] || fail "the late client did not notice that its memory is gone"
grep -q "without the memory\|no record" "$MB_TMP/late.out" || { cat "$MB_TMP/late.out"; fail "no clear error"; }
pass "the late client ends with: $(grep -v 'holding' "$MB_TMP/late.out" | grep -m1 'membroker-load:')"
mb_finish_load keep "$keep"

# Without the fd store a stop ends every session and its accounting.
mb_sd_stop
mb_start_daemon
mb_load_bg plain --tenant a --hold 1M
plain=$MB_BG_PID
mb_load_bg idle --tenant b
idle=$MB_BG_PID
mb_wait_holding plain
mb_wait_holding idle
mb_stop_daemon
mb_start_daemon
assert_eq 0 "$(mb_usage a)" "usage after a stop and start without the fd store"
# A client that held nothing carries on with the new daemon's arena.
wait_for 30 mb_has_clients b || fail "the idle client did not reconnect"
mb_finish_load idle "$idle"
rc=0
wait "$plain" || rc=$?
[ $rc -ne 0 ] || fail "the client survived a restart that lost its memory"
pass "without the fd store the client's session ends: $(grep -v 'holding' "$MB_TMP/plain.out" | grep -m1 'membroker-load:')"
