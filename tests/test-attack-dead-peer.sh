#!/bin/bash
# SPDX-License-Identifier: MIT
# A connection whose opener is already dead when the daemon takes it is
# refused: the opener connects and hands its socket to a child, which sends
# a Hello once the opener has exited; the daemon, stopped meanwhile so that
# it accepts only then, answers with an ESRCH Error and closes.  A session
# must be tied to a live process (its pidfd) from the start.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant a "Path=a"
mb_start_daemon

kill -STOP "$MB_DAEMON_PID"
"$WIRE_CLIENT" --socket "$MB_SOCK" --name orphan handoff "$MB_TMP/child.pid" hello a charge 1 expect-ok \
        >"$MB_TMP/orphan.out" 2>&1 || true
wait_for 20 test -s "$MB_TMP/child.pid" || { kill -CONT "$MB_DAEMON_PID"; fail "no child"; }
child=$(cat "$MB_TMP/child.pid")
MB_CHILDREN+=("$child")
# The opener has exited (and was reaped by this shell); the child waits for
# the daemon's answer to its Hello.
wait_for 20 grep -q '^handed off' "$MB_TMP/orphan.out" || { kill -CONT "$MB_DAEMON_PID"; fail "no hand-off"; }
kill -CONT "$MB_DAEMON_PID"

wait_for 60 eval '! kill -0 '"$child"' 2>/dev/null' || fail "the child still waits for an answer"
cat "$MB_TMP/orphan.out"
grep -q '^error code=ESRCH' "$MB_TMP/orphan.out" || fail "the Hello of a dead opener was not refused with ESRCH"
! grep -q '^welcome' "$MB_TMP/orphan.out" || fail "a connection whose opener is dead was admitted"
pass "a connection whose opener died before the daemon took it is refused"

mb_dump_state
assert_eq 0 "$(mb_state a usage)" "usage"
out=$(wire --name alive hello a charge 1 expect-ok) || { echo "$out"; fail "a live client cannot attach"; }
mb_daemon_alive
mb_stop_clean
