#!/bin/bash
# SPDX-License-Identifier: MIT
# MemoryLow= protects a hot SQLite page cache from a noisy neighbour (the
# kernel's memory.low: a tenant within its effective low is reclaimed only
# when nothing else can give).  p/a runs the query loops of
# test-sqlite-reclaim.sh with MemoryLow=12M covering its cache; p/b holds
# 4M and fills a 6M cache behind a shrinker, more than p's MemoryMax=16M
# leaves.  The daemon reclaims at p's max, from p/b's own cache only: p/a's
# pgsteal stays 0, its shrinker is never asked, its cache keeps every
# page, and its results stay correct.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/sqlite-lib.sh"

export MEMBROKER_REFILL=0
# p/b's cache answering late on a loaded host must not count as a round
# that got nothing (past ReclaimTimeoutMSec=, 250 ms by default): the next
# pass would go below p/a's low.
pr_setup "ReclaimTimeoutMSec=5000"
mb_write_tenant p "Path=p" "MemoryMax=16M"       # 4096 pages
mb_write_tenant p-a "Path=p/a" "MemoryLow=12M"   # 3072 pages
mb_write_tenant p-b "Path=p/b"
mb_start_daemon

sq_start a p/a --cache-pages 1500
sq_expect a "open ok one " open one 20000 4096
sq_expect a "open ok two " open two 20000 4096
sq_expect a "run ok=2000 nomem=0 errors=0" run 1000
cached=$(pc_field a pages)
[ "$cached" -ge 2000 ] || fail "only $cached pages cached: the test needs the databases in the cache"
a_usage=$(usage_pages p/a)
[ "$a_usage" -le 3072 ] || fail "p/a uses $a_usage pages, more than its low: not protected"
echo "p/a: $cached pages cached, usage $a_usage pages (low 3072)"

sq_expect a "start ok 2" start
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant p/b --hold 4M --cache 6M --quiet >"$MB_TMP/b.out" 2>"$MB_TMP/b.err" &
b_pid=$!
MB_CHILDREN+=("$b_pid")
# p/b's cache fills until the daemon takes pages back from it.
wait_for 60 eval '[ "$(usage_pages p/b)" -ge 1024 ] && [ "$(mb_state p/b pgsteal)" -gt 0 ]' ||
        { cat "$MB_TMP/b.err"; fail "p/b was not reclaimed at p's max"; }
ops=$(pc_field a ops)
wait_for 60 eval '[ "$(pc_field a ops)" -ge $((ops + 2000)) ]' || fail "the query loops stopped"
sq_expect a "stop ok" stop
pc a report
mb_dump_state
[ "$(mb_event_local p max)" -gt 0 ] || fail "p never reached its max: no pressure"
pass "p reached its max $(mb_event_local p max) times; p/b gave $(mb_state p/b pgsteal) pages back"
assert_eq 0 "$(mb_state p/a pgsteal)" "pgsteal of p/a"
assert_eq 0 "$(pc_field a shrinker_freed)" "pages p/a's shrinker freed"
assert_eq 0 "$(mb_event_local p/a low)" "low events of p/a"
# (Updates may split an index page: the cache may grow, never shrink.)
[ "$(pc_field a pages)" -ge "$cached" ] || fail "p/a's cache shrank: $cached -> $(pc_field a pages) pages"
pass "p/a's cache kept its $cached pages ($(pc_field a pages) now)"
assert_eq 0 "$(pc_field a errors)" "wrong results or SQLite errors"
assert_eq 0 "$(pc_field a nomem)" "SQLITE_NOMEM"
assert_eq 0 "$(mb_event_local p oom)" "oom events of p"
sq_expect a "check ok rows=40000" check

kill -TERM "$b_pid"
rc=0; wait "$b_pid" || rc=$?
[ $rc = 0 ] || { cat "$MB_TMP/b.err"; fail "membroker-load exited $rc"; }
grep -q "verify=ok" "$MB_TMP/b.out" || fail "membroker-load: $(cat "$MB_TMP/b.out")"
pc_quit a
leak_check "after the clients left"
mb_stop_clean
