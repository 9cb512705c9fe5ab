#!/bin/bash
# SPDX-License-Identifier: MIT
# Unreclaimable caches have no shrinker: Reclaim gets only the client's
# stock from a client whose empty slabs are all unreclaimable (and whose
# reclaimable slabs all hold live objects), and at max such a client gets
# ENOMEM and an oom event -- its empty unreclaimable slabs stay where they
# are.  Live objects keep their contents throughout; nothing leaks.
. "$top_srcdir/tests/slab-lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

MAX_PAGES=1024
pr_setup "PageSize=4K"
mb_write_tenant app "Path=app" "MemoryMax=4M" "AllowUsers=$(id -un)"
bus_run

usage_now() { echo $(( $(tenant_prop app MemoryCurrent) / PAGE )); }
stat_is() { [ "$(stat_value app "$1")" = "$2" ]; }

sc_start a app
assert_eq "fill ok 600" "$(pc a fill u 600)" "live unreclaimable objects"
assert_eq "fill ok 4000" "$(pc a fill u 4000)" "fill u"
assert_eq "free ok 4000" "$(pc a free u 4000)" "free u"
# Reclaimable objects, all live: their slab pages are all pinned.
assert_eq "fill ok 600" "$(pc a fill r 600)" "live reclaimable objects"
assert_eq "drain ok" "$(pc a drain)" "slab stat written out"
sc_report a
declare -A R0
for k in "${!SC[@]}"; do R0[$k]=${SC[$k]}; done
[ $((R0[u_slabs] - R0[u_pinned])) -gt 8 ] || fail "too few empty unreclaimable slab pages for the test"
assert_eq "${R0[r_pinned]}" "${R0[r_slabs]}" "every reclaimable slab page holds a live object"
wait_for 10 stat_is slab_unreclaimable "${R0[u_bytes]}" ||
        fail "slab_unreclaimable is $(stat_value app slab_unreclaimable), the client holds ${R0[u_bytes]}"

# Reclaim of everything returns the stock, and nothing else.
before=$(usage_now)
mb_dump_state
steal0=$(mb_state app pgsteal)
assert_eq "again $((R0[stock] * PAGE))" "$(reclaim_call app $((100 << 20)))" "Reclaim(app, 100M) = the stock (then EAGAIN)"
assert_eq "${R0[stock]}" $((before - $(usage_now))) "usage drop in pages"
mb_dump_state
assert_eq $((steal0 + R0[stock])) "$(mb_state app pgsteal)" "pgsteal"
sc_report a
for k in u_slabs u_empty u_cpu u_freed r_slabs r_freed r_live u_live r_bytes u_bytes; do
        assert_eq "${R0[$k]}" "${SC[$k]}" "$k unchanged by Reclaim"
done
assert_eq 0 "${SC[stock]}" "stock"
pass "live objects intact (verify=${SC[verify]})"
wait_for 10 stat_is slab_unreclaimable "${R0[u_bytes]}" || fail "slab_unreclaimable changed"
leak_check "after Reclaim"

# At max: everything up to max, then one page more fails.
free_pages=$((MAX_PAGES - SC[pages]))
out=$(pc a pages $((free_pages + 8)))
assert_eq "pages ENOMEM $free_pages" "$(cut -d' ' -f1-3 <<<"$out")" "pages beyond max"
grep -q "at max" <<<"$out" || fail "no reason given: $out"
pass "ENOMEM at max: ${out#pages ENOMEM $free_pages }"
sc_report a
for k in u_slabs u_empty u_cpu u_freed r_slabs r_freed r_live u_live; do
        assert_eq "${R0[$k]}" "${SC[$k]}" "$k unchanged at max"
done
assert_eq "$free_pages" "${SC[app]}" "whole pages got"
[ "${SC[oom]}" -gt 0 ] || fail "the client's event callback saw no oom event"
mb_dump_state
[ "$(mb_event_local app oom)" -gt 0 ] || fail "no oom event counted"
[ "$(mb_event_local app max)" -gt 0 ] || fail "no max event counted"
assert_eq "$MAX_PAGES" "$(mb_state app usage)" "usage at max"
leak_check "at max"

pc_quit a
leak_check "after the client left"
mb_dump_state
assert_eq 0 "$(mb_state app usage)" "usage after the client left"
mb_stop_clean
