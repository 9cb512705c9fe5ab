#!/bin/bash
# SPDX-License-Identifier: MIT
# mb_malloc() and friends on a real daemon: every size from 1 byte to 1 MiB
# (alignment, usable size, contents), calloc/realloc/aligned_alloc,
# foreign pointers refused, threads with remote frees; a large allocation
# (40 MiB) is one contiguous charge that raises the tenant's usage and is returned
# (usage back down) by mb_free(); at the tenant's limit ENOMEM and the
# session goes on; runs a client keeps for reuse are given back when
# another client of the tenant needs them (the shrinker answers Reclaim);
# blocks of MiBs replaced at random are served from the runs freed before
# (neighbours merged, the best fit cut to size) with their contents intact,
# and what the client keeps charged stays within its bound (the most it
# had in use, plus 8 MiB).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

MALLOC_CLIENT="$top_builddir/tests/malloc-client"
mb_write_broker_conf "Capacity=64M" "ChargeBatch=8"
mb_write_tenant app "Path=app" "MemoryMax=64M"
mb_write_tenant small "Path=small" "MemoryMax=1M"
mb_write_tenant mid "Path=mid" "MemoryMax=16M"
mb_start_daemon
export MEMBROKER_SOCKET="$MB_SOCK"

"$MALLOC_CLIENT" sizes app || fail "sizes"
pass "sizes, calloc, realloc, aligned_alloc, foreign pointers"
"$MALLOC_CLIENT" mid app || fail "mid"
pass "blocks of 9/8 of a page straddle pages on multi-page slabs; bad frees refused"
"$MALLOC_CLIENT" threads app 4 300 || fail "threads"
pass "4 threads with remote frees"
"$MALLOC_CLIENT" classes app | tee "$MB_TMP/classes"
grep -q '^kmalloc-8 object_bytes=8 ' "$MB_TMP/classes" || fail "no kmalloc-8"
grep -q '^kmalloc-96 object_bytes=96 ' "$MB_TMP/classes" || fail "no kmalloc-96"
grep -q '^kmalloc-2048 object_bytes=2048 ' "$MB_TMP/classes" || fail "no kmalloc-2048"
grep -q '^kmalloc-1360 object_bytes=1360 ' "$MB_TMP/classes" || fail "no kmalloc-1360"

# 40 MiB (above the 32 MiB of runs kept for reuse): one contiguous run,
# charged and returned as a unit.
mkfifo "$MB_TMP/in"
"$MALLOC_CLIENT" hold app $((40 << 20)) <"$MB_TMP/in" >"$MB_TMP/hold.out" 2>&1 &
holder=$!
MB_CHILDREN+=("$holder")
exec 3<>"$MB_TMP/in"  # read-write: never blocks, whether or not the client opened its end
wait_for 20 grep -q '^held' "$MB_TMP/hold.out" || { cat "$MB_TMP/hold.out"; fail "no allocation"; }
mb_dump_state
usage=$(mb_state app usage)
echo "usage while holding 40 MiB: $usage"
[ "$usage" -ge 10240 ] || fail "usage $usage pages below the 40 MiB (10240 pages) held"
echo >&3
wait_for 20 grep -q '^freed' "$MB_TMP/hold.out" || fail "no free"
# The run goes back at once (the client is still connected).
wait_for 20 eval 'mb_dump_state; [ "$(mb_state app usage)" -lt 256 ]' ||
        fail "usage $(mb_state app usage) after mb_free() of the run"
pass "the run was returned by mb_free(): usage $(mb_state app usage)"
echo >&3
exec 3>&-
mb_wait "$holder" || fail "holder failed"

"$MALLOC_CLIENT" limit small $((2 << 20)) || fail "limit"
mb_dump_state
max=$(mb_event small max)
[ "${max:-0}" -ge 1 ] || fail "max not counted: ${max:-0}"
pass "ENOMEM at the tenant's limit, max=$max counted"
mb_daemon_alive

# A keeps 8 x 1 MiB of freed runs charged (8 MiB of 16); B needs 12 MiB:
# only reclaim of A's kept runs (its shrinker) makes room.
mkfifo "$MB_TMP/kin"
"$MALLOC_CLIENT" keep mid 8 $((1 << 20)) <"$MB_TMP/kin" >"$MB_TMP/keep.out" 2>&1 &
keeper=$!
MB_CHILDREN+=("$keeper")
exec 4<>"$MB_TMP/kin"
wait_for 20 grep -q '^kept' "$MB_TMP/keep.out" || { cat "$MB_TMP/keep.out"; fail "the keeper did not start"; }
mb_dump_state
kept=$(mb_state mid usage)
echo "usage of mid with A's freed runs kept: $kept pages"
[ "$kept" -ge 2048 ] || fail "A did not keep its runs ($kept pages)"
mkfifo "$MB_TMP/hin"
"$MALLOC_CLIENT" hold mid $((12 << 20)) <"$MB_TMP/hin" >"$MB_TMP/hold2.out" 2>&1 &
holder2=$!
MB_CHILDREN+=("$holder2")
exec 5<>"$MB_TMP/hin"
wait_for 30 grep -q '^held' "$MB_TMP/hold2.out" || { cat "$MB_TMP/hold2.out"; fail "B did not get 12 MiB while A kept 8 MiB of freed runs"; }
mb_dump_state
pass "B got 12 MiB: A's kept runs were reclaimed (usage $(mb_state mid usage) pages, max=$(mb_event mid max))"
echo >&5; echo >&5; exec 5>&-
echo >&4; exec 4>&-
mb_wait "$holder2" || fail "B failed"
mb_wait "$keeper" || fail "A failed"

# Blocks of MiBs, replaced at random: contents intact, kept runs within
# the bound, neighbours merged.
mkfifo "$MB_TMP/lin"
"$MALLOC_CLIENT" large app <"$MB_TMP/lin" >"$MB_TMP/large.out" 2>&1 &
large=$!
MB_CHILDREN+=("$large")
exec 6<>"$MB_TMP/lin"
wait_for 60 grep -q '^held' "$MB_TMP/large.out" || { cat "$MB_TMP/large.out"; fail "the large blocks' client failed"; }
cat "$MB_TMP/large.out"
peak=$(sed -n 's/^peak //p' "$MB_TMP/large.out")
grep -q '^merged$' "$MB_TMP/large.out" || grep -q '^note: the two runs were not neighbours' "$MB_TMP/large.out" ||
        fail "no outcome of the merge check"
mb_dump_state
used=$(mb_state app usage)
bound=$(( (peak + 4095) / 4096 + 2048 + 64 ))
echo "usage of app after the large blocks were freed: $used pages (peak in use $(( (peak + 4095) / 4096 )) pages)"
[ "$used" -le "$bound" ] || fail "app keeps $used pages charged, more than the bound of $bound"
pass "large blocks: contents intact, $used pages kept (bound $bound)"
echo >&6; exec 6>&-
mb_wait "$large" || fail "the large blocks' client failed"
