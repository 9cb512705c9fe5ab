#!/bin/bash
# SPDX-License-Identifier: MIT
# OOMPolicy=kill: when reclaim cannot make room, the client holding the most
# pages in the tenant that hit its max is killed (SIGKILL), oom_kill is
# counted, everything it held is returned, and the charge that needed the
# room goes through.  The other clients are untouched.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant k "Path=k" "MemoryMax=4M" "OOMPolicy=kill"       # 1024 pages
mb_start_daemon

pc_start big k
pc_start small k
pc_start new k
assert_eq "alloc ok 592" "$(pc big alloc 592)" "the biggest client allocates"
assert_eq "alloc ok 96" "$(pc small alloc 96)" "a small client allocates"
# 592 + 96 + 400 > 1024: nothing is reclaimable, so the biggest goes.
assert_eq "alloc ok 400" "$(pc new alloc 400)" "the charge that needed room"

rc=0
wait "${PC_PID[big]}" || rc=$?
assert_eq 137 "$rc" "exit status of the biggest client (SIGKILL)"
grep -q "tenant k: out of memory .*killed client [0-9]* (pressure-client, pid ${PC_PID[big]}) of tenant k holding" \
        "$MB_TMP/daemon.log" || fail "no OOM kill in the log"

mb_dump_state
[ "$(mb_event_local k oom)" -ge 1 ] || fail "no oom event"
assert_eq 1 "$(mb_event_local k oom_kill)" "oom_kill events"
assert_eq 96 "$(pc_field small app)" "the small client keeps its pages"
assert_eq 400 "$(pc_field new app)" "the new client has its pages"
settle
leak_check "after the OOM kill"
usage=$(mb_state k usage)
[ "$usage" -lt 592 ] || fail "the killed client's pages were not returned (usage $usage)"

pc_quit small
pc_quit new
leak_check "after the clients left"
assert_eq 0 "$(mb_state k usage)" "usage after the clients left"
mb_daemon_alive
