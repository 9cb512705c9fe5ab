#!/bin/bash
# SPDX-License-Identifier: MIT
# Allocation and free from the per-CPU stock make no system call: strace of
# the calling thread (no -f: a library thread may poll the socket meanwhile)
# sees nothing between the two markers around 20000 alloc/free and bulk
# pairs, and does see the daemon traffic of allocating past the stock (the
# control shows the method can fail).  Again with a second thread spinning
# on the loop's CPU until the loop's thread was preempted 300 times: the
# kernel aborts a restartable sequence it preempts, and the retry on the
# same CPU must not enter the kernel either.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"

command -v strace >/dev/null || skip "strace is not installed"
strace -qq -o /dev/null true 2>/dev/null || skip "ptrace is not permitted here"
mb_client_setup

# LeakSanitizer cannot run under ptrace.  Pinned to one CPU: a sequence
# aborted by a migration settles the old CPU's stock with a membarrier(),
# the one system call the rseq fast path may make, and only then.
pin=()
command -v taskset >/dev/null && pin=(taskset -c "$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//')")
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        "${pin[@]}" strace -qq -o "$MB_TMP/trace" "$CLIENT_TOOL" stock-loop app 20000 ||
        fail "client-tool stock-loop failed"

# stock_window TRACE : what the traced thread did between the markers
stock_window() { awk '/close\(-1001\)/{on=1; next} /close\(-1002\)/{on=0} on' "$1"; }

grep -q 'close(-1001)' "$MB_TMP/trace" || fail "start marker not traced"
grep -q 'close(-1002)' "$MB_TMP/trace" || fail "end marker not traced"
between=$(stock_window "$MB_TMP/trace")
if [ -n "$between" ]; then
        echo "$between" | head -20
        fail "system calls on the stock fast path"
fi
pass "no system call in 20000 stock alloc/free pairs"

control=$(awk '/close\(-1002\)/{on=1; next} /close\(-1003\)/{on=0} on' "$MB_TMP/trace")
echo "$control" | grep -Eq 'sendmsg|sendto|write' || fail "no daemon traffic seen past the stock: $control"
pass "allocating past the stock talks to the daemon"

ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        "${pin[@]}" strace -qq -o "$MB_TMP/trace-preempt" "$CLIENT_TOOL" stock-loop app 20000 300 \
        >"$MB_TMP/preempt.out" || fail "client-tool stock-loop (preempted) failed"
grep -q 'close(-1002)' "$MB_TMP/trace-preempt" || fail "end marker not traced (preempted)"
between=$(stock_window "$MB_TMP/trace-preempt")
if [ -n "$between" ]; then
        echo "$between" | head -20
        fail "system calls on the stock fast path of a preempted thread"
fi
pass "no system call in stock alloc/free pairs while preempted $(sed -n 's/preempted=//p' "$MB_TMP/preempt.out") times"
