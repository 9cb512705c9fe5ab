#!/bin/bash
# SPDX-License-Identifier: MIT
# A client that does not answer (SIGSTOP) is skipped after
# ReclaimTimeoutMSec=, logged and counted, and stalls nobody: the other
# clients are served, a proactive reclaim and a charge at max complete, and
# later rounds skip the stopped client at once.  Resumed, it answers late.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup "ReclaimTimeoutMSec=300"
mb_write_tenant s "Path=s" "MemoryMax=4M"     # 1024 pages
bus_run

pc_start stopped s
pc_start live s
pc_start new s
assert_eq "cache ok 400" "$(pc stopped cache 400)" "the client to stop caches"
assert_eq "cache ok 400" "$(pc live cache 400)" "a live client caches"
kill -STOP "${PC_PID[stopped]}"

# Proactive: within a generous bound, with pages from the live client only.
start=$(date +%s)
out=$(timeout 20 "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" \
        Reclaim st s $((1 << 20))) || fail "Reclaim did not return while a client is stopped"
got=${out#t }
[ "$got" -gt 0 ] && [ "$got" -le $((1 << 20)) ] || fail "Reclaim(s, 1M) with a stopped client: $out"
[ $(( $(date +%s) - start )) -lt 20 ] || fail "the stopped client blocked the reclaim"
pass "Reclaim(s, 1M) -> $got bytes from the live client while the other is stopped"
grep -q "client [0-9]* (pressure-client, pid ${PC_PID[stopped]}) of tenant s did not answer a [a-z]* request within 300 ms" \
        "$MB_TMP/daemon.log" || fail "the timeout was not logged"
mb_dump_state
timeouts=$(sed -n 's/^state: reclaim .* timeouts=\([0-9]*\) .*/\1/p' "$MB_TMP/state.dump")
[ "$timeouts" -ge 1 ] || fail "the timeout was not counted"
pass "the stopped client was skipped after 300 ms ($timeouts timeouts)"

# A charge at max: the live client's cache makes room; the stopped client's
# unanswered request is skipped at once.
assert_eq "alloc ok 400" "$(pc new alloc 400)" "a charge at max with a stopped client in the tenant"
[ "$(pc_field live cache)" -lt 400 ] || fail "the live client gave nothing"

kill -CONT "${PC_PID[stopped]}"
wait_for 20 grep -q "client [0-9]* (pressure-client, pid ${PC_PID[stopped]}) of tenant s answered a reclaim request late" \
        "$MB_TMP/daemon.log" || fail "the resumed client's late answer was not seen"
pass "the resumed client answered late"
settle
leak_check "after the stopped client resumed"
pc_quit stopped
pc_quit live
pc_quit new
leak_check "after the clients left"
