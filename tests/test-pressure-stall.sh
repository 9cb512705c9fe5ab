#!/bin/bash
# SPDX-License-Identifier: MIT
# memory.pressure of tenants (kernel/sched/psi.c): a client throttled over
# its tenant's MemoryHigh stalls, so the tenant's `some` total grows, in
# the tenant and in every ancestor, and its avg10 rises and then falls back;
# `full` stays 0 while the other client of that tenant does not wait, and
# equals `some` in a tenant whose only client stalls; a tenant whose client
# never waits shows 0.  Read over the bus (GetPressure, GetPressureText in
# the kernel's layout) and with membrokerctl.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"
# Exact charges: no charging ahead (a charge ahead never waits anyway).
export MEMBROKER_REFILL=0

pr_setup
mb_write_tenant slow "Path=work/slow" "MemoryHigh=2M" # 512 pages
mb_write_tenant solo "Path=work/solo" "MemoryHigh=2M"
mb_write_tenant calm "Path=calm"
bus_run

# pressure_text PATH : GetPressureText as real lines
pressure_text() {
        local raw
        raw=$(mgr_call GetPressureText s "$1")
        raw=${raw#s \"}
        raw=${raw%\"}
        printf '%b' "$raw"
}
# pressure PATH KIND FIELD : one figure (avg10 avg60 avg300 total)
pressure() {
        pressure_text "$1" | awk -v k="$2" -v f="$3" '$1 == k {
                for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) { print kv[2]; found = 1 } } }
                END { exit !found }'
}
# avg_above PATH KIND HUNDREDTHS : the avg10 is above that
avg_above() { [ "$(pressure "$1" "$2" avg10 | tr -d .)" -gt "$3" ]; }
avg_below() { [ "$(pressure "$1" "$2" avg10 | tr -d .)" -lt "$3" ]; }

pc_start s1 work/slow
pc_start s2 work/slow
pc_start o1 work/solo
pc_start c1 calm

for p in / work work/slow work/solo calm; do
        text=$(pressure_text "$p")
        assert_eq "some avg10=0.00 avg60=0.00 avg300=0.00 total=0
full avg10=0.00 avg60=0.00 avg300=0.00 total=0" "$text" "memory.pressure of $p before any stall"
done

# c1 charges under no limit: trips to the daemon answered at once.
assert_eq "alloc ok 600" "$(pc c1 alloc 600)" "calm: 600 pages, no limit"
# s1 and o1 charge beyond high with nothing to reclaim: throttled.
assert_eq "alloc ok 600" "$(pc s1 alloc 600)" "work/slow: s1 88 pages over high"
assert_eq "alloc ok 600" "$(pc o1 alloc 600)" "work/solo: 88 pages over high"
settle 1.2
mb_dump_state
[ "$(mb_state work/slow throttle_usec)" -gt 0 ] || fail "s1 was not throttled"

some_slow=$(pressure work/slow some total)
[ "$some_slow" -gt 0 ] || fail "work/slow shows no some stall: $(pressure_text work/slow)"
# The throttle is part of the stall (the reclaim passes before it too).
[ "$some_slow" -ge "$(mb_state work/slow throttle_usec)" ] ||
        fail "work/slow: some total $some_slow < throttle_usec $(mb_state work/slow throttle_usec)"
pass "work/slow some total=$some_slow us after the throttle"
assert_eq 0 "$(pressure work/slow full total)" "work/slow full total (s2 never waited)"
some_solo=$(pressure work/solo some total)
[ "$some_solo" -gt 0 ] || fail "work/solo shows no some stall"
text=$(pressure_text work/solo)
assert_eq "$(sed -n 's/^some //p' <<<"$text")" "$(sed -n 's/^full //p' <<<"$text")" \
        "work/solo: its only client stalled, so full = some"
# Hierarchical: the parent counts both children's stalls (they did not
# overlap: one client charged after the other).
work=$(pressure work some total)
[ "$work" -ge $((some_slow + some_solo)) ] || fail "work: some total $work < $some_slow + $some_solo"
[ "$(pressure / some total)" -ge "$work" ] || fail "the root counts less than work"
assert_eq 0 "$(pressure work full total)" "work full total (its other clients did not wait)"
assert_eq "some avg10=0.00 avg60=0.00 avg300=0.00 total=0
full avg10=0.00 avg60=0.00 avg300=0.00 total=0" "$(pressure_text calm)" "calm never waited"

# The averages: the next 2 s period shows the stall, then it decays.
wait_for 20 avg_above work/slow some 0 || fail "work/slow: avg10 stays 0: $(pressure_text work/slow)"
peak=0
for _ in 1 2 3; do
        a=$(pressure work/slow some avg10 | tr -d .)
        a=$((10#$a))
        [ "$a" -gt "$peak" ] && peak=$a
        sleep 1
done
pass "work/slow some avg10 rose to $((peak / 100)).$(printf %02d $((peak % 100)))"
wait_for 60 avg_below work/slow some $((peak / 2)) || fail "work/slow: avg10 does not fall back from $peak"
assert_eq "$some_slow" "$(pressure work/slow some total)" "work/slow total stays once the stall ended"
pass "work/slow some avg10 fell back below half its peak"

# GetPressure: the same figures, averages as numbers.
out=$(mgr_call GetPressure s work/solo)
case $out in
"a(sdddt) 2 \"some\" "*" \"full\" "*) pass "GetPressure: $out" ;;
*) fail "GetPressure: $out" ;;
esac
obj=$(tenant_object work/solo)
tout=$(mb_busctl call "$BUS_DEST" "$obj" "$BUS_TENANT_IFACE" GetPressureText)
[ "$tout" = "$(mgr_call GetPressureText s work/solo)" ] || fail "Tenant.GetPressureText differs: $tout"

# membrokerctl stat shows the lines.
mb_ctl stat work/slow >"$MB_TMP/stat.out" || fail "membrokerctl stat failed"
grep -q "^pressure some avg10=[0-9.]* avg60=[0-9.]* avg300=[0-9.]* total=$some_slow\$" "$MB_TMP/stat.out" ||
        { cat "$MB_TMP/stat.out"; fail "membrokerctl stat shows no pressure line"; }
pass "membrokerctl stat shows memory.pressure"

# The metrics (DumpStatsCompact, what membroker-exporter reads): the totals
# in seconds.
mb_ctl stat --format=prometheus >"$MB_TMP/prom" || fail "membrokerctl stat --format=prometheus failed"
grep -q '^# TYPE membroker_pressure_memory_waiting_seconds_total counter$' "$MB_TMP/prom" ||
        fail "no pressure counter family"
v=$(sed -n 's/^membroker_pressure_memory_waiting_seconds_total{tenant="work\/slow"} //p' "$MB_TMP/prom")
awk -v v="$v" -v us="$some_slow" 'BEGIN { exit !(v != "" && (v * 1e6 - us) ^ 2 < 4) }' ||
        fail "waiting_seconds_total of work/slow is '$v', not $some_slow us"
v=$(sed -n 's/^membroker_pressure_memory_stalled_seconds_total{tenant="work\/slow"} //p' "$MB_TMP/prom")
assert_eq 0.000000 "$v" "stalled_seconds_total of work/slow"
v=$(sed -n 's/^membroker_pressure_memory_waiting_seconds_total{tenant="calm"} //p' "$MB_TMP/prom")
assert_eq 0.000000 "$v" "waiting_seconds_total of calm"

pc_quit s1
pc_quit s2
pc_quit o1
pc_quit c1
mb_stop_clean
