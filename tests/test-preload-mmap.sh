#!/bin/bash
# SPDX-License-Identifier: MIT
# A program that maps its own memory (tests/mmap-client) under
# membroker-run: its private anonymous mappings are the tenant's, read
# through the bus (stat anon_mmap, MemoryPeak, GetEvents).  Charged when
# writable (mmap, mprotect of a PROT_NONE reservation, mremap growth, a
# MAP_FIXED mapping over a reservation), uncharged when they go (munmap,
# partial munmap, a MAP_FIXED mapping over a charged part only replaces
# it), not charged for PROT_NONE or MAP_NORESERVE; a fork() child's munmap
# leaves the parent's charge alone.  At MemoryMax= mmap() fails with ENOMEM
# after reclaim (max and oom counted, the peak never above the limit) and
# membroker-run says which limit refused how much; a program that writes
# malloc()'s NULL dies of SIGSEGV with that line on stderr; OOMPolicy=kill
# kills; MemoryHigh= throttles (high counted, throttle_usec).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/preload-lib.sh"
preload_check
MC="$top_builddir/tests/mmap-client"
M=1048576

bus_setup "Capacity=1G"
mb_write_tenant lim "Path=lim" "MemoryMax=64M"
mb_write_tenant kill "Path=kill" "MemoryMax=64M" "OOMPolicy=kill"
mb_write_tenant high "Path=high" "MemoryHigh=16M"
bus_run

# mc_start TENANT : mmap-client under membroker-run, driven by mc
mc_start() {
        coproc MCP { mbrun "$1" "$MC" 2>"$MB_TMP/mc.err"; }
        MC_PID=$MCP_PID
}
# mc COMMAND... : one command, its answer in $REPLY_MC
mc() {
        echo "$*" >&"${MCP[1]}"
        read -r -t 120 REPLY_MC <&"${MCP[0]}" || fail "mmap-client did not answer '$*' ($(cat "$MB_TMP/mc.err"))"
        echo "> $*: $REPLY_MC"
}
mc_ok() { mc "$@"; [ "$REPLY_MC" = ok ] || fail "'$*' answered '$REPLY_MC'"; }
# anon_is TENANT MIB : the tenant's anon_mmap becomes MIB MiB
anon_is() {
        wait_for 20 eval '[ "$(stat_value '"$1"' anon_mmap)" = $(('"$2"' * M)) ]' ||
                fail "anon_mmap of $1 is $(stat_value "$1" anon_mmap), not $2 MiB"
        pass "anon_mmap of $1 = $2 MiB"
}

mc_start lim
mc_ok map a $((16 * M))
anon_is lim 16
cur=$(tenant_prop lim MemoryCurrent)
[ "$cur" -ge $((16 * M)) ] || fail "MemoryCurrent $cur does not count the mapping"
pass "MemoryCurrent counts the mapping ($cur)"
# A reservation: 1 GiB of PROT_NONE under a 64M limit, not charged ...
mc_ok map r $((1024 * M)) none
anon_is lim 16
# ... until a part of it becomes writable (mprotect_fixup()).
mc_ok protect r 0 $((8 * M)) rw
anon_is lim 24
# MAP_FIXED over a charged part replaces it (net nothing), over the
# reservation charges.
mc_ok fixed r 0 $((4 * M))
anon_is lim 24
mc_ok fixed r $((8 * M)) $((4 * M))
anon_is lim 28
# Read-only again keeps the charge, as the commit charge stays.
mc_ok protect r 0 $((4 * M)) ro
anon_is lim 28
# The tail of a goes, then what is left grows by mremap.
mc_ok unmap a $((8 * M)) $((8 * M))
anon_is lim 20
mc_ok remap a $((32 * M))
anon_is lim 44
# MAP_NORESERVE: the program asked for no commitment.
mc_ok map nr $((4 * M)) noreserve
anon_is lim 44
# A fork() child's munmap of its copy leaves the parent's charge.
mc_ok fork-unmap a
anon_is lim 44
# Beyond the limit: ENOMEM after reclaim.
mc fill $((64 * M)) $M
case $REPLY_MC in
"err ENOMEM "*) ;;
*) fail "mapping 64 MiB more under MemoryMax=64M answered '$REPLY_MC'" ;;
esac
mapped=${REPLY_MC#err ENOMEM }
[ "$mapped" -lt $((20 * M)) ] || fail "mapped $mapped bytes beyond 44 MiB under MemoryMax=64M"
pass "mmap() failed with ENOMEM at MemoryMax=64M after $((mapped / M)) MiB more"
max=$(events_value lim max); oom=$(events_value lim oom)
[ "$max" -ge 1 ] && [ "$oom" -ge 1 ] || fail "events max=$max oom=$oom not counted"
peak=$(tenant_prop lim MemoryPeak)
[ "$peak" -le $((64 * M)) ] || fail "MemoryPeak $peak is above MemoryMax=64M"
[ "$peak" -ge $((60 * M)) ] || fail "MemoryPeak $peak does not reach the limit"
pass "max=$max oom=$oom counted, MemoryPeak $peak within MemoryMax="
mc_ok unmap r
anon_is lim $((44 - 12 + mapped / M)) # r had 12 MiB charged
echo quit >&"${MCP[1]}"
mb_wait "$MC_PID" || fail "mmap-client did not exit"
cat "$MB_TMP/mc.err"
grep -q "^membroker-run: tenant lim refused 1 request for memory (the largest: 1 MiB by mmap): .*MemoryMax=64 MiB" \
        "$MB_TMP/mc.err" || fail "no line on stderr about the refusal"
pass "membroker-run said at exit which limit refused how much"
wait_for 20 eval '[ "$(tenant_prop lim MemoryCurrent)" = 0 ] && [ "$(stat_value lim anon_mmap)" = 0 ]' ||
        fail "lim keeps $(tenant_prop lim MemoryCurrent) bytes after the program exited"
pass "everything returned at exit"

# --verbose: every refusal as it happens.
out=$(printf 'fill %d %d\nquit\n' $((128 * M)) $((8 * M)) |
      "$MEMBROKER_RUN" --verbose --socket "$MB_SOCK" --tenant lim -- "$MC" 2>"$MB_TMP/v.err")
cat "$MB_TMP/v.err"
case $out in "err ENOMEM "*) ;; *) fail "fill answered '$out'" ;; esac
grep -q "^membroker-run: mmap of 8 MiB refused: charge of 8 MiB (2048 pages) to lim failed: lim at max: .*MemoryMax=64 MiB" \
        "$MB_TMP/v.err" || fail "--verbose did not say the refusal"
pass "--verbose says each refusal"

# A program that does not check malloc()'s NULL: SIGSEGV, explained.
rc=0
echo "nocheck $((100 * M))" | mbrun lim "$MC" 2>"$MB_TMP/segv.err" || rc=$?
cat "$MB_TMP/segv.err"
[ $rc = $((128 + 11)) ] || fail "the unchecked NULL ended with $rc, not SIGSEGV"
grep -q "^membroker-run: tenant lim refused 1 request for memory (the largest: 100 MiB by malloc): .*MemoryMax=64 MiB" \
        "$MB_TMP/segv.err" || fail "the SIGSEGV is not explained on stderr"
pass "SIGSEGV after a refused malloc() is explained"

# OOMPolicy=kill: the program is killed.
rc=0
echo "fill $((128 * M)) $M" | mbrun kill "$MC" >/dev/null 2>&1 || rc=$?
[ $rc = $((128 + 9)) ] || fail "under OOMPolicy=kill the program ended with $rc, not SIGKILL"
kills=$(events_value kill oom_kill)
[ "$kills" -ge 1 ] || fail "oom_kill=$kills"
pass "OOMPolicy=kill killed it (oom_kill=$kills)"
wait_for 20 eval '[ "$(tenant_prop kill MemoryCurrent)" = 0 ]' || fail "kill keeps memory after the kill"

# MemoryHigh=16M: 20 MiB are mapped, throttled on the way (the penalty
# grows with the overage, as mem_cgroup_handle_over_high()'s does).
out=$(printf 'fill %d %d\nquit\n' $((20 * M)) $M | mbrun high "$MC")
assert_eq "ok $((20 * M))" "$out" "20 MiB mapped over MemoryHigh=16M"
high=$(events_value high high)
[ "$high" -ge 1 ] || fail "high=$high"
wait_for 20 eval '[ "$(stat_value high throttle_usec)" -gt 0 ]' || fail "no throttle_usec over MemoryHigh="
pass "high=$high counted, throttled $(stat_value high throttle_usec) us"
