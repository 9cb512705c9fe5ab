#!/bin/bash
# SPDX-License-Identifier: MIT
# libmembroker-sqlite: a real SQLite application keeps its page caches on
# broker pages and gets correct results.  First a database of 8 KiB pages
# alone in tenant `wide`: each page a contiguous run of two broker pages,
# charged to the tenant (its usage grows by two pages per cached page and
# is 0 once the client left; SQLite's own cache, as before, charged
# nothing).  Then four databases in tenant `app`: 4 KiB pages (a broker
# page per database page) and 1 KiB pages (slab objects), each larger than
# its cache of 200 pages, 8 KiB and 64 KiB pages (runs of 2 and 16 broker
# pages).  Inserts, point selects, range sums, index counts and update
# transactions, first in one thread, then one thread per database while
# another thread makes SQLite shrink the caches (sqlite3_db_release_memory(),
# the xShrink method); every result and every row checked against what the
# client knows, the files checked by the sqlite3 shell.  The pages are
# charged to the tenant and go back when the client leaves.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/sqlite-lib.sh"

pr_setup
mb_write_tenant app "Path=app"
mb_write_tenant wide "Path=wide"
mb_start_daemon

# 8 KiB pages on 4 KiB broker pages: the cache is charged to the tenant.
export MEMBROKER_REFILL=0
sq_start w wide --cache-pages 200
settle
u0=$(usage_pages wide)
out=$(pc w open wide 3000 8192)
case "$out" in "open ok wide pages="*) ;; *) fail "w: open wide: $out" ;; esac
dbpages=${out##*pages=}
sq_expect w "check ok rows=3000" check
sq_expect w "run ok=500 nomem=0 errors=0" run 500
pc w report
assert_eq 0 "$(pc_field w fallback)" "caches left to SQLite (8 KiB pages on 4 KiB broker pages)"
cached=$(pc_field w pages)
[ "$cached" -ge $((dbpages * 3 / 4)) ] || fail "only $cached of the $dbpages pages of the 8 KiB database cached"
assert_eq $((2 * cached)) "$(pc_field w broker_pages)" "broker pages of $cached pages of 8 KiB"
settle
u1=$(usage_pages wide)
[ $((u1 - u0)) -ge $((2 * cached)) ] ||
        fail "tenant wide: usage $u0 -> $u1 pages with $cached pages of 8 KiB cached (want +$((2 * cached)))"
pass "tenant wide is charged $((u1 - u0)) pages for $cached cached pages of 8 KiB ($dbpages in the file)"
pc_quit w
sq_integrity w wide
mb_dump_state
assert_eq 0 "$(mb_state wide usage)" "usage of wide after the client left"
unset MEMBROKER_REFILL

sq_start a app --cache-pages 200
sq_expect a "open ok big " open big 20000 4096
sq_expect a "open ok small " open small 8000 1024
out=$(pc a open wide 3000 8192)
case "$out" in "open ok wide pages="*) pass "a: open wide -> $out" ;; *) fail "a: open wide: $out" ;; esac
pw=${out##*pages=}
out=$(pc a open huge 4000 65536)
case "$out" in "open ok huge pages="*) pass "a: open huge -> $out" ;; *) fail "a: open huge: $out" ;; esac
ph=${out##*pages=}
sq_expect a "check ok rows=35000" check
assert_eq 4 "$(pc_field a caches)" "page caches open"
assert_eq 0 "$(pc_field a fallback)" "caches left to SQLite (8 and 64 KiB pages on 4 KiB broker pages)"

sq_expect a "run ok=8000 nomem=0 errors=0" run 2000
pc a report
[ "$(pc_field a misses)" -gt 1000 ] || fail "few misses: the databases fit in the caches"
[ "$(pc_field a recycled)" -gt 0 ] || fail "no page recycled at the cache size"
[ "$(pc_field a hits)" -gt "$(pc_field a misses)" ] || fail "more misses than hits"
bp=$(pc_field a broker_pages)
# 150..200 pages of 4 KiB, and the 8 and 64 KiB databases (smaller than
# their caches) cached (nearly) whole: runs of 2 and 16 broker pages.
[ "$bp" -ge $((150 + (2 * pw + 16 * ph) * 3 / 4)) ] && [ "$bp" -le $((200 + 2 * pw + 16 * ph)) ] ||
        fail "$bp broker pages hold the caches of 4 KiB (200 pages), 8 KiB ($pw) and 64 KiB ($ph) pages"
pages=$(pc_field a pages)
[ "$pages" -gt $((200 + pw + ph)) ] || fail "the 1 KiB cache holds no pages ($pages pages, $bp broker pages)"
settle
usage=$(usage_pages app)
[ "$usage" -ge "$bp" ] || fail "tenant usage $usage pages < $bp broker pages of the caches"
pass "the tenant is charged $usage pages (caches: $bp whole broker pages and runs, 1 KiB pages in slabs)"

# One thread per database; SQLite told to shrink meanwhile.
sq_expect a "start ok 4" start
for i in 1 2 3 4 5; do
        sleep 0.3
        sq_expect a "release ok" release
done
sq_expect a "stop ok" stop
[ "$(pc_field a shrink_freed)" -gt 0 ] || fail "xShrink freed nothing"
assert_eq 0 "$(pc_field a errors)" "wrong results or SQLite errors"
assert_eq 0 "$(pc_field a nomem)" "SQLITE_NOMEM"
sq_expect a "check ok rows=35000" check
leak_check "with the caches full"

pc_quit a
for db in big small wide huge; do sq_integrity a $db; done
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
