#!/bin/bash
# SPDX-License-Identifier: MIT
# Proactive reclaim (Reclaim over D-Bus, membrokerctl reclaim) takes the
# empty slabs of a client's reclaimable caches through their shrinkers: the
# tenant's usage drops by exactly what Reclaim returns, pgsteal rises by as
# much, the reclaimable caches keep only the slab pages that hold live
# objects, the unreclaimable caches keep even their empty slabs, and every
# live object still holds its contents.  With an application shrinker that
# frees live objects of a reclaimable cache (a dentry-like LRU), the
# tenant's slab_reclaimable drops too.  Nothing leaks.
. "$top_srcdir/tests/slab-lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup "PageSize=4K"
mb_write_tenant app "Path=app" "AllowUsers=$(id -un)"
bus_run

# usage_now : MemoryCurrent of app in pages
usage_now() { echo $(( $(tenant_prop app MemoryCurrent) / PAGE )); }
# pgsteal_now : pgsteal of app (count), flushed
pgsteal_now() { mb_dump_state; mb_state app pgsteal; }
# stat_is KEY VALUE : app's GetStatText shows KEY = VALUE
stat_is() { [ "$(stat_value app "$1")" = "$2" ]; }

sc_start a app
# Live objects in both kinds of caches, then empty slabs in both: fill and
# free the most recent objects again (the empty slabs the caches keep, and
# those their per-CPU lists would empty, stay with the client).
assert_eq "fill ok 600" "$(pc a fill r 600)" "live reclaimable objects"
assert_eq "fill ok 600" "$(pc a fill u 600)" "live unreclaimable objects"
for c in r u; do
        assert_eq "fill ok 8000" "$(pc a fill $c 8000)" "fill $c"
        assert_eq "free ok 8000" "$(pc a free $c 8000)" "free $c"
done
assert_eq "drain ok" "$(pc a drain)" "slab stat written out"
sc_report a
declare -A R0
for k in "${!SC[@]}"; do R0[$k]=${SC[$k]}; done
cached_r=$((R0[r_slabs] - R0[r_pinned]))
cached_u=$((R0[u_slabs] - R0[u_pinned]))
echo "before: ${R0[r_slabs]} reclaimable slab pages (${R0[r_pinned]} with live objects)," \
     "${R0[u_slabs]} unreclaimable (${R0[u_pinned]} with live objects), stock ${R0[stock]}"
[ "$cached_r" -gt 8 ] || fail "only $cached_r reclaimable slab pages are empty: the test needs more"
[ "$cached_u" -gt 8 ] || fail "only $cached_u unreclaimable slab pages are empty: the test needs more"
wait_for 10 stat_is slab_reclaimable "${R0[r_bytes]}" ||
        fail "slab_reclaimable is $(stat_value app slab_reclaimable), the client holds ${R0[r_bytes]}"
wait_for 10 stat_is slab_unreclaimable "${R0[u_bytes]}" ||
        fail "slab_unreclaimable is $(stat_value app slab_unreclaimable), the client holds ${R0[u_bytes]}"
leak_check "before reclaim"

# 1. A bounded Reclaim: more than the stock holds, so the shrinkers must
#    give slab pages.  The whole amount comes back.
ask=$((R0[stock] + cached_r / 2))
before=$(usage_now)
steal0=$(pgsteal_now)
assert_eq "t $((ask * PAGE))" "$(mgr_call Reclaim st app $((ask * PAGE)))" "Reclaim(app, stock + $((cached_r / 2)) pages)"
after=$(usage_now)
# (A shrinker may free more than asked; what does not fit the stock goes
# back on its own, so usage may drop by more than was returned.)
[ $((before - after)) -ge "$ask" ] || fail "usage dropped by $((before - after)) pages, Reclaim returned $ask"
assert_eq $((steal0 + ask)) "$(pgsteal_now)" "pgsteal after Reclaim of $ask pages"
sc_report a
[ "${SC[r_slabs]}" -le $((R0[r_slabs] - cached_r / 2)) ] ||
        fail "reclaimable slab pages ${R0[r_slabs]} -> ${SC[r_slabs]}: the shrinkers gave less than $((cached_r / 2))"
pass "reclaimable slab pages ${R0[r_slabs]} -> ${SC[r_slabs]}"
for k in u_slabs u_empty u_cpu u_freed; do
        assert_eq "${R0[$k]}" "${SC[$k]}" "unreclaimable caches: $k unchanged"
done

# 2. Reclaim of everything: the stock and every empty reclaimable slab come
#    back, exactly; only the pages with live objects stay.
sc_report a
declare -A R1
for k in "${!SC[@]}"; do R1[$k]=${SC[$k]}; done
want=$((R1[stock] + R1[r_slabs] - R1[r_pinned]))
[ "$want" -gt 0 ] || fail "nothing left to reclaim"
before=$(usage_now)
steal0=$(pgsteal_now)
out=$(reclaim_call app $((100 << 20)))
assert_eq "again $((want * PAGE))" "$out" "Reclaim(app, 100M) = stock + empty reclaimable slabs (then EAGAIN)"
after=$(usage_now)
assert_eq "$want" $((before - after)) "usage drop in pages"
assert_eq $((steal0 + want)) "$(pgsteal_now)" "pgsteal"
sc_report a
assert_eq "${R1[r_pinned]}" "${SC[r_slabs]}" "reclaimable slab pages left = pages with live objects"
assert_eq 0 "${SC[r_empty]}" "empty reclaimable slabs left"
assert_eq 0 "${SC[r_cpu]}" "objects on the reclaimable caches' per-CPU lists"
assert_eq 0 "${SC[stock]}" "stock"
for k in u_slabs u_empty u_cpu u_freed r_live u_live r_bytes u_bytes; do
        assert_eq "${R1[$k]}" "${SC[$k]}" "$k unchanged"
done
assert_eq $((SC[r_slabs] + SC[u_slabs] + SC[b_slabs] + SC[app])) "$after" "usage = slab pages + pages, in pages"
pass "live objects intact after reclaim (verify=${SC[verify]})"
# The live objects were not touched: the slab stat stays.
assert_eq "drain ok" "$(pc a drain)" "slab stat written out"
wait_for 10 stat_is slab_reclaimable "${R0[r_bytes]}" ||
        fail "slab_reclaimable is $(stat_value app slab_reclaimable), live objects ${R0[r_bytes]}"
pass "slab_reclaimable = ${R0[r_bytes]} (live objects only)"
wait_for 10 stat_is slab_unreclaimable "${R0[u_bytes]}" || fail "slab_unreclaimable changed"
leak_check "after reclaiming the empty slabs"

# 3. membrokerctl reclaim, on new empty slabs.
assert_eq "fill ok 4000" "$(pc a fill r 4000)" "fill r"
assert_eq "free ok 4000" "$(pc a free r 4000)" "free r"
out=$(mb_ctl reclaim app 64K)
printf '%s\n' "$out" | grep -Eqx "Reclaimed 64.0K of 64.0K from app" || fail "membrokerctl reclaim: $out"
pass "membrokerctl reclaim app 64K: $out"
sc_report a
leak_check "after membrokerctl reclaim"

# 4. A dentry-like cache: live objects of the reclaimable caches on an LRU
#    that an application shrinker frees.  Reclaim frees them; the slabs they
#    empty come back; slab_reclaimable drops to what is still live.
assert_eq "lru ok 6000" "$(pc a lru 6000)" "6000 objects on the LRU"
assert_eq "drain ok" "$(pc a drain)" "slab stat written out"
sc_report a
lru_bytes=${SC[r_bytes]}
[ "$lru_bytes" -gt "${R0[r_bytes]}" ] || fail "the LRU objects do not show in r_bytes"
wait_for 10 stat_is slab_reclaimable "$lru_bytes" ||
        fail "slab_reclaimable is $(stat_value app slab_reclaimable), the client holds $lru_bytes"
before=$(usage_now)
steal0=$(pgsteal_now)
out=$(reclaim_call app $((100 << 20)))
case "$out" in "again "[0-9]*) ;; *) fail "Reclaim(app, 100M): $out" ;; esac
got=$(( ${out#again } / PAGE ))
after=$(usage_now)
assert_eq "$got" $((before - after)) "usage drop = what Reclaim returned (pages)"
assert_eq $((steal0 + got)) "$(pgsteal_now)" "pgsteal"
assert_eq "drain ok" "$(pc a drain)" "slab stat written out"
sc_report a
[ "${SC[lru_freed]}" -gt 0 ] || fail "the LRU shrinker freed nothing"
[ "${SC[r_bytes]}" -lt "$lru_bytes" ] || fail "no reclaimable object was freed"
wait_for 10 stat_is slab_reclaimable "${SC[r_bytes]}" ||
        fail "slab_reclaimable is $(stat_value app slab_reclaimable), the client holds ${SC[r_bytes]}"
pass "slab_reclaimable $lru_bytes -> ${SC[r_bytes]}; $got pages reclaimed, ${SC[lru_freed]} LRU objects freed"
# One Reclaim is enough: a client that gave something is asked again in the
# next round (as memory_reclaim() scans again while it makes progress), and
# then the slab shrinker gives the slabs the LRU shrinker emptied.
assert_eq 0 "${SC[r_empty]}" "empty reclaimable slabs left after one Reclaim of everything"
assert_eq "${SC[r_pinned]}" "${SC[r_slabs]}" "reclaimable slab pages left = pages with live objects (after the LRU)"
assert_eq "${R0[u_bytes]}" "${SC[u_bytes]}" "unreclaimable bytes unchanged"
leak_check "after reclaiming the LRU"

pc_quit a
leak_check "after the client left"
assert_eq 0 "$(usage_now)" "usage after the client left"
mb_stop_clean
