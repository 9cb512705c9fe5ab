#!/bin/bash
# SPDX-License-Identifier: MIT
# libmembroker-sqlite: a real SQLite application keeps its page caches on
# broker pages and gets correct results.  Three databases, each larger
# than its cache of 200 pages: 4 KiB pages (a broker page per database
# page), 1 KiB pages (slab objects) and 8 KiB pages (larger than a broker
# page: SQLite's own cache).  Inserts, point selects, range sums, index
# counts and update transactions, first in one thread, then one thread per
# database while another thread makes SQLite shrink the caches
# (sqlite3_db_release_memory(), the xShrink method); every result and
# every row checked against what the client knows, the files checked by
# the sqlite3 shell.  The pages are charged to the tenant and go back when
# the client leaves.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/sqlite-lib.sh"

pr_setup
mb_write_tenant app "Path=app"
mb_start_daemon

sq_start a app --cache-pages 200
sq_expect a "open ok big " open big 20000 4096
sq_expect a "open ok small " open small 8000 1024
sq_expect a "open ok wide " open wide 3000 8192
sq_expect a "check ok rows=31000" check
assert_eq 3 "$(pc_field a caches)" "page caches open"
assert_eq 1 "$(pc_field a fallback)" "caches left to SQLite (8 KiB pages on 4 KiB broker pages)"

sq_expect a "run ok=6000 nomem=0 errors=0" run 2000
pc a report
[ "$(pc_field a misses)" -gt 1000 ] || fail "few misses: the databases fit in the caches"
[ "$(pc_field a recycled)" -gt 0 ] || fail "no page recycled at the cache size"
[ "$(pc_field a hits)" -gt "$(pc_field a misses)" ] || fail "more misses than hits"
bp=$(pc_field a broker_pages)
[ "$bp" -ge 150 ] && [ "$bp" -le 200 ] || fail "$bp broker pages hold the 4 KiB cache of 200 pages"
pages=$(pc_field a pages)
[ "$pages" -gt "$bp" ] || fail "the 1 KiB cache holds no pages ($pages pages, $bp broker pages)"
settle
usage=$(usage_pages app)
[ "$usage" -ge "$bp" ] || fail "tenant usage $usage pages < $bp broker pages of the cache"
pass "the tenant is charged $usage pages (cache: $bp whole broker pages, $((pages - bp)) 1 KiB pages in slabs)"

# One thread per database; SQLite told to shrink meanwhile.
sq_expect a "start ok 3" start
for i in 1 2 3 4 5; do
        sleep 0.3
        sq_expect a "release ok" release
done
sq_expect a "stop ok" stop
[ "$(pc_field a shrink_freed)" -gt 0 ] || fail "xShrink freed nothing"
assert_eq 0 "$(pc_field a errors)" "wrong results or SQLite errors"
assert_eq 0 "$(pc_field a nomem)" "SQLITE_NOMEM"
sq_expect a "check ok rows=31000" check
leak_check "with the caches full"

pc_quit a
for db in big small wide; do sq_integrity a $db; done
mb_dump_state
assert_eq 0 "$(mb_state app usage)" "usage after the client left"
leak_check "after the client left"

# The same workload on SQLite's own cache (the comparison the benchmark
# makes): the same answers.
sq_start d app --cache-pages 200 --default-pcache
sq_expect d "open ok big " open big 20000 4096
sq_expect d "run ok=2000 nomem=0 errors=0" run 2000
assert_eq 0 "$(pc_field d caches)" "broker caches with SQLite's own"
pc_quit d
mb_stop_clean
