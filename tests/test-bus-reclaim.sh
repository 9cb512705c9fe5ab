#!/bin/bash
# SPDX-License-Identifier: MIT
# Reclaim(path, bytes) answers asynchronously with the bytes reclaimed, never
# more than asked, from the Manager and from the Tenant object, or with
# org.membroker1.Error.Again naming the bytes got when it could not get all
# (memory.reclaim's EAGAIN); the bus keeps serving other calls meanwhile.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
# What the stock alone can give back is part of what this checks: no
# charging ahead of need (tests/test-client-refill.sh covers it).
export MEMBROKER_REFILL=0

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a"
bus_run
load_start a app/a 2M

# The client has no cache: its stock comes back, then EAGAIN.
out=$(reclaim_call app/a $((1 << 20)))
case "$out" in "again "[0-9]*) ;; *) fail "Reclaim reply: $out" ;; esac
got=${out#again }
[ "$got" -lt $((1 << 20)) ] || fail "reclaimed $got >= requested, yet EAGAIN"
pass "Manager.Reclaim -> EAGAIN after $got bytes"
assert_eq org.membroker1.Error.Again "$(error_name "${DSEND[@]}" "$(tenant_object app)" "$BUS_TENANT_IFACE.Reclaim" \
        uint64:$((1 << 20)))" "Tenant.Reclaim of more than can be reclaimed"

out=$(mb_busctl call "$BUS_DEST" "$(tenant_object app)" "$BUS_TENANT_IFACE" Reclaim t 0)
assert_eq "t 0" "$out" "Tenant.Reclaim of nothing"

# Many at once, interleaved with reads: every call gets its own answer.
pids=()
for i in $(seq 1 10); do
        mgr_call Reclaim st app/a 4096 >"$MB_TMP/r$i.out" 2>&1 &
        pids+=($!)
        mgr_call GetStat s app/a >"$MB_TMP/s$i.out" 2>&1 &
        pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
for i in $(seq 1 10); do
        grep -q "^t [0-9]\|Reclaimed [0-9]* of 4096 bytes" "$MB_TMP/r$i.out" || fail "Reclaim $i: $(cat "$MB_TMP/r$i.out")"
        grep -q '^a(st) ' "$MB_TMP/s$i.out" || fail "GetStat $i: $(cat "$MB_TMP/s$i.out")"
done
pass "10 concurrent Reclaim calls and 10 reads answered"
