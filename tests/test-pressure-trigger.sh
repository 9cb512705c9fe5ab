#!/bin/bash
# SPDX-License-Identifier: MIT
# Pressure triggers of bus callers (the kernel's PSI triggers on
# memory.pressure): AddPressureTrigger(path, "some|full THRESHOLD WINDOW")
# sends its caller PressureTriggered when the stall within the window
# reaches the threshold -- here when a client is throttled over its
# tenant's MemoryHigh -- and never for a tenant that does not stall, nor for
# `full` while another client of the tenant does not wait.  Bad triggers
# are refused; a trigger belongs to its caller and goes when it leaves.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"
export MEMBROKER_REFILL=0

pr_setup
mb_write_tenant slow "Path=work/slow" "MemoryHigh=2M" # 512 pages
mb_write_tenant calm "Path=calm"
bus_run

expect_fail "not \"some|full" mgr_call AddPressureTrigger ss calm "some 0 1000000"
expect_fail "not \"some|full" mgr_call AddPressureTrigger ss calm "some 1000 100000"
expect_fail "not \"some|full" mgr_call AddPressureTrigger ss calm "some 2000000 1000000"
expect_fail "not \"some|full" mgr_call AddPressureTrigger ss calm "many 1000 1000000"
expect_fail "No tenant" mgr_call AddPressureTrigger ss nope "some 1000 1000000"

# watch NAME PATH TRIGGER [CTL-ARGS...] : membrokerctl pressure in the
# background, one line per event in $MB_TMP/NAME.trig
declare -A WATCH_PID=()
watch() {
        local name=$1 path=$2 trigger=$3; shift 3
        mb_ctl "$@" pressure "$path" "$trigger" >"$MB_TMP/$name.trig" 2>"$MB_TMP/$name.err" &
        WATCH_PID[$name]=$!
        MB_CHILDREN+=($!)
        wait_for 20 grep -q "^watching $path" "$MB_TMP/$name.err" ||
                { cat "$MB_TMP/$name.err"; fail "membrokerctl pressure $path did not start"; }
}
watch first work/slow "some 50000 1000000" -n 1
watch slow work/slow "some 50000 1000000"
watch work work "some 50000 1000000"
watch full work/slow "full 1000 1000000"
watch calm calm "some 1000 1000000"
id_calm=$(sed -n 's/.*(trigger \([0-9]*\))$/\1/p' "$MB_TMP/calm.err")
id_first=$(sed -n 's/.*(trigger \([0-9]*\))$/\1/p' "$MB_TMP/first.err")

pc_start s1 work/slow
pc_start s2 work/slow
pc_start c1 calm
assert_eq "alloc ok 600" "$(pc c1 alloc 600)" "calm: 600 pages, no limit"
assert_eq "alloc ok 600" "$(pc s1 alloc 600)" "work/slow: s1 88 pages over high"
[ "$(mgr_call GetPressureText s work/slow | grep -o 'some avg10=[0-9.]* avg60=[0-9.]* avg300=[0-9.]* total=[0-9]*' |
        sed 's/.*total=//')" -gt 50000 ] || fail "work/slow stalled less than the threshold"

# -n 1: the first event ends the command, whose trigger then goes.
wait_for 30 eval '! kill -0 ${WATCH_PID[first]} 2>/dev/null' || fail "no event for work/slow"
wait "${WATCH_PID[first]}" || fail "membrokerctl pressure -n 1 failed"
assert_eq "work/slow: some 50000 1000000" "$(cat "$MB_TMP/first.trig")" "one PressureTriggered for work/slow"
wait_for 20 grep -q "pressure trigger $id_first on work/slow: .* left the bus" "$MB_TMP/daemon.log" ||
        fail "the trigger of a caller that left is still there"
pass "the trigger went with its caller"

wait_for 30 grep -q "^work: some 50000 1000000$" "$MB_TMP/work.trig" || fail "no event for work (the parent)"
pass "the parent's trigger fired too"

# The stall is over: wait until the averages show it ended (the triggers
# had every chance to fire), then the quiet ones must not have.
wait_for 60 eval '[ "$(mgr_call GetPressureText s work/slow | sed -n "s/.*some avg10=\([0-9]*\)\..*/\1/p")" -lt 2 ]' ||
        fail "work/slow's avg10 stays up"
[ -s "$MB_TMP/slow.trig" ] || fail "the lasting watcher of work/slow saw nothing"
n=$(wc -l <"$MB_TMP/slow.trig")
pass "work/slow: $n event(s) for one stall"
[ ! -s "$MB_TMP/calm.trig" ] || fail "a trigger fired for calm, which never waited: $(cat "$MB_TMP/calm.trig")"
pass "no event for calm"
[ ! -s "$MB_TMP/full.trig" ] || fail "full fired while s2 did not wait: $(cat "$MB_TMP/full.trig")"
pass "no full event while one client of two stalls"

# Only the owner removes a trigger.
expect_fail "No pressure trigger $id_calm of this caller" mgr_call RemovePressureTrigger t "$id_calm"

pc_quit s1
pc_quit s2
pc_quit c1
