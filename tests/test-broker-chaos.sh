#!/bin/bash
# Chaos: real membroker-load clients churn pages in a small tree (one
# tenant limited so that reclaim and OOM run too) while random ones are
# killed with SIGKILL and replaced.  Every few kills every client is
# stopped (SIGSTOP) and the tree checked: each parent's usage equals the sum
# of its children's, nothing is backed beyond the charge.  At the end every
# client is killed: every usage goes back to 0 and no memory is left in any
# arena.  MB_CHAOS_KILLS sets the number of kills (30 in `make check`,
# 1,000 in `make soak`).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

[ -x "$MEMBROKER_LOAD" ] || skip "membroker-load was not built"
KILLS=${MB_CHAOS_KILLS:-30}
CHECK_EVERY=${MB_CHAOS_CHECK_EVERY:-10}
TENANTS=(chaos/a chaos/b chaos/c/x chaos/c/y)
NCLIENTS=8

mb_write_broker_conf "Capacity=256M"
mb_write_tenant a "Path=chaos/a"
mb_write_tenant b "Path=chaos/b" "MemoryMax=2M"
mb_write_tenant cx "Path=chaos/c/x"
mb_write_tenant cy "Path=chaos/c/y" "MemoryHigh=1M"
mb_start_daemon

pids=()
start_client() { # start_client SLOT
        local t=${TENANTS[$(($1 % ${#TENANTS[@]}))]}
        "$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant "$t" --hold 1M --churn 20000 --threads 2 \
                --quiet >"$MB_TMP/c$1.out" 2>&1 &
        pids[$1]=$!
        MB_CHILDREN+=("$!")
}

# tree_consistent : every parent's usage is the sum of its children's, and no
# arena holds memory beyond what is charged
tree_consistent() {
        local p kids sum k
        mb_dump_state
        for p in / chaos chaos/c; do
                case $p in
                /) kids=(chaos) ;;
                chaos) kids=(chaos/a chaos/b chaos/c) ;;
                chaos/c) kids=(chaos/c/x chaos/c/y) ;;
                esac
                sum=0
                for k in "${kids[@]}"; do sum=$((sum + $(mb_state "$k" usage))); done
                [ "$(mb_state "$p" usage)" = "$sum" ] || {
                        echo "parent $p usage $(mb_state "$p" usage) != children $sum"
                        return 1
                }
        done
        for k in "${TENANTS[@]}"; do
                [ "$(mb_state "$k" unaccounted)" = 0 ] || { echo "$k unaccounted $(mb_state "$k" unaccounted)"; return 1; }
        done
}

# check_stopped : stop every client, check the tree, let them go on
check_stopped() {
        local ok=0
        kill -STOP "${pids[@]}" 2>/dev/null || true
        # A request already sent may still be in the daemon: retry briefly.
        wait_for 10 tree_consistent || ok=1
        kill -CONT "${pids[@]}" 2>/dev/null || true
        [ $ok -eq 0 ] || { tree_consistent; fail "the tree is inconsistent"; }
}

for i in $(seq 0 $((NCLIENTS - 1))); do start_client "$i"; done
wait_for 60 mb_dumped_ge connections attached "$NCLIENTS" ||
        fail "not every client attached"

for k in $(seq 1 "$KILLS"); do
        slot=$((RANDOM % NCLIENTS))
        sleep "0.0$((RANDOM % 10))"
        kill -9 "${pids[$slot]}" 2>/dev/null || true
        wait "${pids[$slot]}" 2>/dev/null || true
        start_client "$slot"
        if [ $((k % CHECK_EVERY)) -eq 0 ]; then
                check_stopped
                echo "kill $k of $KILLS: consistent"
        fi
        mb_daemon_alive
done
pass "$KILLS random kill -9 under churn, the tree consistent at every check"

kill -9 "${pids[@]}" 2>/dev/null || true
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done

all_zero() {
        local t
        mb_dump_state
        for t in / chaos chaos/a chaos/b chaos/c chaos/c/x chaos/c/y; do
                [ "$(mb_state "$t" usage)" = 0 ] || return 1
                [ "$(mb_state "$t" clients)" = 0 ] || return 1
        done
        for t in "${TENANTS[@]}"; do
                [ "$(mb_state "$t" arena_used)" = 0 ] || return 1
                [ "$(mb_state "$t" unaccounted)" = 0 ] || return 1
        done
}
wait_for 30 all_zero || { cat "$MB_TMP/state.dump"; fail "usage or memory left after every client died"; }
pass "every usage back to 0, no page held, nothing backed"
mb_daemon_alive
mb_stop_clean
