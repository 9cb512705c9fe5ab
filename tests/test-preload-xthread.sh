#!/bin/bash
# SPDX-License-Identifier: MIT
# One thread allocates small blocks, another frees them (bench-patterns
# xthread, a plain libc program, under membroker-run on two CPUs): the
# output is glibc's, and what the freeing CPU gives up reaches the
# allocating CPU inside the client -- the slab caches' barn passes the
# objects, the stocks' spill passes the pages -- instead of going back to
# the daemon and being charged again: the tenant sees a few hundred
# charges, not the thousands of a batch per 64 pages the program churns
# through (2 GiB of blocks).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/preload-lib.sh"

preload_check
[ "$(nproc)" -ge 2 ] || skip "one CPU: a producer and a consumer never run on two"
PATTERNS="$top_builddir/bench/bench-patterns"
[ -x "$PATTERNS" ] || fail "no $PATTERNS"

mb_write_broker_conf "Capacity=2G"
mb_write_tenant t "Path=t" "MemoryMax=1G"
mb_start_daemon

expect=$("$PATTERNS" xthread 1) || fail "bench-patterns xthread failed under glibc"
got=$(mbrun t "$PATTERNS" xthread 1) || fail "bench-patterns xthread failed under membroker-run"
assert_eq "$expect" "$got" "the output under membroker-run"
usage_back_to_zero t
mb_dump_state
charges=$(mb_state t charge_requests)
echo "charge requests of the run: $charges"
[ "$charges" -lt 500 ] || fail "$charges charges: the freed pages went back to the daemon and came again"
pass "xthread under membroker-run: glibc's output, $charges charges"
