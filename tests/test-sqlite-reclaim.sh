#!/bin/bash
# SPDX-License-Identifier: MIT
# Cooperative reclaim of a SQLite page cache.  Tenant p/a runs a SQLite
# workload on the broker page cache (two databases of 1,113 pages, caches of
# 1,500 pages: everything cached), a query loop per database; tenant p/c
# the same on databases of pages larger than a broker page (8 KiB and
# 64 KiB: contiguous runs of 2 and 16 broker pages).  Then a noisy
# neighbour p/b (membroker-load --hold) takes more than the parent's
# MemoryMax leaves.  The daemon reclaims from p/a and p/c
# (shrink_node_memcgs() at the parent's max): the caches' shrinkers give
# unpinned pages back, whole runs for the large pages (the library counts
# them, the pgsteal of each is more than its stocks could hold), p/b gets
# its memory without an OOM, and SQLite goes on, re-reading the pages it
# lost: every result and every row still correct, those of an in-memory
# database (whose pages SQLite never unpins) too.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/sqlite-lib.sh"

export MEMBROKER_REFILL=0
# Clients that answer late on a loaded host must not turn the pressure
# into an OOM: this test is about what the caches give back, not about
# ReclaimTimeoutMSec= (250 ms by default; rounds past it count as
# fruitless, and 16 of them fail the charge).
pr_setup "ReclaimTimeoutMSec=5000"
mb_write_tenant p "Path=p" "MemoryMax=24M"       # 6144 pages
mb_write_tenant p-a "Path=p/a"
mb_write_tenant p-b "Path=p/b"
mb_write_tenant p-c "Path=p/c"
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

# Pages of 8 and 64 KiB: runs of 2 and 16 broker pages.
sq_start c p/c --cache-pages 1500
sq_expect c "open ok wide " open wide 6000 8192
sq_expect c "open ok huge " open huge 8000 65536
sq_expect c "run ok=1000 nomem=0 errors=0" run 500
assert_eq 0 "$(pc_field c fallback)" "caches left to SQLite"
c_cached=$(pc_field c pages)
c_bp=$(pc_field c broker_pages)
[ "$c_bp" -ge 600 ] || fail "only $c_bp broker pages in the caches of 8 and 64 KiB pages"
mb_dump_state
assert_eq 0 "$(mb_state p/c pgsteal)" "pgsteal of p/c before the pressure"
c_usage=$(mb_state p/c usage)
echo "p/c: $c_cached pages ($c_bp broker pages) cached, usage $c_usage pages"
[ "$c_usage" -ge "$c_bp" ] || fail "p/c is charged $c_usage pages for $c_bp broker pages of its caches"

sq_expect a "start ok 3" start
sq_expect c "start ok 2" start
# p/b wants 1,536 pages more than p's 6144 leave it.
hold_mb=$(((6144 - a_usage - c_usage + 1536 + 255) / 256))
hold=$((hold_mb * 256))
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant p/b --hold ${hold_mb}M --quiet >"$MB_TMP/b.out" 2>"$MB_TMP/b.err" &
b_pid=$!
MB_CHILDREN+=("$b_pid")
wait_for 60 eval '[ "$(usage_pages p/b)" -ge '$hold' ]' ||
        { cat "$MB_TMP/b.err"; fail "p/b did not get its $hold pages"; }
pass "p/b holds its $hold pages"
# The loops go on under the pressure, re-reading what they lost.
ops=$(pc_field a ops)
c_ops=$(pc_field c ops)
wait_for 60 eval '[ "$(pc_field a ops)" -ge $((ops + 2000)) ]' || fail "the query loops stopped"
wait_for 60 eval '[ "$(pc_field c ops)" -ge $((c_ops + 1000)) ]' || fail "the query loops of p/c stopped"
sq_expect a "stop ok" stop
sq_expect c "stop ok" stop
pc a report
pc c report
mb_dump_state
steal=$(mb_state p/a pgsteal)
freed=$(pc_field a shrinker_freed)
[ "$freed" -gt 0 ] || fail "the cache's shrinker freed nothing"
# Stocks and the spill between them hold at most ncpus * 3 * ChargeBatch
# pages: more than that came from the cache.
stock_max=$(($(nproc) * 3 * 16))
[ "$steal" -gt "$stock_max" ] || fail "pgsteal of p/a $steal: no more than its stocks ($stock_max)"
pass "p/a gave back $steal pages (pgsteal), the shrinker freed $freed database pages"
[ "$(pc_field a pages)" -lt "$cached" ] || fail "the cache did not shrink ($cached -> $(pc_field a pages))"
[ "$(pc_field a misses)" -gt 0 ] || fail "no misses after the reclaim"
assert_eq 0 "$(pc_field a errors)" "wrong results or SQLite errors"
assert_eq 0 "$(pc_field a nomem)" "SQLITE_NOMEM"
assert_eq 0 "$(mb_event_local p oom)" "oom events of p"
[ "$(mb_state p usage)" -le 6144 ] || fail "p's usage $(mb_state p usage) above its max"
sq_expect a "check ok rows=42000" check
sq_expect a "run ok=1500 nomem=0 errors=0" run 500

# The large pages: reclaimed as whole runs, the results still correct.
c_steal=$(mb_state p/c pgsteal)
c_freed=$(pc_field c shrinker_freed)
[ "$c_freed" -gt 0 ] || fail "the shrinker freed no page of 8 or 64 KiB"
[ "$c_steal" -gt "$stock_max" ] || fail "pgsteal of p/c $c_steal: no more than its stocks ($stock_max)"
[ "$(pc_field c shrinker_broker_pages)" -ge $((2 * c_freed)) ] ||
        fail "$c_freed pages of 8 or 64 KiB freed, $(pc_field c shrinker_broker_pages) broker pages: not whole runs"
pass "p/c gave back $c_steal pages (pgsteal), the shrinker freed $c_freed pages of 8 and 64 KiB"
[ "$(pc_field c pages)" -lt "$c_cached" ] || fail "the caches of p/c did not shrink ($c_cached -> $(pc_field c pages))"
assert_eq 0 "$(pc_field c errors)" "wrong results or SQLite errors in p/c"
assert_eq 0 "$(pc_field c nomem)" "SQLITE_NOMEM in p/c"
sq_expect c "check ok rows=14000" check
sq_expect c "run ok=1000 nomem=0 errors=0" run 500

kill -TERM "$b_pid"
rc=0; mb_wait "$b_pid" || rc=$?
[ $rc = 0 ] || { cat "$MB_TMP/b.err"; fail "membroker-load exited $rc"; }
grep -q "verify=ok" "$MB_TMP/b.out" || fail "membroker-load: $(cat "$MB_TMP/b.out")"
pc_quit a
pc_quit c
for db in one two; do sq_integrity a $db; done
for db in wide huge; do sq_integrity c $db; done
leak_check "after the clients left"
mb_stop_clean
