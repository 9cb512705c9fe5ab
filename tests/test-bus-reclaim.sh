#!/bin/bash
# SPDX-License-Identifier: MIT
# Reclaim(path, bytes) answers asynchronously with the bytes reclaimed, never
# more than asked, from the Manager and from the Tenant object; the bus keeps
# serving other calls meanwhile.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a"
bus_run
load_start a app/a 2M

out=$(mgr_call Reclaim st app/a $((1 << 20)))
case "$out" in "t "[0-9]*) ;; *) fail "Reclaim reply: $out" ;; esac
got=${out#t }
[ "$got" -le $((1 << 20)) ] || fail "reclaimed $got > requested"
pass "Manager.Reclaim -> $got bytes"

out=$(mb_busctl call "$BUS_DEST" "$(tenant_object app)" "$BUS_TENANT_IFACE" Reclaim t 4096)
case "$out" in "t "[0-9]*) ;; *) fail "Tenant.Reclaim reply: $out" ;; esac
[ "${out#t }" -le 4096 ] || fail "reclaimed ${out#t } > requested"
pass "Tenant.Reclaim -> ${out#t } bytes"

# Many at once, interleaved with reads: every call gets its own answer.
pids=()
for i in $(seq 1 10); do
        mgr_call Reclaim st app/a 4096 >"$MB_TMP/r$i.out" 2>&1 &
        pids+=($!)
        mgr_call GetStat s app/a >"$MB_TMP/s$i.out" 2>&1 &
        pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent call failed"; done
for i in $(seq 1 10); do
        grep -q '^t [0-9]' "$MB_TMP/r$i.out" || fail "Reclaim $i: $(cat "$MB_TMP/r$i.out")"
        grep -q '^a(st) ' "$MB_TMP/s$i.out" || fail "GetStat $i: $(cat "$MB_TMP/s$i.out")"
done
pass "10 concurrent Reclaim calls and 10 reads answered"
