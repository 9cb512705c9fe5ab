#!/bin/bash
# SPDX-License-Identifier: MIT
# The shim's per-thread caches (tests/tcache-client under membroker-run):
# the answers are glibc's; the blocks a thread cached go back when it
# exits (the tenant's slab bytes fall back, they do not grow with every
# thread that came and went); and a thread that meets its tenant's limit
# first gives its own cache back, so that the blocks it cached cost it
# nothing at the limit.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/preload-lib.sh"
preload_check
TC="$top_builddir/tests/tcache-client"
K=1024

bus_setup "Capacity=1G"
mb_write_tenant t "Path=t" "MemoryMax=256M"
mb_write_tenant lim "Path=lim" "MemoryMax=2M"
bus_run

# tc_start TENANT : tcache-client under membroker-run, driven by tc
tc_start() {
        coproc TCP { mbrun "$1" "$TC" 2>"$MB_TMP/tc.err"; }
        TC_PID=$TCP_PID
}
# tc COMMAND... : one command, its answer in $REPLY_TC
tc() {
        echo "$*" >&"${TCP[1]}"
        read -r -t 120 REPLY_TC <&"${TCP[0]}" || fail "tcache-client did not answer '$*' ($(cat "$MB_TMP/tc.err"))"
        echo "> $*: $REPLY_TC"
}
tc_stop() {
        exec {TCP[1]}>&-
        wait "$TC_PID" || fail "tcache-client failed ($(cat "$MB_TMP/tc.err"))"
}

# 1. Eight threads, one after the other, each caching 2000 blocks of 64
# bytes (125 KiB) when it frees them.
expect=$(echo "threads 8 2000 64" | "$TC") || fail "tcache-client under glibc"
tc_start t
tc threads 8 2000 64
assert_eq "$expect" "$REPLY_TC" "the answer under membroker-run"
# Each exited thread's cache went back to the per-CPU lists, which hold
# at most 64 KiB of the class per CPU: without the exit, 8 x 125 KiB stay.
bound=$(( $(nproc) * 64 * K + 64 * K ))
wait_for 20 eval '[ "$(stat_value t slab_unreclaimable)" -le '"$bound"' ]' ||
        fail "slab_unreclaimable $(stat_value t slab_unreclaimable) after the threads exited (bound $bound)"
pass "the exited threads' caches went back: slab_unreclaimable $(stat_value t slab_unreclaimable) <= $bound"
tc_stop

# 2. At the limit: what a fresh program gets in blocks of 2 KiB ...
tc_start lim
tc until 2048
fresh=${REPLY_TC#ok }
[ "$REPLY_TC" = "ok $fresh" ] || fail "until: $REPLY_TC"
tc_stop
# ... a program whose thread cached 256 KiB of 64-byte blocks gets too
# (within 64 KiB): the cache went back before the limit said no.
tc_start lim
tc fill 4096 64
[ "${REPLY_TC%% *}" = ok ] || fail "fill: $REPLY_TC"
tc until 2048
after=${REPLY_TC#ok }
[ "$REPLY_TC" = "ok $after" ] || fail "until: $REPLY_TC"
tc_stop
echo "2 KiB blocks at MemoryMax=2M: $fresh bytes fresh, $after after caching 256 KiB"
[ "$after" -ge $((fresh - 64 * K)) ] ||
        fail "the thread's cache stayed pinned at the limit: $after bytes, $fresh fresh"
pass "at the limit the thread's cache went back: $after bytes, $fresh fresh"
