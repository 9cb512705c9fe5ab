#!/bin/bash
# SPDX-License-Identifier: MIT
# Pressure triggers of bus callers and of clients (the kernel's PSI triggers on
# memory.pressure): AddPressureTrigger(path, "some|full THRESHOLD WINDOW")
# sends its caller PressureTriggered when the stall within the window
# reaches the threshold -- here when a client is throttled over its
# tenant's MemoryHigh -- and never for a tenant that does not stall, nor for
# `full` while another client of the tenant does not wait.  Bad triggers
# are refused; a trigger belongs to its caller and goes when it leaves.
# A client arms the same through the library (mb_pressure_trigger()): an
# eventfd that becomes readable.
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
mb_dump_state
assert_eq 5 "$(mb_dump_field bus pressure_triggers)" "triggers of bus callers armed"

pc_start s1 work/slow
pc_start s2 work/slow
pc_start c1 calm
# The library's triggers: s2 (which will not wait itself) on its tenant.
fd_some=$(pc s2 trigger some 50000 1000000 | sed -n 's/^trigger ok //p')
[ -n "$fd_some" ] || fail "mb_pressure_trigger(some) failed"
fd_full=$(pc s2 trigger full 1000 1000000 | sed -n 's/^trigger ok //p')
[ -n "$fd_full" ] || fail "mb_pressure_trigger(full) failed"
fd_calm=$(pc c1 trigger some 1000 1000000 | sed -n 's/^trigger ok //p')
[ -n "$fd_calm" ] || fail "mb_pressure_trigger on calm failed"
for bad in "some 0 1000000" "some 1000 100000" "full 2000000 1000000" "most 1000 1000000" "some 1000"; do
        case $(pc c1 trigger $bad) in
        "trigger EINVAL "*) ;;
        *) fail "mb_pressure_trigger(\"$bad\") was not refused with EINVAL" ;;
        esac
done
assert_eq "alloc ok 1" "$(pc c1 alloc 1)" "the session goes on after refused triggers"
pass "mb_pressure_trigger: three armed, bad ones refused"
assert_eq "events 0" "$(pc s2 events "$fd_some")" "no event before any stall"
assert_eq "alloc ok 600" "$(pc c1 alloc 600)" "calm: 600 pages, no limit"
assert_eq "alloc ok 600" "$(pc s1 alloc 600)" "work/slow: s1 88 pages over high"
[ "$(mgr_call GetPressureText s work/slow | grep -o 'some avg10=[0-9.]* avg60=[0-9.]* avg300=[0-9.]* total=[0-9]*' |
        sed 's/.*total=//')" -gt 50000 ] || fail "work/slow stalled less than the threshold"

# -n 1: the first event ends the command, whose trigger then goes.
wait_for 30 eval '! kill -0 ${WATCH_PID[first]} 2>/dev/null' || fail "no event for work/slow"
wait "${WATCH_PID[first]}" || fail "membrokerctl pressure -n 1 failed"
assert_eq "work/slow: some 50000 1000000" "$(cat "$MB_TMP/first.trig")" "one PressureTriggered for work/slow"
wait_for 20 eval '[ "$(mb_dump_state; mb_dump_field bus pressure_triggers)" = 4 ]' ||
        fail "the trigger of a caller that left is still there: $(mb_dump_field bus pressure_triggers) armed"
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

# The library's triggers: s2's `some` fired, its `full` and calm's did not.
lib_events=0
count_lib() {
        local n
        n=$(pc s2 events "$fd_some" | sed -n 's/^events //p')
        lib_events=$((lib_events + n))
        [ "$lib_events" -gt 0 ]
}
wait_for 20 count_lib || fail "the library's trigger on work/slow never became readable"
pass "mb_pressure_trigger: $lib_events event(s) on work/slow"
assert_eq "events 0" "$(pc s2 events "$fd_full")" "no full event for s2, which did not wait"
assert_eq "events 0" "$(pc c1 events "$fd_calm")" "no event for calm"
assert_eq "untrigger ok" "$(pc s2 untrigger "$fd_some")" "mb_pressure_trigger_close"
assert_eq "untrigger EBADF" "$(pc s2 untrigger "$fd_some")" "closing twice"

# Only the owner removes a trigger.
expect_fail "No pressure trigger $id_calm of this caller" mgr_call RemovePressureTrigger t "$id_calm"

pc_quit s1
pc_quit s2
pc_quit c1
mb_stop_clean
