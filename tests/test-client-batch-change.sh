#!/bin/bash
# SPDX-License-Identifier: MIT
# The charge batch follows the tenant while a client is connected:
#  - a tenant with nothing limited up the tree charges 4 x ChargeBatch per
#    trip (nothing limited: no limit can be met, so a larger stock costs nothing);
#  - when a limit appears, the client's next Grant brings the normal batch
#    and its stocks shrink to 2 x batch at once (MemoryCurrent shows it);
#    when the limit goes, the larger batch comes back;
#  - the root's capacity counts too: above half of it the larger batch is
#    not given (many clients' larger stocks would fill it), below a quarter
#    it comes back;
#  - SetTenantLimits ChargeBatch= reaches connected clients the same way, up
#    to the largest batch their Welcome allowed (the stocks' room: 4 x for a
#    tenant with nothing limited, else the batch they attached with).
# Real daemon, real bus, real library (tests/client-tool.c "steps"), the
# client pinned to one CPU so that one stock holds everything.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
# Exact usage after known charges is what this checks: no charging ahead
# of need (tests/test-client-refill.sh covers it).
export MEMBROKER_REFILL=0
# The stock's own bound is what it checks: no spill between the CPUs'
# stocks either (it keeps more far from every limit).
export MEMBROKER_SPILL=0

CLIENT_TOOL="$top_builddir/tests/client-tool"
bus_setup "Capacity=64M" "ChargeBatch=8"
mb_write_tenant free "Path=free"
mb_write_tenant lim "Path=lim" "MemoryMax=16M"
mb_write_tenant big "Path=big"
bus_run
export MEMBROKER_SOCKET="$MB_SOCK"
PAGE=$(mgr_prop PageSize)

# steps_start NAME TENANT STEP... ; steps_line NAME N : wait for output line N
steps_start() {
        local name=$1 tenant=$2; shift 2
        taskset -c 0 "$CLIENT_TOOL" steps "$tenant" "$@" >"$MB_TMP/$name.out" 2>"$MB_TMP/$name.err" &
        LOAD_PID[$name]=$!
        MB_CHILDREN+=($!)
}
steps_line() {
        local name=$1 n=$2
        wait_for 30 eval '[ "$(wc -l <"$MB_TMP/'"$name"'.out")" -ge '"$n"' ]' ||
                { cat "$MB_TMP/$name.err"; fail "client $name did not reach output line $n"; }
        sed -n "${n}p" "$MB_TMP/$name.out"
}

# --- a tenant with nothing limited, then limited, then not -------------------
assert_eq 8 "$(tenant_prop free ChargeBatch)" "ChargeBatch of free (the broker's)"
assert_eq 32 "$(tenant_prop free EffectiveChargeBatch)" "EffectiveChargeBatch of free: 4 x, nothing limited"
assert_eq 8 "$(tenant_prop lim EffectiveChargeBatch)" "EffectiveChargeBatch of lim: limited"
steps_start a free print cycle:1 print "wait:$MB_TMP/go1" cycle:40 print "wait:$MB_TMP/go2" cycle:40 print
assert_eq "batch=32" "$(steps_line a 1)" "the Welcome's batch of a tenant with nothing limited (4 x 8)"
assert_eq "batch=32" "$(steps_line a 2)" "batch after the first charge"
assert_eq $((32 * PAGE)) "$(tenant_prop free MemoryCurrent)" "one charge of 32 pages, all in the stock"

mb_ctl set free MemoryMax=1G >/dev/null || fail "membrokerctl set MemoryMax failed"
touch "$MB_TMP/go1"
assert_eq "batch=8" "$(steps_line a 3)" "the batch once a limit appeared (told by the next Grant)"
cur=$(tenant_prop free MemoryCurrent)
[ "$cur" -le $((2 * 8 * PAGE)) ] || fail "the stock kept $((cur / PAGE)) pages, more than 2 x 8"
pass "the stock shrank to at most 2 x 8 pages ($((cur / PAGE)) pages charged)"

mb_ctl set free MemoryMax=infinity >/dev/null || fail "membrokerctl set MemoryMax=infinity failed"
touch "$MB_TMP/go2"
assert_eq "batch=32" "$(steps_line a 4)" "the larger batch once nothing is limited again"
wait "${LOAD_PID[a]}" || fail "client a failed: $(cat "$MB_TMP/a.err")"
assert_eq 0 "$(tenant_prop free MemoryCurrent)" "MemoryCurrent after client a closed"

# --- the capacity: a holder of 40M (over half of 64M) in another tenant ----
load_start holder big 40M
steps_start d free print cycle:1 "wait:$MB_TMP/go7" cycle:40 print
assert_eq "batch=8" "$(steps_line d 1)" "the batch of a tenant with nothing limited while the root is over half its capacity"
assert_eq 8 "$(tenant_prop free EffectiveChargeBatch)" "EffectiveChargeBatch of free with the root over half full"
load_stop holder
[ "$LOAD_RC" -eq 0 ] || fail "the holder failed (rc $LOAD_RC)"
wait_for 20 eval '[ "$(tenant_prop / MemoryCurrent)" -lt $((16 << 20)) ]' || fail "the root did not go below a quarter"
touch "$MB_TMP/go7"
assert_eq "batch=32" "$(steps_line d 2)" "the larger batch once the root is below a quarter of its capacity"
wait "${LOAD_PID[d]}" || fail "client d failed: $(cat "$MB_TMP/d.err")"

# --- a smaller batch trims the stocks of every CPU, not only the charging one
if [ "$(nproc)" -ge 2 ]; then
        steps_start c free "cpu:0" cycle:1 print "wait:$MB_TMP/go5" "cpu:1" cycle:1 print "wait:$MB_TMP/go6"
        assert_eq "batch=32" "$(steps_line c 1)" "batch with nothing limited"
        assert_eq $((32 * PAGE)) "$(tenant_prop free MemoryCurrent)" "CPU 0's stock holds one batch of 32"
        mb_ctl set free MemoryMax=1G >/dev/null || fail "membrokerctl set MemoryMax failed"
        touch "$MB_TMP/go5"
        assert_eq "batch=8" "$(steps_line c 2)" "batch after the limit, charged from CPU 1"
        cur=$(tenant_prop free MemoryCurrent)
        # CPU 1 charged 32 (asked before it knew) and kept 2 x 8; CPU 0's 32
        # must have been trimmed to 2 x 8 too.
        [ "$cur" -le $((2 * 2 * 8 * PAGE)) ] ||
                fail "the stocks kept $((cur / PAGE)) pages, more than 2 CPUs x 2 x 8 (CPU 0's stock not trimmed)"
        [ "$cur" -gt 0 ] || fail "nothing charged while client c still runs"
        pass "both CPUs' stocks within 2 x 8 pages ($((cur / PAGE)) pages charged)"
        touch "$MB_TMP/go6"
        wait "${LOAD_PID[c]}" || fail "client c failed: $(cat "$MB_TMP/c.err")"
        mb_ctl set free MemoryMax=infinity >/dev/null
else
        echo "one CPU: the trimming of another CPU's stock is not exercised here"
fi

# --- ChargeBatch= changed at run time ----------------------------------------
steps_start b lim print cycle:1 "wait:$MB_TMP/go3" cycle:20 print "wait:$MB_TMP/go4" cycle:20 print
assert_eq "batch=8" "$(steps_line b 1)" "the Welcome's batch of a limited tenant (ChargeBatch=8)"
wait_for 30 eval '[ "$(tenant_prop lim MemoryCurrent)" = '$((8 * PAGE))' ]' ||
        fail "lim: MemoryCurrent $(tenant_prop lim MemoryCurrent), expected one batch of 8 pages"
pass "one charge of 8 pages"

mb_ctl set lim ChargeBatch=2 >/dev/null || fail "membrokerctl set ChargeBatch=2 failed"
touch "$MB_TMP/go3"
assert_eq "batch=2" "$(steps_line b 2)" "the batch after ChargeBatch=2"
cur=$(tenant_prop lim MemoryCurrent)
[ "$cur" -le $((2 * 2 * PAGE)) ] || fail "the stock kept $((cur / PAGE)) pages, more than 2 x 2"
pass "the stock holds at most 2 x 2 pages ($((cur / PAGE)) pages charged)"

mb_ctl set lim ChargeBatch=64 >/dev/null || fail "membrokerctl set ChargeBatch=64 failed"
touch "$MB_TMP/go4"
assert_eq "batch=8" "$(steps_line b 3)" "a larger ChargeBatch stops at the batch the client attached with"
wait "${LOAD_PID[b]}" || fail "client b failed: $(cat "$MB_TMP/b.err")"
assert_eq 0 "$(tenant_prop lim MemoryCurrent)" "MemoryCurrent after client b closed"
