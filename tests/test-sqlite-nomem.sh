#!/bin/bash
# SPDX-License-Identifier: MIT
# A SQLite page cache at its tenant's limit.  The client fills app's
# MemoryMax=4M with pages of its own ("hold"): the charges at max reclaim
# the client's own cache through its shrinker (as the kernel reclaims a
# cgroup's page cache at memory.max) until nothing is left to give.  The
# workload then finds no page: the cache's xFetch returns NULL (counted as
# alloc_failures), SQLite reports SQLITE_NOMEM and rolls the transaction
# back -- no wrong result, no other error, no crash.  Once the pages are
# freed the same connections work again and every row is intact.  Then the
# same with a database of 16 KiB pages (contiguous runs of four broker
# pages): at the limit no run can be had, and the same holds.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/sqlite-lib.sh"

export MEMBROKER_REFILL=0
pr_setup
mb_write_tenant app "Path=app" "MemoryMax=4M"    # 1024 pages
mb_start_daemon

sq_start a app --cache-pages 2000
sq_expect a "open ok db " open db 10000 4096
sq_expect a "run ok=300 nomem=0 errors=0" run 300
cached=$(pc_field a pages)
[ "$cached" -ge 400 ] || fail "only $cached pages cached"

out=$(pc a hold 2000)
case "$out" in "hold ENOMEM "*) ;; *) fail "hold past max: $out" ;; esac
pass "the client holds ${out#hold ENOMEM } pages of app's 1024"
[ "$(pc_field a shrinker_freed)" -gt 0 ] || fail "the charges at max did not shrink the cache"
left=$(pc_field a pages)
echo "cache: $cached pages before, $left left"

out=$(pc a run 100)
echo "at the limit: $out"
case "$out" in "run ok="*" nomem="*" errors=0") ;; *) fail "run at the limit: $out" ;; esac
nomem=$(sed 's/.* nomem=\([0-9]*\) .*/\1/' <<<"$out")
[ "$nomem" -gt 0 ] || fail "no SQLITE_NOMEM at the limit: $out"
[ "$(pc_field a alloc_failures)" -gt 0 ] || fail "no allocation failure counted"
mb_dump_state
[ "$(mb_event_local app oom)" -gt 0 ] || fail "no oom event on app"
[ "$(mb_state app usage)" -le 1024 ] || fail "usage $(mb_state app usage) above max"

sq_expect a "unhold ok" unhold
sq_expect a "run ok=300 nomem=0 errors=0" run 300
sq_expect a "check ok rows=10000" check
assert_eq 0 "$(pc_field a errors)" "wrong results or SQLite errors"
pc_quit a
sq_integrity a db
leak_check "after the client left"

sq_start w app --cache-pages 2000
sq_expect w "open ok wide " open wide 8000 16384
sq_expect w "run ok=300 nomem=0 errors=0" run 300
[ "$(pc_field w broker_pages)" -ge 400 ] || fail "only $(pc_field w broker_pages) broker pages cached in runs"
out=$(pc w hold 2000)
case "$out" in "hold ENOMEM "*) ;; *) fail "hold past max: $out" ;; esac
[ "$(pc_field w shrinker_freed)" -gt 0 ] || fail "the charges at max did not shrink the cache of 16 KiB pages"
out=$(pc w run 100)
echo "at the limit: $out"
case "$out" in "run ok="*" nomem="*" errors=0") ;; *) fail "run at the limit (16 KiB pages): $out" ;; esac
nomem=$(sed 's/.* nomem=\([0-9]*\) .*/\1/' <<<"$out")
[ "$nomem" -gt 0 ] || fail "no SQLITE_NOMEM at the limit with 16 KiB pages: $out"
[ "$(pc_field w alloc_failures)" -gt 0 ] || fail "no allocation failure of a run counted"
sq_expect w "unhold ok" unhold
sq_expect w "run ok=300 nomem=0 errors=0" run 300
sq_expect w "check ok rows=8000" check
assert_eq 0 "$(pc_field w errors)" "wrong results or SQLite errors (16 KiB pages)"
pc_quit w
sq_integrity w wide
leak_check "after the client of 16 KiB pages left"
mb_stop_clean
