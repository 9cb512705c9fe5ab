#!/bin/bash
# SPDX-License-Identifier: MIT
# A connection whose opener is already dead when the daemon takes it is
# refused: the opener connects and hands its socket to a child, which sends
# a Hello once the opener has exited; the daemon, stopped meanwhile so that
# it accepts only then, answers with an ESRCH Error and closes.  A session
# must be tied to a live process (its pidfd) from the start.
# Run twice: with SO_PEERPIDFD, and with the pidfd_open() fallback of
# kernels before 6.5 (MEMBROKERD_NO_PEERPIDFD=1), which also ends a handed
# off session with its opener.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant a "Path=a"

for mode in SO_PEERPIDFD pidfd_open; do
        echo "--- $mode"
        if [ $mode = pidfd_open ]; then export MEMBROKERD_NO_PEERPIDFD=1; else unset MEMBROKERD_NO_PEERPIDFD; fi
        mb_start_daemon
        rm -f "$MB_TMP/child.pid"

        kill -STOP "$MB_DAEMON_PID"
        "$WIRE_CLIENT" --socket "$MB_SOCK" --name orphan handoff "$MB_TMP/child.pid" hello a charge 1 expect-ok \
                >"$MB_TMP/orphan.out" 2>&1 || true
        wait_for 20 test -s "$MB_TMP/child.pid" || { kill -CONT "$MB_DAEMON_PID"; fail "no child"; }
        child=$(cat "$MB_TMP/child.pid")
        MB_CHILDREN+=("$child")
        # The opener has exited (and was reaped by this shell); the child
        # waits for the daemon's answer to its Hello.
        wait_for 20 grep -q '^handed off' "$MB_TMP/orphan.out" ||
                { kill -CONT "$MB_DAEMON_PID"; fail "no hand-off"; }
        kill -CONT "$MB_DAEMON_PID"

        wait_for 60 eval '! kill -0 '"$child"' 2>/dev/null' || fail "the child still waits for an answer"
        cat "$MB_TMP/orphan.out"
        grep -q '^error code=ESRCH' "$MB_TMP/orphan.out" ||
                fail "the Hello of a dead opener was not refused with ESRCH ($mode)"
        ! grep -q '^welcome' "$MB_TMP/orphan.out" || fail "a connection whose opener is dead was admitted ($mode)"
        mb_dump_state
        assert_eq 1 "$(mb_dump_field connections refused_exited)" "connections of exited processes refused ($mode)"
        pass "a connection whose opener died before the daemon took it is refused ($mode)"

        # A live opener that hands its session over and exits.
        rm -f "$MB_TMP/child.pid"
        "$WIRE_CLIENT" --socket "$MB_SOCK" --name handing hello a charge 64 expect-ok handoff "$MB_TMP/child.pid" \
                read-error expect-error ESRCH expect-close >"$MB_TMP/handing.out" 2>&1 || true
        wait_for 20 test -s "$MB_TMP/child.pid" || fail "no child"
        MB_CHILDREN+=("$(cat "$MB_TMP/child.pid")")
        usage_is_zero() { mb_dump_state; [ "$(mb_state a usage)" = 0 ]; }
        wait_for 30 usage_is_zero || fail "the session outlived its opener ($mode)"
        wait_for 30 grep -q '^closed' "$MB_TMP/handing.out" || { cat "$MB_TMP/handing.out"; fail "not closed"; }
        pass "a session handed to another process ends with its opener ($mode)"

        out=$(wire --name alive hello a charge 1 expect-ok) || { echo "$out"; fail "a live client cannot attach"; }
        mb_daemon_alive
        mb_stop_clean
        mv "$MB_TMP/daemon.log" "$MB_TMP/daemon-$mode.log"
done
