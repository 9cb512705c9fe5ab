#!/bin/bash
# SPDX-License-Identifier: MIT
# Tenant events (high, max, oom) reach the clients attached to the tenant
# as Event messages and the library calls the application's callback: from
# its own thread, or from mb_process() with MB_CONNECT_NO_THREAD.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant e "Path=e" "MemoryHigh=1M" "MemoryMax=1152K"  # 256 / 288 pages
mb_start_daemon

pc_start t e
pc_start loop e --no-thread
event_seen() { [ "$(pc_field "$1" "$2")" -gt 0 ]; }

assert_eq "alloc ok 272" "$(pc t alloc 272)" "allocation over high"
wait_for 20 event_seen t high || fail "no high event delivered to the threaded client"
wait_for 20 event_seen loop high || fail "no high event delivered to the event-loop client"
pass "high events delivered: $(pc_field t high) and $(pc_field loop high)"

out=$(pc t alloc 64)
case "$out" in "alloc ENOMEM "*) ;; *) fail "allocation past max: $out" ;; esac
wait_for 20 event_seen t max || fail "no max event delivered"
wait_for 20 event_seen t oom || fail "no oom event delivered"
wait_for 20 event_seen loop oom || fail "no oom event delivered to the event-loop client"
pass "max and oom events delivered"
mb_dump_state
[ "$(pc_field t events)" -le $(( $(mb_event e high) + $(mb_event e max) + $(mb_event e oom) )) ] ||
        fail "more events delivered than counted"
pc_quit t
pc_quit loop
leak_check "after the clients left"
