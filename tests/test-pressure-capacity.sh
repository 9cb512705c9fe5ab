#!/bin/bash
# SPDX-License-Identifier: MIT
# Capacity= is the root's max: a full broker reclaims across all tenants.
# A charge in one tenant that fails at the capacity takes cache pages back
# from the clients of other tenants.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

mb_write_broker_conf "Capacity=8M" "ChargeBatch=16" "StatsFlushIntervalSec=1"   # 2048 pages
mb_write_tenant a "Path=a"
mb_write_tenant b "Path=b"
mb_start_daemon

pc_start a a
pc_start b b
assert_eq "cache ok 1600" "$(pc a cache 1600)" "a fills most of the broker with its cache"
assert_eq "alloc ok 1024" "$(pc b alloc 1024)" "b allocates past the capacity"
ca=$(pc_field a cache)
[ "$ca" -le $((2048 - 1024)) ] || fail "a's cache ($ca pages) did not make room"
pass "a's cache went from 1600 to $ca pages for b"
mb_dump_state
[ "$(mb_state / usage)" -le 2048 ] || fail "root usage above the capacity"
[ "$(mb_state a pgsteal)" -gt 0 ] || fail "no pgsteal in a"
assert_eq 0 "$(mb_event b oom)" "oom events of b"
settle
leak_check "at the capacity"
pc_quit a
pc_quit b
leak_check "after the clients left"
