#!/bin/bash
# SPDX-License-Identifier: MIT
# A tenant at max whose client keeps empty slabs in reclaimable caches goes
# on allocating: the charge that fails at max drains the stock and asks the
# client for pages, the slab shrinkers give the empty slabs back, the charge
# goes through -- for whole pages and for new slabs of an unreclaimable
# cache alike.  max events are counted, no oom, no ENOMEM; the unreclaimable
# caches keep their empty slabs; live objects keep their contents; nothing
# leaks.
. "$top_srcdir/tests/slab-lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

MAX_PAGES=1024
pr_setup "PageSize=4K"
mb_write_tenant app "Path=app" "MemoryMax=4M" "AllowUsers=$(id -un)"
mb_start_daemon

# cached_slabs : empty (or emptiable) reclaimable slab pages in SC
cached_slabs() { echo $((SC[r_slabs] - SC[r_pinned])); }

sc_start a app
assert_eq "fill ok 600" "$(pc a fill r 600)" "live reclaimable objects"
assert_eq "fill ok 600" "$(pc a fill u 600)" "live unreclaimable objects"
for c in u r; do
        assert_eq "fill ok 5000" "$(pc a fill $c 5000)" "fill $c"
        assert_eq "free ok 5000" "$(pc a free $c 5000)" "free $c"
done
sc_report a
declare -A R0
for k in "${!SC[@]}"; do R0[$k]=${SC[$k]}; done
cached=$(cached_slabs)
[ "$cached" -ge 16 ] || fail "only $cached reclaimable slab pages are empty: the test needs more"
mb_dump_state
max0=$(mb_event_local app max)
leak_check "before"

# 1. Whole pages: what is free under max (max minus the pages in use: the
#    stock is the client's own), and half the empty reclaimable slabs more.
free_pages=$((MAX_PAGES - R0[pages]))
n=$((free_pages + cached / 2))
echo "pages in use ${R0[pages]} of $MAX_PAGES, $cached empty reclaimable slab pages; allocating $n pages"
assert_eq "pages ok $n" "$(pc a pages $n)" "$n pages at max"
sc_report a
[ "${SC[r_slabs]}" -le $((R0[r_slabs] - cached / 2)) ] ||
        fail "reclaimable slab pages ${R0[r_slabs]} -> ${SC[r_slabs]}: fewer than $((cached / 2)) given back"
[ "${SC[r_slabs]}" -ge "${SC[r_pinned]}" ] || fail "fewer slab pages than pages with live objects"
pass "reclaimable slab pages ${R0[r_slabs]} -> ${SC[r_slabs]} (${SC[r_pinned]} hold live objects)"
for k in u_slabs u_empty u_freed r_live u_live r_bytes u_bytes; do
        assert_eq "${R0[$k]}" "${SC[$k]}" "$k unchanged"
done
[ "${SC[max]}" -gt 0 ] || fail "the client's event callback saw no max event"
assert_eq 0 "${SC[oom]}" "oom events the client saw"
mb_dump_state
[ "$(mb_event_local app max)" -gt "$max0" ] || fail "no max event counted"
assert_eq 0 "$(mb_event_local app oom)" "oom events"
# (Not all of them count in pgsteal: the shrinkers may free more than asked,
# and what does not fit the answer goes back as an ordinary uncharge.)
[ "$(mb_state app pgsteal)" -gt 0 ] || fail "no pgsteal: the client gave nothing in answer to Reclaim"
[ "$(mb_state app usage)" -le $MAX_PAGES ] || fail "usage $(mb_state app usage) above max"
pass "live objects and pages intact (verify=${SC[verify]})"
leak_check "after whole pages at max"

# 2. Objects of an unreclaimable cache of one object per slab page (so N
#    objects need N new pages), at max: room first, new empty reclaimable
#    slabs, then N = free pages + half of those slabs.
napp=${SC[app]}
assert_eq "unpages ok $napp" "$(pc a unpages "$napp")" "the whole pages go back"
assert_eq "fill ok 3000" "$(pc a fill r 3000)" "fill r"
assert_eq "free ok 3000" "$(pc a free r 3000)" "free r"
sc_report a
declare -A R1
for k in "${!SC[@]}"; do R1[$k]=${SC[$k]}; done
cached=$(cached_slabs)
[ "$cached" -ge 16 ] || fail "only $cached reclaimable slab pages are empty: the test needs more"
assert_eq 0 "${R1[b_slabs]}" "slabs of the big-object cache before"
mb_dump_state
max0=$(mb_event_local app max)
n=$((MAX_PAGES - R1[pages] + cached / 2))
echo "pages in use ${R1[pages]} of $MAX_PAGES, $cached empty reclaimable slab pages; allocating $n big objects"
assert_eq "fill ok $n" "$(pc a fill b $n)" "$n one-page objects at max"
sc_report a
assert_eq "$n" "${SC[b_slabs]}" "slab pages of the big-object cache"
[ "${SC[r_slabs]}" -le $((R1[r_slabs] - cached / 2)) ] ||
        fail "reclaimable slab pages ${R1[r_slabs]} -> ${SC[r_slabs]}: fewer than $((cached / 2)) given back"
pass "reclaimable slab pages ${R1[r_slabs]} -> ${SC[r_slabs]}"
for k in u_slabs u_empty u_freed r_live u_live r_bytes u_bytes; do
        assert_eq "${R1[$k]}" "${SC[$k]}" "$k unchanged"
done
mb_dump_state
[ "$(mb_event_local app max)" -gt "$max0" ] || fail "no max event counted"
assert_eq 0 "$(mb_event_local app oom)" "oom events"
[ "$(mb_state app usage)" -le $MAX_PAGES ] || fail "usage $(mb_state app usage) above max"
leak_check "after big objects at max"

pc_quit a
leak_check "after the client left"
mb_dump_state
assert_eq 0 "$(mb_state app usage)" "usage after the client left"
mb_stop_clean
