#!/bin/bash
# SPDX-License-Identifier: MIT
# A tenant at max with nothing reclaimable: the daemon drains, asks, gets
# nothing back, counts max then oom, and the charge fails with ENOMEM and a
# reason naming the tenant at max.  The client's session goes on, the daemon
# and the other tenants carry on, nothing leaks.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant small "Path=small" "MemoryMax=1M"       # 256 pages
mb_write_tenant other "Path=other"
mb_start_daemon

pc_start a small
pc_start o other
assert_eq "alloc ok 200" "$(pc a alloc 200)" "A allocates below max"
pc_expect a "alloc ENOMEM " "alloc past max" alloc 100
out=$PC_OUT
grep -q 'charge of [0-9]* KiB ([0-9]* pages\?) to small failed: small at max: usage [0-9]* [KM]iB ([0-9]* pages), MemoryMax=1 MiB (256 pages)' <<<"$out" ||
        fail "the reason does not name small at max: $out"
got=$(awk '{ print $3 }' <<<"$out")
[ $((200 + got)) -le 256 ] || fail "A holds $((200 + got)) pages in a 256-page tenant"
pass "ENOMEM after $got more pages: ${out#alloc ENOMEM $got }"

mb_dump_state
[ "$(mb_event_local small max)" -ge 1 ] || fail "no max event"
# One failed allocation, one oom: the batch that did not fit fell back to
# the page needed inside the daemon (Charge.need, like try_charge_memcg()),
# not through a second charge that would count again.
assert_eq 1 "$(mb_event_local small oom)" "oom events of one failed allocation"
assert_eq 0 "$(mb_event_local small oom_kill)" "oom_kill events (OOMPolicy=fail)"
assert_eq 0 "$(mb_event other max)" "max events of the other tenant"
pass "max $(mb_event_local small max), oom $(mb_event_local small oom)"

# The session goes on: freeing makes room again; the other tenant is served.
assert_eq "free ok 50" "$(pc a free 50)" "A frees"
assert_eq "alloc ok 40" "$(pc a alloc 40)" "A allocates again"
assert_eq "alloc ok 300" "$(pc o alloc 300)" "the other tenant allocates"
settle
leak_check "after the ENOMEM"
pc_quit a
pc_quit o
leak_check "after the clients left"
mb_daemon_alive
