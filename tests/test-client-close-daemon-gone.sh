#!/bin/bash
# SPDX-License-Identifier: MIT
# A client whose daemon went away (no fd store: it will not come back) keeps
# trying to reconnect for MEMBROKER_RECONNECT_TIMEOUT_SEC; closing it
# (mb_close() on SIGTERM in membroker-load) gives up at once instead of
# waiting out that timeout, here ten minutes.
. "$top_srcdir/tests/lib.sh"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant app "Path=app"
mb_start_daemon

MEMBROKER_RECONNECT_TIMEOUT_SEC=600 "$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant app --hold 1M \
        >"$MB_TMP/load.out" 2>&1 &
load=$!
MB_CHILDREN+=("$load")
wait_for 20 grep -q holding "$MB_TMP/load.out" || { cat "$MB_TMP/load.out"; fail "the client did not fill its pages"; }

kill -KILL "$MB_DAEMON_PID"
wait "$MB_DAEMON_PID" 2>/dev/null || true
MB_DAEMON_PID=
sleep 1 # the client's thread is in its reconnect loop by now
kill -0 "$load" 2>/dev/null || { cat "$MB_TMP/load.out"; fail "the client died with its daemon"; }

kill -TERM "$load"
wait_for 30 eval '! mb_running "$load"' || { cat "$MB_TMP/load.out"; fail "the client still waits for a daemon that is gone"; }
wait "$load" 2>/dev/null || true
cat "$MB_TMP/load.out"
pass "mb_close() gave up reconnecting at once"
