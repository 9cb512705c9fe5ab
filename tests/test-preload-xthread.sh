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
# Far from every limit the spill also keeps what a CPU frees in a burst
# for that CPU, so a producer and a consumer time-sliced on one CPU (a
# machine busy with a parallel make check) pass pages too.  Still, the
# program runs at a higher priority (nice -10: a non-root run only warns
# and runs it as it is) and the best of three runs counts, so that other
# work cannot decide (without the barn and the spill every run takes some
# 1,400 charges).
best=
for run in 1 2 3; do
        before=0
        if [ "$run" -gt 1 ]; then
                mb_dump_state
                before=$(mb_state t charge_requests)
        fi
        got=$(nice -n -10 "$MEMBROKER_RUN" --socket "$MB_SOCK" --tenant t -- "$PATTERNS" xthread 1) || fail "bench-patterns xthread failed under membroker-run"
        assert_eq "$expect" "$got" "the output under membroker-run (run $run)"
        usage_back_to_zero t
        mb_dump_state
        charges=$(( $(mb_state t charge_requests) - before ))
        echo "run $run: $charges charge requests"
        if [ -z "$best" ] || [ "$charges" -lt "$best" ]; then best=$charges; fi
        [ "$best" -lt 500 ] && break
done
[ "$best" -lt 500 ] || fail "$best charges at best: the freed pages went back to the daemon and came again"
pass "xthread under membroker-run: glibc's output, $best charges"
