#!/bin/bash
# 200 clients connected at once, 3 threads each, charging and uncharging
# random batches in four tenants (one of them with a tight max, so that
# ENOMEM happens concurrently too).  Once all of them hold still: the sum of
# the leaves' usage equals their parents' and the root's usage, and equals
# the sum of what the clients report they hold.  After they leave: 0.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

NCLIENTS=200
THREADS=3
ROUNDS=10
tenants=(a/x a/y b/x b/y)

mb_write_broker_conf "Capacity=256M" "Workers=2"
mb_write_tenant ax "Path=a/x" "MemoryMax=1M"
mb_write_tenant ay "Path=a/y"
mb_write_tenant bx "Path=b/x"
mb_write_tenant by "Path=b/y" "MemoryMax=32M"
mb_start_daemon

pids=()
for i in $(seq 0 $((NCLIENTS - 1))); do
        t=${tenants[$((i % 4))]}
        wire_bg "$MB_TMP/c$i.out" --name "c$i" hello "$t" load $THREADS $ROUNDS hold
        pids+=("$MB_BG_PID")
done

ready() { [ "$(cat "$MB_TMP"/c*.out | grep -c '^ready$')" -ge $NCLIENTS ]; }
wait_for 120 ready || { grep -L ready "$MB_TMP"/c*.out | head -3 | xargs cat; fail "not every client finished its load"; }
pass "$NCLIENTS clients connected and done, none reported an error"

mb_dump_state
assert_eq $NCLIENTS "$(grep -o '[0-9]* clients' "$MB_TMP/state.dump" | head -1 | cut -d' ' -f1)" "clients connected at once"

declare -A held
total=0
for i in $(seq 0 $((NCLIENTS - 1))); do
        t=${tenants[$((i % 4))]}
        h=$(sed -n 's/^load done held=\([0-9]*\) errors=0$/\1/p' "$MB_TMP/c$i.out")
        [ -n "$h" ] || { cat "$MB_TMP/c$i.out"; fail "client $i did not report"; }
        held[$t]=$(( ${held[$t]:-0} + h ))
        total=$((total + h))
done

sum=0
for t in "${tenants[@]}"; do
        assert_eq "${held[$t]}" "$(mb_state "$t" usage)" "usage of $t = what its clients hold"
        sum=$((sum + $(mb_state "$t" usage)))
done
assert_eq $(( $(mb_state a/x usage) + $(mb_state a/y usage) )) "$(mb_state a usage)" "usage of a = a/x + a/y"
assert_eq $(( $(mb_state b/x usage) + $(mb_state b/y usage) )) "$(mb_state b usage)" "usage of b = b/x + b/y"
assert_eq "$sum" "$(mb_state / usage)" "root usage = sum of the leaves"
assert_eq "$total" "$sum" "sum of the leaves = what the clients hold"
[ "$(mb_event a/x max)" -gt 0 ] && pass "a/x hit its max ($(mb_event a/x max) times)" ||
        echo "note: a/x never hit its max in this run"

kill -TERM "${pids[@]}"
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
MB_CHILDREN=()
wait_for 60 mb_dumped_ge connections detached "$NCLIENTS" ||
        fail "the daemon did not see every client leave"
mb_dump_state
for t in "${tenants[@]}" a b /; do
        assert_eq 0 "$(mb_state "$t" usage)" "usage of $t after every client left"
done
for t in "${tenants[@]}"; do
        assert_eq 0 "$(mb_state "$t" unaccounted)" "unaccounted bytes of $t"
done
mb_daemon_alive
mb_stop_clean
