#!/bin/bash
# Limits: a charge past a tenant's or an ancestor's max fails with ENOMEM and
# a reason naming the tenant at max, the connection stays usable, usage stays
# exact, and max/oom events are counted where the limit was hit (locally)
# and up the tree (hierarchically), like memcg_memory_event().
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant p "Path=p" "MemoryMax=400K"        # 100 pages
mb_write_tenant a "Path=p/a" "MemoryMax=240K"      # 60 pages
mb_write_tenant b "Path=p/b"
mb_start_daemon

# The client of p/a stays attached: its 60 pages stay charged.
wire_bg "$MB_TMP/a.out" hello p/a charge 50 expect-ok charge 20 expect-error ENOMEM charge 10 expect-ok \
        charge 1 expect-error ENOMEM print-held touch "$MB_TMP/a.ready" hold
wait_for 20 test -e "$MB_TMP/a.ready" || { cat "$MB_TMP/a.out"; fail "client of p/a did not finish its charges"; }
cat "$MB_TMP/a.out"
grep -q '^held=60$' "$MB_TMP/a.out" || fail "p/a's client does not hold 60 pages"

out=$(wire hello p/b charge 30 expect-ok charge 20 expect-error ENOMEM charge 10 expect-ok print-held)
echo "$out"
grep -q '^error code=ENOMEM reason=charge of 80 KiB (20 pages) to p/b failed: p at max: usage 360 KiB (90 pages), MemoryMax=400 KiB (100 pages)$' \
        <<<"$out" || fail "the ENOMEM reason does not name p at max"
grep -q '^held=40$' <<<"$out" || fail "p/b's successful charges were not granted"

# p/a holds 60 pages: its own limit.  Reasons name p/a.
wire_bg "$MB_TMP/a2.out" hello p/a charge 1 expect-error ENOMEM touch "$MB_TMP/a2.done" hold
wait_for 20 test -e "$MB_TMP/a2.done" || { cat "$MB_TMP/a2.out"; fail "p/a was not at max"; }
grep -q 'reason=charge of 4 KiB (1 page) to p/a failed: p/a at max: usage 240 KiB (60 pages), MemoryMax=240 KiB (60 pages)' "$MB_TMP/a2.out" ||
        { cat "$MB_TMP/a2.out"; fail "the ENOMEM reason does not name p/a at max"; }

mb_dump_state
cat "$MB_TMP/state.dump"
assert_eq 60 "$(mb_state p/a usage)" "usage of p/a"
assert_eq 0 "$(mb_state p/b usage)" "usage of p/b (its client left)"
assert_eq 60 "$(mb_state p usage)" "usage of p"
assert_eq 60 "$(mb_state / usage)" "usage of the root"
assert_eq 3 "$(mb_event_local p/a max)" "p/a local max events"
assert_eq 3 "$(mb_event_local p/a oom)" "p/a local oom events"
assert_eq 1 "$(mb_event_local p max)" "p local max events"
assert_eq 1 "$(mb_event_local p oom)" "p local oom events"
assert_eq 4 "$(mb_event p max)" "p hierarchical max events"
assert_eq 0 "$(mb_event p/b max)" "p/b max events (the limit was p's)"
assert_eq 100 "$(mb_state p peak)" "peak of p"
mb_stop_clean
