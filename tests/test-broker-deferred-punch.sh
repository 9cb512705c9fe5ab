#!/bin/bash
# The hole punch of returned pages runs after the Ack, batched: the pages
# of many small Uncharges are uncharged at once, punched later (adjacent
# ones as one run) and never handed out before that punch, so a client
# that gets them again reads zeroes; once punched, the memory backing the
# arena is what the clients hold again.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/attack-lib.sh"

mb_write_broker_conf "Capacity=4M"
mb_write_tenant a "Path=a"
mb_start_daemon

# 1. 64 pages written, 48 of them returned one Uncharge each, 16 kept.
steps=(hello a charge 64 expect-ok write-pages 0x5a)
for ((p = 0; p < 48; p++)); do steps+=(uncharge "$p" 1 expect-ok); done
wire_bg "$MB_TMP/a1.out" "${steps[@]}" print-held touch "$MB_TMP/a1.ready" hold
a1=$MB_BG_PID
wait_for 30 test -e "$MB_TMP/a1.ready" || { cat "$MB_TMP/a1.out"; fail "client a1 did not return its pages"; }
grep -q '^grant pages=64 extents=1 first=0$' "$MB_TMP/a1.out" || { cat "$MB_TMP/a1.out"; fail "a1 did not get pages 0..63"; }
[ "$(grep -c '^ack pages=1$' "$MB_TMP/a1.out")" = 48 ] || fail "not every Uncharge was acknowledged with its page"
grep -q '^held=16$' "$MB_TMP/a1.out" || fail "a1 does not hold 16 pages"
mb_dump_state
page=$(sed -n 's/.* page_size=\([0-9]*\).*/\1/p' "$MB_TMP/a1.out")
[ "$(mb_state a usage)" = 16 ] || fail "usage is $(mb_state a usage), not 16 pages"
[ "$(mb_state a arena_used)" = 16 ] || fail "arena_used is $(mb_state a arena_used), not 16"
pass "48 single-page Uncharges acknowledged; usage and arena_used exact"
wait_for 30 eval '[ "$(mb_now a arena_backed)" = '$((16 * page))' ]' ||
        fail "a's arena is backed by $(mb_state a arena_backed) bytes, not the 16 pages held"
# Punched by the release itself, not found backed and free by the audit.
[ "$(mb_event a overrun)" = 0 ] || fail "the audit found $(mb_event a overrun) overrun events: returned pages were not punched"
pass "after the deferred punch the arena is backed by the 16 pages held"

# 2. The returned pages go to the next client: zero.
out=$(wire hello a charge 48 expect-ok print-held check-pages 0) || { echo "$out"; fail "a2's pages are not zero"; }
grep -q '^grant pages=48 extents=1 first=0$' <<<"$out" || { echo "$out"; fail "a2 did not get the pages a1 returned"; }
pass "the 48 returned pages are zero for the next client"
kill -TERM "$a1"; wait "$a1" 2>/dev/null || true

# 3. The whole arena written, every page returned by an Uncharge of its own
#    and charged again, all in one write: the daemon reads them in one turn,
#    so the Charge finds the arena full of pages whose punch is pending.
n=$(wire hello a | sed -n 's/.* arena_pages=\([0-9]*\).*/\1/p')
[ -n "$n" ] || fail "no arena size in the Welcome"
out=$(wire hello a charge "$n" expect-ok write-pages 0x77 uncharge-each-charge "$n" expect-ok print-held \
        check-pages 0 uncharge-all expect-ok) || { echo "$out" | tail -5; fail "pipelined returns and charge"; }
grep -q "^pipelined acked=$n granted=$n\$" <<<"$out" || { echo "$out" | tail -5; fail "not every page acked and granted again"; }
grep -q '^pages ok$' <<<"$out" || fail "pages granted again are not zero"
pass "all $n pages returned one by one and charged again in one write: zero"

wait_for 30 eval '[ "$(mb_now a arena_backed)" = 0 ] && [ "$(mb_state a usage)" = 0 ] && [ "$(mb_state a arena_used)" = 0 ]' ||
        fail "a is left with usage $(mb_state a usage), arena_used $(mb_state a arena_used), backed $(mb_state a arena_backed)"
[ "$(mb_event a overrun)" = 0 ] || fail "the audit or a grant found returned pages not punched"
pass "nothing left charged or backed"
# 4. A client writes into the pages it returned right after the Ack, racing
#    with their deferred punch: a write before the punch goes with it, one
#    after is found when the pages are granted again (or by the audit);
#    either way the next holder reads zeroes, never the 0x66.
wire_bg "$MB_TMP/b1.out" hello a charge 64 expect-ok write-pages 0x5a uncharge 0 32 expect-ok \
        write-arena 0 32 0x66 touch "$MB_TMP/b1.ready" hold
b1=$MB_BG_PID
wait_for 30 test -e "$MB_TMP/b1.ready" || { cat "$MB_TMP/b1.out"; fail "client b1 did not return and write its pages"; }
out=$(wire hello a charge 32 expect-ok check-pages 0) || { echo "$out"; fail "pages written after their return reached the next holder"; }
grep -q '^grant pages=32 extents=1 first=0$' <<<"$out" || { echo "$out"; fail "b2 did not get the pages b1 returned"; }
out=$(wire hello a charge 32 expect-ok check-pages 0) || { echo "$out"; fail "b3's pages are not zero"; }
pass "pages written by their former holder just after the Ack are zero for the next ones"
kill -TERM "$b1"; wait "$b1" 2>/dev/null || true
wait_for 30 eval '[ "$(mb_now a arena_backed)" = 0 ] && [ "$(mb_state a usage)" = 0 ] && [ "$(mb_state a arena_used)" = 0 ]' ||
        fail "a is left with usage $(mb_state a usage), arena_used $(mb_state a arena_used), backed $(mb_state a arena_backed)"

# 5. A return larger than the cap on pages waiting for their punch (one
#    ChargeBatch per arena: the bound on its backing) is punched before its
#    Ack: the client finds its arena backed by what it still holds.
mb_stop_clean
mb_write_broker_conf "Capacity=4M" "ChargeBatch=8"
mb_start_daemon
out=$(wire hello a charge 64 expect-ok write-pages 0x5a uncharge 0 32 expect-ok print-backed uncharge-all expect-ok) ||
        { echo "$out"; fail "a return of 32 pages with ChargeBatch=8"; }
page=$(sed -n 's/.* page_size=\([0-9]*\).*/\1/p' <<<"$out")
grep -q "^backed=$((32 * page)) " <<<"$out" || { echo "$out"; fail "32 pages returned past the cap were not punched before the Ack"; }
pass "32 pages returned with ChargeBatch=8 are punched before their Ack"
mb_daemon_alive
mb_stop_clean
