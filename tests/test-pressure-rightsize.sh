#!/bin/bash
# SPDX-License-Identifier: MIT
# Automatic right-sizing (MemoryPressureTarget=), with the real daemon on a
# private bus and real clients (tests/rightsize-client: a small hot set it
# touches all the time, a large cold cache, both behind a shrinker; a hot
# page given back is allocated again, and that charge stalls when the
# tenant is at the loop's limit):
#
#  - a client whose cache is 10x its hot set converges to within 2x of the
#    hot set, with the working set estimate near it, and the pressure the
#    loop reads stays near the target (backoff keeps it there);
#  - a tenant with MemoryMin= is never taken below it;
#  - a tenant without the key is never reclaimed (off by default);
#  - a client that stops answering (SIGSTOP) stops the loop, which drops its
#    limit and says so; a reload that sets the target again restarts it;
#  - membrokerctl rightsize shows it; membrokerctl set / SetTenantLimits
#    change the target at run time (persisted without --runtime), refuse a
#    bad one, and revert drops it.
# Everything is polled with generous bounds: no assertion on speed.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

RS_CLIENT="$top_builddir/tests/rightsize-client"
HOT=256          # pages: 1M
COLD=2560        # pages: 10M
TARGET="some avg10 1%"

pr_setup "RightSizeIntervalMSec=200" "ReclaimTimeoutMSec=250"
mb_write_tenant rs "Path=rs" "MemoryPressureTarget=$TARGET"
mb_write_tenant prot "Path=prot" "MemoryMin=4M" "MemoryPressureTarget=some avg10 1%"
mb_write_tenant idle "Path=idle"
bus_run

# rs_start NAME TENANT HOT COLD : a rightsize-client, its output in $MB_TMP/NAME.out
declare -A RS_PID=()
rs_start() {
        "$RS_CLIENT" --socket "$MB_SOCK" --tenant "$2" --hot "$3" --cold "$4" \
                >"$MB_TMP/$1.out" 2>"$MB_TMP/$1.err" &
        RS_PID[$1]=$!
        MB_CHILDREN+=($!)
        wait_for 30 grep -q '^ready' "$MB_TMP/$1.out" ||
                { cat "$MB_TMP/$1.err"; fail "rightsize-client $1 did not fill $2"; }
}

# Defaults and read-out of a tenant without the key.
assert_eq "no" "$(tenant_prop idle MemoryPressureTarget)" "MemoryPressureTarget of idle"
assert_eq "off" "$(tenant_prop idle RightSizeState)" "RightSizeState of idle"
assert_eq "$TARGET" "$(tenant_prop rs MemoryPressureTarget)" "MemoryPressureTarget of rs"

rs_start idle idle 64 1024
rs_start rs rs $HOT $COLD
rs_start prot prot 64 2048
idle_start=$(tenant_prop idle MemoryCurrent)

# Converges: within 2x of the hot set (from a cache 10x larger).
converged() { [ "$(tenant_prop rs MemoryCurrent)" -le $((2 * HOT * PAGE)) ]; }
wait_for 240 converged || {
        mb_ctl rightsize rs
        fail "rs did not come within 2x of its hot set: $(tenant_prop rs MemoryCurrent) bytes"
}
pass "rs converged: $(tenant_prop rs MemoryCurrent) bytes for a hot set of $((HOT * PAGE))"
# ... and stays there while the loop runs on: sample it for a while (the
# loop backs off when the hot set stalls, so the usage neither runs away
# nor collapses far below the hot set).
lowest=$((1 << 62)) highest=0 above=0 samples=40
for i in $(seq $samples); do
        cur=$(tenant_prop rs MemoryCurrent)
        p=$(tenant_prop rs RightSizePressure)
        [ "$cur" -lt "$lowest" ] && lowest=$cur
        [ "$cur" -gt "$highest" ] && highest=$cur
        [ "$p" -gt 30000 ] && above=$((above + 1)) # 3% = 3x the target
        sleep 0.25
done
[ "$highest" -le $((3 * HOT * PAGE)) ] || fail "rs grew back to $highest bytes"
[ "$lowest" -ge $((HOT * PAGE / 2)) ] || fail "rs went down to $lowest bytes, half its hot set is $((HOT * PAGE / 2))"
[ "$above" -le $((samples / 4)) ] || fail "the pressure of rs was above 3x the target in $above of $samples samples"
pass "rs stays between $lowest and $highest bytes, pressure above 3x the target in $above/$samples samples"
wse=$(tenant_prop rs MemoryWorkingSetEstimate)
[ "$wse" -ge $((HOT * PAGE / 2)) ] && [ "$wse" -le $((2 * HOT * PAGE)) ] ||
        fail "working set estimate $wse bytes, hot set $((HOT * PAGE))"
pass "MemoryWorkingSetEstimate $wse bytes (hot set $((HOT * PAGE)))"
state=$(tenant_prop rs RightSizeState)
case $state in probing | backoff | idle) pass "RightSizeState of rs: $state" ;; *) fail "RightSizeState of rs: $state" ;; esac
[ "$(tenant_prop rs RightSizeReclaimed)" -ge $((COLD * PAGE / 2)) ] || fail "RightSizeReclaimed: $(tenant_prop rs RightSizeReclaimed)"

# Never below MemoryMin=: prot comes down to its min and stays there.
at_min() { [ "$(tenant_prop prot MemoryCurrent)" -le $((4 << 20)) ]; }
wait_for 240 at_min || fail "prot did not come down to its MemoryMin: $(tenant_prop prot MemoryCurrent)"
for i in $(seq 10); do
        cur=$(tenant_prop prot MemoryCurrent)
        [ "$cur" -ge $((4 << 20)) ] || fail "prot went below its MemoryMin=4M: $cur bytes"
        sleep 0.2
done
assert_eq $((4 << 20)) "$(tenant_prop prot RightSizeHigh)" "the loop's limit of prot is its min"
pass "prot stays at its MemoryMin=4M"

# Off by default: idle was never asked for anything.
assert_eq "$idle_start" "$(tenant_prop idle MemoryCurrent)" "usage of idle (no MemoryPressureTarget=)"
assert_eq 0 "$(stat_value idle pgscan)" "pgscan of idle"
assert_eq "off" "$(tenant_prop idle RightSizeState)" "RightSizeState of idle"

# membrokerctl rightsize: the tenants with a target, and JSON.
out=$(mb_ctl rightsize)
grep -q "^rs  *some avg10 1%  *[a-z]" <<<"$out" || fail "membrokerctl rightsize: $out"
grep -q '^idle' <<<"$out" && fail "membrokerctl rightsize lists idle: $out"
grep -q '^prot ' <<<"$out" || fail "membrokerctl rightsize: $out"
out=$(mb_ctl --json rightsize idle)
grep -q '"Path":"idle","MemoryPressureTarget":"no","RightSizeState":"off"' <<<"$out" ||
        fail "membrokerctl --json rightsize idle: $out"
pass "membrokerctl rightsize"

# A client that stops answering stops the loop, and its limit goes.
kill -STOP "${RS_PID[rs]}"
# Make the loop want more: lower nothing, just wait -- while the pressure
# is below the target it keeps probing, and every step goes unanswered.
stopped() { [ "$(tenant_prop rs RightSizeState)" = stopped ]; }
wait_for 120 stopped || fail "the loop of rs did not stop: $(tenant_prop rs RightSizeState)"
assert_eq 18446744073709551615 "$(tenant_prop rs RightSizeHigh)" "no limit left on rs"
pass "the loop of rs stopped when its client stopped answering"
kill -CONT "${RS_PID[rs]}"
sleep 1
assert_eq stopped "$(tenant_prop rs RightSizeState)" "it stays stopped when the client answers again"
# Set again (a reload): it starts over.
kill -HUP "$MB_DAEMON_PID"
restarted() { [ "$(tenant_prop rs RightSizeState)" != stopped ]; }
wait_for 30 restarted || fail "a reload did not restart the loop of rs"
pass "a reload restarted the loop: $(tenant_prop rs RightSizeState)"

# Off at a reload: the limit goes.
mb_write_tenant rs "Path=rs"
kill -HUP "$MB_DAEMON_PID"
off() { [ "$(tenant_prop rs RightSizeState)" = off ]; }
wait_for 30 off || fail "a reload without the key did not turn the loop of rs off"
assert_eq "no" "$(tenant_prop rs MemoryPressureTarget)" "MemoryPressureTarget of rs after the reload"
assert_eq 18446744073709551615 "$(tenant_prop rs RightSizeHigh)" "no limit left on rs"

# Set at run time (membrokerctl set: SetTenantLimits), and persisted.
mb_ctl set --runtime rs "MemoryPressureTarget=some avg60 2%" || fail "membrokerctl set --runtime MemoryPressureTarget"
assert_eq "some avg60 2%" "$(tenant_prop rs MemoryPressureTarget)" "MemoryPressureTarget of rs set at run time"
probing() { [ "$(tenant_prop rs RightSizeState)" != off ]; }
wait_for 30 probing || fail "the loop of rs did not start after the set"
pass "the loop of rs runs again: $(tenant_prop rs RightSizeState)"
mb_ctl set rs MemoryPressureTarget=no || fail "membrokerctl set MemoryPressureTarget=no"
grep -q '^MemoryPressureTarget=no$' "$MB_STATE/limits.conf" || fail "not persisted: $(cat "$MB_STATE/limits.conf")"
wait_for 30 off || fail "MemoryPressureTarget=no did not turn the loop of rs off"
assert_eq 18446744073709551615 "$(tenant_prop rs RightSizeHigh)" "no limit left on rs"
out=$(mb_ctl set rs "MemoryPressureTarget=some avg5 1%" 2>&1) && fail "a bad target was accepted"
grep -q 'the second word must be "avg10", "avg60" or "avg300"' <<<"$out" || fail "the refusal: $out"
out=$(mgr_call SetTenantLimits 'sa{sv}b' rs 1 MemoryPressureTarget t 5 true 2>&1) && fail "a number was accepted"
grep -q "must be a string of type 's'" <<<"$out" || fail "the refusal of a number: $out"
mb_ctl revert rs MemoryPressureTarget || fail "membrokerctl revert MemoryPressureTarget"
grep -q 'MemoryPressureTarget' "$MB_STATE/limits.conf" && fail "revert left it in $(cat "$MB_STATE/limits.conf")"
assert_eq "no" "$(tenant_prop rs MemoryPressureTarget)" "MemoryPressureTarget of rs after revert (the file's)"
pass "MemoryPressureTarget set, persisted, refused when bad and reverted over the bus"

for n in idle rs prot; do
        kill -TERM "${RS_PID[$n]}"
        wait "${RS_PID[$n]}" || fail "rightsize-client $n exited with $?"
done
leak_check "after the clients left"
