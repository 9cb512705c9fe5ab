#!/bin/bash
# SPDX-License-Identifier: MIT
# A daemon stopped without the fd store ends every session, but it does not
# hole-punch the pages its clients still map: a client that goes on reading
# what it wrote finds its bytes, as after a crash of the daemon (SIGKILL
# punches nothing either), not zeros under its feet.  The memory goes back
# to the host when the last mapping goes.  A new daemon starts from zero.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant app "Path=app"
mb_start_daemon

wire_bg "$MB_TMP/w.out" --name keeper hello app charge 16 expect-ok write-pages 0xab \
        touch "$MB_TMP/written" wait-file "$MB_TMP/go" check-pages 0xab
keeper=$MB_BG_PID
wait_for 20 test -e "$MB_TMP/written" || { cat "$MB_TMP/w.out"; fail "the client did not write its pages"; }
mb_dump_state
[ "$(mb_state app usage)" -ge 16 ] || fail "app's usage $(mb_state app usage) below the 16 pages charged"

mb_stop_clean
touch "$MB_TMP/go"
rc=0
mb_wait "$keeper" 60 || rc=$?
[ $rc = 0 ] || { cat "$MB_TMP/w.out"; fail "the client's pages changed when the daemon stopped (exit $rc)"; }
pass "the client still reads its 16 pages after the daemon stopped"

mb_start_daemon
mb_dump_state
assert_eq 0 "$(mb_state app usage)" "app's usage in a new daemon"
mb_stop_clean
