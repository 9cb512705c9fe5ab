#!/bin/bash
# ArenaBacking=memfd: nothing bounds the backing in the kernel, so the audit
# finds the pages written beyond the charge, punches every page nobody holds
# and counts an overrun; with OverrunPolicy=kill the writer is also killed.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/attack-lib.sh"

mb_attack_prereqs
mb_write_broker_conf "Capacity=1G" "ArenaBacking=memfd"
mb_write_tenant a "Path=a" "MemoryMax=16M" "AllowUsers=nobody"
mb_write_tenant k "Path=k" "MemoryMax=16M" "AllowUsers=nobody" "OverrunPolicy=kill"
mb_start_daemon
mb_dump_state
assert_eq memfd "$(mb_dump_field config backing)" "the arenas' backing"
page=4096
pages_200m=$(( 200 * 1024 * 1024 / page ))

# punch: the writer survives, the memory goes
as_nobody_bg "$MB_TMP/w.out" hello a charge 1 expect-ok write-arena 1000 "$pages_200m" 0x42 print-backed hold
pw=$MB_BG_PID
wait_for 120 grep -q '^ready$' "$MB_TMP/w.out" || { cat "$MB_TMP/w.out"; fail "writer"; }
cat "$MB_TMP/w.out"
wait_for 60 eval '[ "$(mb_now a arena_backed)" -le '"$page"' ]' ||
        fail "the audit left $(mb_now a arena_backed) bytes backing a's arena"
pass "the audit punched the pages nobody holds"
mb_dump_state
[ "$(mb_event_local a overrun)" -ge 1 ] || fail "no overrun event on a"
[ "$(mb_event a overrun)" -ge 1 ] || fail "no hierarchical overrun event on a"
kill -0 "$pw" || fail "OverrunPolicy=punch killed the writer"
pass "OverrunPolicy=punch leaves the writer alive"
kill -TERM "$pw"
wait "$pw" || true
wait_for 30 eval '[ "$(mb_now a usage)" = 0 ]' || fail "usage of a did not return to 0"
# The audit punches what the writer left behind within its next rounds.
wait_for 30 eval '[ "$(mb_now a arena_backed)" = 0 ]' ||
        fail "a's arena is still backed by $(mb_now a arena_backed) bytes after the writer left"
pass "nothing backs a's arena after the writer left"

# kill: the writer is SIGKILLed
as_nobody_bg "$MB_TMP/k.out" hello k charge 1 expect-ok write-arena 1000 2560 0x42 hold
pk=$MB_BG_PID
rc=0
wait "$pk" || rc=$?
cat "$MB_TMP/k.out"
assert_eq 137 "$rc" "exit status of the writer under OverrunPolicy=kill (128 + SIGKILL)"
wait_for 30 eval '[ "$(mb_now k arena_backed)" = 0 ]' || fail "k's arena is still backed"
mb_dump_state
[ "$(mb_event_local k overrun)" -ge 1 ] || fail "no overrun event on k"
mb_daemon_alive
mb_stop_clean
