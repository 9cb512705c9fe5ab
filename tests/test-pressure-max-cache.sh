#!/bin/bash
# SPDX-License-Identifier: MIT
# A tenant at max with a reclaimable cache keeps allocating by evicting its
# own cache: the daemon drains the stocks and asks the tenant's clients to
# give pages back, the shrinkers free the oldest cache pages, the charge
# goes through.  max events are counted, no oom; nothing leaks.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant cache "Path=cache" "MemoryMax=4M"       # 1024 pages
mb_start_daemon

# One client: 1M held, then a 6M cache in a 4M tenant.  At max the daemon
# takes the client's own older cache pages back and the fill goes on.
rc=0
out=$("$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant cache --hold 1M --cache 6M --seconds 0 --quiet) || rc=$?
assert_eq 0 "$rc" "membroker-load exit status (no allocation failed)"
held=$(sed -n 's/^held=\([0-9]*\) .*/\1/p' <<<"$out")
cache=$(sed -n 's/.* cache=\([0-9]*\) .*/\1/p' <<<"$out")
assert_eq 1048576 "$held" "held bytes"
grep -q ' errors=0 verify=ok$' <<<"$out" || fail "membroker-load: $out"
[ "$cache" -gt 0 ] && [ "$cache" -le $((3 * 1024 * 1024)) ] || fail "cache of $cache bytes does not fit the 4M limit with 1M held"
pass "the cache settled at $cache bytes under the limit, nothing failed"

mb_dump_state
[ "$(mb_event_local cache max)" -gt 0 ] || fail "no max event"
assert_eq 0 "$(mb_event_local cache oom)" "oom events"
[ "$(mb_state cache pgsteal)" -gt 0 ] || fail "no pgsteal"
[ "$(mb_state cache pgscan)" -ge "$(mb_state cache pgsteal)" ] || fail "pgscan < pgsteal"
assert_eq 0 "$(mb_state cache usage)" "usage after the client left"

# Two clients: A keeps 256 pages and a cache of 600; B then allocates 400.
# B's charges fail at max, A's cache gives way, B gets everything.
pc_start a cache
pc_start b cache
assert_eq "alloc ok 256" "$(pc a alloc 256)" "A allocates"
assert_eq "cache ok 600" "$(pc a cache 600)" "A fills its cache"
assert_eq "alloc ok 400" "$(pc b alloc 400)" "B allocates at max"
assert_eq 256 "$(pc_field a app)" "A keeps the pages it uses"
cache_a=$(pc_field a cache)
[ "$cache_a" -lt 600 ] || fail "A's cache was not reclaimed ($cache_a pages)"
[ "$(pc_field a freed)" -gt 0 ] || fail "A's shrinker freed nothing"
pass "A's cache went from 600 to $cache_a pages"
settle
leak_check "two clients at max"
usage=$(mb_state cache usage)
[ "$usage" -le 1024 ] || fail "usage $usage above max"
mb_dump_state
assert_eq 0 "$(mb_event_local cache oom)" "oom events"

pc_quit a
pc_quit b
leak_check "after the clients left"
assert_eq 0 "$(mb_state cache usage)" "usage after the clients left"
mb_daemon_alive
