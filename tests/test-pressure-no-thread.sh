#!/bin/bash
# SPDX-License-Identifier: MIT
# MB_CONNECT_NO_THREAD: an application with its own event loop polls
# mb_get_fd() and calls mb_process(), which answers the daemon's Reclaim with
# its shrinkers; a thread of such a client that allocates at max answers the
# Reclaim it reads while it waits (direct reclaim), so it can evict its own
# cache too.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant n "Path=n" "MemoryMax=4M"     # 1024 pages
mb_start_daemon

pc_start loop n --no-thread
pc_start other n
assert_eq "cache ok 800" "$(pc loop cache 800)" "the event-loop client caches"
assert_eq "alloc ok 400" "$(pc other alloc 400)" "another client allocates at max"
[ "$(pc_field loop scans)" -gt 0 ] || fail "the event-loop client's shrinker was not called"
cache=$(pc_field loop cache)
[ "$cache" -lt 800 ] || fail "the event-loop client's cache did not shrink"
pass "mb_process() answered: the cache went from 800 to $cache pages"

# Its own allocation at max evicts its own cache (direct reclaim).
before=$(pc_field loop freed)
assert_eq "alloc ok 200" "$(pc loop alloc 200)" "the event-loop client allocates at max"
[ "$(pc_field loop freed)" -gt "$before" ] || fail "no direct reclaim from its own cache"
mb_dump_state
assert_eq 0 "$(mb_event_local n oom)" "oom events"
settle
leak_check "no-thread client at max"
pc_quit loop
pc_quit other
leak_check "after the clients left"
