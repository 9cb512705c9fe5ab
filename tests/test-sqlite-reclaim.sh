#!/bin/bash
# SPDX-License-Identifier: MIT
# Cooperative reclaim of a SQLite page cache.  Tenant p/a runs a SQLite
# workload on the broker page cache (two databases of 1,113 pages, caches of
# 1,500 pages: everything cached), a query loop per database; then a noisy
# neighbour p/b (membroker-load --hold) takes more than the parent's
# MemoryMax leaves.  The daemon reclaims from p/a (shrink_node_memcgs() at
# the parent's max): the cache's shrinker gives unpinned pages back (the
# library counts them, p/a's pgsteal is more than its stocks could hold),
# p/b gets its memory without an OOM, and SQLite goes on, re-reading the
# pages it lost: every result and every row still correct, those of an
# in-memory database (whose pages SQLite never unpins) too.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/sqlite-lib.sh"

export MEMBROKER_REFILL=0
pr_setup
mb_write_tenant p "Path=p" "MemoryMax=16M"       # 4096 pages
mb_write_tenant p-a "Path=p/a"
mb_write_tenant p-b "Path=p/b"
mb_start_daemon

sq_start a p/a --cache-pages 1500
sq_expect a "open ok one " open one 20000 4096
sq_expect a "open ok two " open two 20000 4096
# An in-memory database: its cache is its data, never to be shrunk.
sq_expect a "open ok mem " open mem 2000 4096
sq_expect a "run ok=3000 nomem=0 errors=0" run 1000
cached=$(pc_field a pages)
[ "$cached" -ge 2100 ] || fail "only $cached pages cached: the test needs the databases in the cache"
assert_eq 0 "$(pc_field a shrinker_freed)" "pages the shrinker freed before the pressure"
mb_dump_state
assert_eq 0 "$(mb_state p/a pgsteal)" "pgsteal of p/a before the pressure"
a_usage=$(mb_state p/a usage)
echo "p/a: $cached pages cached, usage $a_usage pages"

sq_expect a "start ok 3" start
# p/b wants 9M (2304 pages): with p/a's usage that is past p's 4096.
hold=2304
[ $((a_usage + hold)) -gt 4096 ] || fail "p/a uses only $a_usage pages: no pressure"
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant p/b --hold 9M --quiet >"$MB_TMP/b.out" 2>"$MB_TMP/b.err" &
b_pid=$!
MB_CHILDREN+=("$b_pid")
wait_for 60 eval '[ "$(usage_pages p/b)" -ge '$hold' ]' ||
        { cat "$MB_TMP/b.err"; fail "p/b did not get its $hold pages"; }
pass "p/b holds its $hold pages"
# The loops go on under the pressure, re-reading what they lost.
ops=$(pc_field a ops)
wait_for 60 eval '[ "$(pc_field a ops)" -ge $((ops + 2000)) ]' || fail "the query loops stopped"
sq_expect a "stop ok" stop
pc a report
mb_dump_state
steal=$(mb_state p/a pgsteal)
freed=$(pc_field a shrinker_freed)
[ "$freed" -gt 0 ] || fail "the cache's shrinker freed nothing"
# Stocks hold at most ncpus * 2 * ChargeBatch pages: more than that came
# from the cache.
stock_max=$(($(nproc) * 2 * 16))
[ "$steal" -gt "$stock_max" ] || fail "pgsteal of p/a $steal: no more than its stocks ($stock_max)"
pass "p/a gave back $steal pages (pgsteal), the shrinker freed $freed database pages"
[ "$(pc_field a pages)" -lt "$cached" ] || fail "the cache did not shrink ($cached -> $(pc_field a pages))"
[ "$(pc_field a misses)" -gt 0 ] || fail "no misses after the reclaim"
assert_eq 0 "$(pc_field a errors)" "wrong results or SQLite errors"
assert_eq 0 "$(pc_field a nomem)" "SQLITE_NOMEM"
assert_eq 0 "$(mb_event_local p oom)" "oom events of p"
[ "$(mb_state p usage)" -le 4096 ] || fail "p's usage $(mb_state p usage) above its max"
sq_expect a "check ok rows=42000" check
sq_expect a "run ok=1500 nomem=0 errors=0" run 500

kill -TERM "$b_pid"
rc=0; wait "$b_pid" || rc=$?
[ $rc = 0 ] || { cat "$MB_TMP/b.err"; fail "membroker-load exited $rc"; }
grep -q "verify=ok" "$MB_TMP/b.out" || fail "membroker-load: $(cat "$MB_TMP/b.out")"
pc_quit a
for db in one two; do sq_integrity a $db; done
leak_check "after the clients left"
mb_stop_clean
