#!/bin/bash
# SPDX-License-Identifier: MIT
# Allocation flags, after the gfp flags of a memcg charge:
#  - MB_ALLOC_NOWAIT (GFP_NOWAIT) is served from the CPU's stock or fails at
#    once with EAGAIN: no trip to the daemon, so at the limit no reclaim
#    round (pgscan unchanged) and no charge request;
#  - MB_ALLOC_NORETRY (__GFP_NORETRY) at the limit drains and reclaims once,
#    then fails with ENOMEM before the OOM path (try_charge_memcg():
#    "if (gfp_mask & __GFP_NORETRY) goto nomem"): no `oom` event, and with
#    OOMPolicy=kill nobody is killed.  The flag travels in Charge.flags.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"
# The exact content of a stock after whole batches is part of what this
# checks: no charging ahead of need (tests/test-client-refill.sh covers it).
export MEMBROKER_REFILL=0

pr_setup
mb_write_tenant k "Path=k" "MemoryMax=4M" "OOMPolicy=kill"       # 1024 pages
mb_start_daemon

pc_start big k --cpu 0
pc_start y k
# 1008 pages = 63 whole batches of 16: big's stock is empty afterwards.
assert_eq "alloc ok 1008" "$(pc big alloc 1008)" "big allocates"
assert_eq 0 "$(pc_field big stock)" "big's stock"
mb_dump_state
scan0=$(mb_state k pgscan)
req0=$(mb_state k charge_requests)

# NOWAIT with an empty stock: EAGAIN, no trip to the daemon.
out=$(pc big allocnw 1)
case "$out" in "allocnw EAGAIN 0 "*) ;; *) fail "NOWAIT with an empty stock: $out" ;; esac
pass "NOWAIT with an empty stock: $out"
# NOWAIT served from the stock: one normal allocation charges a batch.
assert_eq "alloc ok 1" "$(pc big alloc 1)" "a normal allocation refills the stock"
out=$(pc big bulknw 16)
case "$out" in "bulknw EAGAIN 0 "*) ;; *) fail "bulk NOWAIT of more than the stock holds: $out" ;; esac
assert_eq "bulknw ok 10" "$(pc big bulknw 10)" "bulk NOWAIT from the stock"
assert_eq "allocnw ok 5" "$(pc big allocnw 5)" "NOWAIT from the stock"
# At the limit now (1024 pages), the stock empty: EAGAIN at once.
out=$(pc big allocnw 1)
case "$out" in "allocnw EAGAIN 0 "*) ;; *) fail "NOWAIT at the limit: $out" ;; esac
settle 1.2
mb_dump_state
assert_eq 1024 "$(mb_state k usage)" "usage at the limit"
assert_eq "$scan0" "$(mb_state k pgscan)" "pgscan after NOWAIT at the limit (no reclaim round)"
assert_eq $((req0 + 1)) "$(mb_state k charge_requests)" "charge requests (only the normal allocation's)"
assert_eq 0 "$(mb_event_local k max)" "max events"

# NORETRY at the limit: one reclaim round, then ENOMEM; no oom, no kill.
out=$(pc y allocnr 1)
case "$out" in "allocnr ENOMEM 0 "*) ;; *) fail "NORETRY at the limit: $out" ;; esac
pass "NORETRY at the limit: $out"
settle 1.2
mb_dump_state
[ "$(mb_state k pgscan)" -gt "$scan0" ] || fail "NORETRY did not reclaim (pgscan $(mb_state k pgscan))"
assert_eq 1 "$(mb_event_local k max)" "max events"
assert_eq 0 "$(mb_event_local k oom)" "oom events"
assert_eq 0 "$(mb_event_local k oom_kill)" "oom_kill events"
kill -0 "${PC_PID[big]}" 2>/dev/null || fail "big was killed"
# The same charge without the flag goes down the OOM path and kills big.
assert_eq "alloc ok 1" "$(pc y alloc 1)" "the same charge without NORETRY"
mb_dump_state
assert_eq 1 "$(mb_event_local k oom_kill)" "oom_kill events without NORETRY"
rc=0
wait "${PC_PID[big]}" || rc=$?
assert_eq 137 "$rc" "exit status of big (SIGKILL)"
settle
leak_check "after the flags"
pc_quit y
mb_daemon_alive
