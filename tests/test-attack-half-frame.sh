#!/bin/bash
# SPDX-License-Identifier: MIT
# A client that starts a frame and never finishes it, or that never says
# Hello, is closed once FrameTimeoutSec= has passed: it gets an ETIMEDOUT
# Error and the connection is closed, each expiry counted in a log line.
# The deadline counts from the frame's first byte: a byte now and then does
# not extend it.  The daemon and its other clients go on.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

mb_write_broker_conf "Capacity=64M" "FrameTimeoutSec=2"
mb_write_tenant a "Path=a"
mb_start_daemon

# An honest client attached for the whole test.
wire_bg "$MB_TMP/honest.out" --name honest hello a charge 4 expect-ok hold
honest=$MB_BG_PID
wait_for 20 grep -q '^ready' "$MB_TMP/honest.out" || fail "the honest client did not attach"

# Half a frame after Hello, then silence.
out=$(timeout -s KILL 30 "$WIRE_CLIENT" --socket "$MB_SOCK" --name half hello a charge 2 expect-ok \
        send-header 100 send-hex 0a0b0c0d0e read-error expect-error ETIMEDOUT expect-close) ||
        { echo "$out"; fail "half a frame after Hello: not closed with ETIMEDOUT"; }
echo "$out"
grep -q 'reason=.*not finished within 2 s' <<<"$out" || fail "the reason does not name the timeout"
pass "half a frame after Hello: Error ETIMEDOUT and closed"

# No Hello at all.
out=$(timeout -s KILL 30 "$WIRE_CLIENT" --socket "$MB_SOCK" --name silent read-error expect-error ETIMEDOUT expect-close) ||
        { echo "$out"; fail "no Hello: not closed with ETIMEDOUT"; }
echo "$out"
pass "no Hello: Error ETIMEDOUT and closed"

# Half a Hello, then silence.
out=$(timeout -s KILL 30 "$WIRE_CLIENT" --socket "$MB_SOCK" --name halfhello send-header 40 send-hex 0801 \
        read-error expect-error ETIMEDOUT expect-close) || { echo "$out"; fail "half a Hello: not closed"; }
pass "half a Hello: Error ETIMEDOUT and closed"

# One byte every 500 ms of a 1000-byte frame (a whole frame would take 500 s):
# the deadline does not move with each byte.
out=$(timeout -s KILL 30 "$WIRE_CLIENT" --socket "$MB_SOCK" --name trickle hello a trickle 1000 500) ||
        { echo "$out"; fail "the trickling client failed"; }
echo "$out"
n=$(sed -n 's/^trickle closed after \([0-9]*\) bytes$/\1/p' <<<"$out")
[ -n "$n" ] && [ "$n" -lt 1000 ] || fail "the trickling client was not closed ($out)"
pass "a frame trickled byte by byte is closed at the deadline"

# The same before Hello.
out=$(timeout -s KILL 30 "$WIRE_CLIENT" --socket "$MB_SOCK" --name trickle2 trickle 1000 500) ||
        { echo "$out"; fail "the trickling client failed"; }
n=$(sed -n 's/^trickle closed after \([0-9]*\) bytes$/\1/p' <<<"$out")
[ -n "$n" ] && [ "$n" -lt 1000 ] || fail "the trickling client before Hello was not closed ($out)"
pass "a Hello trickled byte by byte is closed at the deadline"

# Each expiry is counted.
mb_dump_state
grep '^state: connections' "$MB_TMP/state.dump"
[ "$(mb_dump_field connections hello_timeouts)" -ge 3 ] || fail "Hello timeouts are not counted"
[ "$(mb_dump_field connections frame_timeouts)" -ge 2 ] || fail "frame timeouts are not counted"

# The honest client was untouched: it still charges.
kill -0 "$honest" || fail "the honest client is gone"
out=$(wire --name after hello a charge 2 expect-ok) || { echo "$out"; fail "a new client cannot attach"; }
kill -TERM "$honest"
wait "$honest" || fail "the honest client failed"
mb_dump_state
assert_eq 0 "$(mb_state a usage)" "usage after the clients left"
mb_daemon_alive
mb_stop_clean
