#!/bin/bash
# SPDX-License-Identifier: MIT
# Reclaim does not ask what cannot be reclaimed, as the kernel skips anon
# pages without swap (can_reclaim_anon_pages()) and memcg-aware shrinkers
# whose last count was empty (shrink_slab_memcg()):
#   - a client with no shrinker whose answer emptied its stocks says
#     "nothing left" (Uncharge.nothing_left): one ENOMEM at its max costs it
#     one Drain (and at most one Reclaim), not a Drain and 16 Reclaims; the
#     max and oom events are those of before;
#   - a later reclaim job asks it again (pages it freed into its stock
#     meanwhile are taken);
#   - a client with a shrinker is asked in every round, and its shrinker's
#     pages are still reclaimed next to a client that has nothing left;
#   - a raw client that claims "nothing left" while keeping its pages only
#     stops being asked: the others still are, its pages stay charged to
#     it, and the accounting stays exact.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

# skipped : requests the daemon did not send (clients with nothing left),
# from the last state dump
skipped() { sed -n 's/^state: reclaim .* skipped=\([0-9]*\) .*/\1/p' "$MB_TMP/state.dump"; }

pr_setup
mb_write_tenant bare "Path=bare" "MemoryMax=1M"         # 256 pages
mb_write_tenant busy "Path=busy" "MemoryMax=1M"
mb_write_tenant mix "Path=mix" "MemoryMax=1M"
mb_write_tenant liar "Path=liar" "MemoryMax=1M"
mb_start_daemon

# ---- a client with nothing but its stock ----
pc_start a bare --no-shrinker
pc_expect a "alloc ENOMEM " "alloc past max" alloc 300
mb_dump_state
max0=$(mb_event_local bare max)
oom0=$(mb_event_local bare oom)
req0=$(pc_field a requests)

pc_expect a "alloc ENOMEM 0 " "one more page at max" alloc 1
req1=$(pc_field a requests)
asked=$((req1 - req0))
[ "$asked" -ge 1 ] || fail "the client was not even drained ($asked requests)"
[ "$asked" -le 2 ] || fail "one ENOMEM cost the client without a shrinker $asked reclaim requests (at most 2)"
pass "one ENOMEM cost the client without a shrinker $asked request(s)"
skipped0=$(skipped)
mb_dump_state
[ "$(skipped)" -ge $((skipped0 + 16 - asked)) ] || fail "the daemon counts $(skipped) skipped requests, $skipped0 before"
[ "$(mb_event_local bare max)" -gt "$max0" ] || fail "no max event for the second ENOMEM"
assert_eq $((oom0 + 1)) "$(mb_event_local bare oom)" "oom events after one more ENOMEM"

# A later job asks again: pages freed into the stock (no message to the
# daemon) are drained for another client's charge.
assert_eq "free ok 4" "$(pc a free 4)" "A frees 4 pages into its stock"
pc_start b bare --no-shrinker
req0=$(pc_field a requests)
assert_eq "alloc ok 4" "$(pc b alloc 4)" "B gets the pages A freed"
[ "$(pc_field a requests)" -gt "$req0" ] || fail "a later job did not ask A again"
pass "a later job asked A again and took its stock"
settle
leak_check "clients without a shrinker at max"
pc_quit b
pc_quit a

# ---- a client with a shrinker gets every round ----
# Its shrinker frees nothing (busy objects): drain, then 16 reclaim rounds
# (MAX_RECLAIM_RETRIES), then oom.
pc_start c busy --shrink-skip 1000000
assert_eq "cache ok 16" "$(pc c cache 16)" "C fills a cache"
pc_expect c "alloc ENOMEM " "alloc past max with a busy cache" alloc 300
req0=$(pc_field c requests)
scans0=$(pc_field c scans)
pc_expect c "alloc ENOMEM 0 " "one more page at max with a busy cache" alloc 1
asked=$(($(pc_field c requests) - req0))
scans=$(($(pc_field c scans) - scans0))
[ "$asked" -ge 17 ] || fail "the client with a shrinker got $asked requests for one ENOMEM (a drain and 16 rounds)"
[ "$scans" -ge 16 ] || fail "its shrinker was called $scans times for one ENOMEM (16 rounds)"
pass "the client with a shrinker got $asked requests, its shrinker $scans calls"
settle
leak_check "a busy cache at max"
pc_quit c

# ---- a client with nothing left next to one with a cache ----
pc_start a mix --no-shrinker
pc_start c mix
pc_start b mix --no-shrinker
assert_eq "alloc ok 64" "$(pc a alloc 64)" "A allocates"
assert_eq "cache ok 150" "$(pc c cache 150)" "C fills its cache"
assert_eq "alloc ok 120" "$(pc b alloc 120)" "B allocates at max: C's cache gives way"
assert_eq 64 "$(pc_field a app)" "A keeps its pages"
cache_c=$(pc_field c cache)
[ "$cache_c" -lt 150 ] || fail "C's cache was not reclaimed ($cache_c pages)"
[ "$(pc_field c freed)" -gt 0 ] || fail "C's shrinker freed nothing"
pass "C's cache went from 150 to $cache_c pages"
settle
leak_check "a cache next to clients with nothing left"
mb_dump_state
assert_eq 0 "$(mb_event_local mix oom)" "oom events of mix"
pc_quit a
pc_quit b
pc_quit c

# ---- a raw client that says "nothing left" and keeps its pages ----
pc_start c liar
assert_eq "cache ok 150" "$(pc c cache 150)" "C fills its cache"
mb_dump_state
skipped0=$(skipped)
WIRE_CLIENT_NOTHING_LEFT=1 "$WIRE_CLIENT" --socket "$MB_SOCK" --name liar hello liar charge 64 expect-ok \
        charge 100 expect-ok print-held hold uncharge-all expect-ok >"$MB_TMP/liar.out" 2>&1 &
liar=$!
MB_CHILDREN+=("$liar")
wait_for 30 grep -q '^ready' "$MB_TMP/liar.out" || { cat "$MB_TMP/liar.out"; fail "the raw client did not charge"; }
grep -q '^held=164$' "$MB_TMP/liar.out" || { cat "$MB_TMP/liar.out"; fail "the raw client does not hold 164 pages"; }
cache_c=$(pc_field c cache)
[ "$cache_c" -lt 150 ] || fail "C's cache was not reclaimed for the raw client's charge ($cache_c pages)"
pass "the raw client's charge took C's cache (150 -> $cache_c pages), its own 164 pages stay charged"
# Exact accounting with the raw client (it keeps no stats of its own):
# root = liar's usage = pages in liar's arena = C's pages + stock + 164.
settle
mb_dump_state
[ "$(skipped)" -gt "$skipped0" ] || fail "the raw client's 'nothing left' was not taken (skipped $(skipped))"
usage=$(mb_state liar usage)
[ "$usage" -le 256 ] || fail "usage of liar above max: $usage"
assert_eq "$usage" "$(mb_state / usage)" "root usage"
assert_eq "$usage" "$(mb_state liar arena_used)" "pages used in liar's arena"
assert_eq "$usage" $(($(mb_state liar pages) + $(mb_state liar stock) + 164)) "C's pages + stock + the raw client's 164"
kill -TERM "$liar"
wait "$liar" || { cat "$MB_TMP/liar.out"; fail "the raw client failed"; }
pc_quit c
leak_check "after the clients left"
assert_eq 0 "$(mb_state liar usage)" "usage of liar after the clients left"
mb_daemon_alive
