#!/bin/bash
# A client session against the real daemon: Hello/Welcome with the arena and
# stats memfds, Charge/Grant, Uncharge/Ack; usage is exact at every step,
# returned pages come back zeroed (hole-punched), and the audit revokes
# memory a client backs behind the daemon's back (an overrun).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

mb_write_broker_conf "Capacity=64M" "StatsFlushIntervalSec=1"
mb_write_tenant app "Path=app" "MemoryMax=4M"
mb_start_daemon

out=$(wire hello app print-inode charge 10 expect-ok charge 54 expect-ok print-held)
echo "$out"
grep -q '^welcome tenant=app page_size=4096 batch=64 arena_pages=16384 ' <<<"$out" || fail "unexpected Welcome"
grep -q '^grant pages=10 extents=1 first=0$' <<<"$out" || fail "first Grant is not pages 0..9"
grep -q '^grant pages=54 extents=1 first=10$' <<<"$out" || fail "second Grant does not continue at page 10"
grep -q 'arena_bytes=67108864' <<<"$out" || fail "the arena is not Capacity bytes long"

# Usage is exact while a client holds pages, and back to 0 after it returns them.
wire_bg "$MB_TMP/c1.out" hello app charge 7 expect-ok touch "$MB_TMP/held" hold
c1=$MB_BG_PID
wait_for 20 test -e "$MB_TMP/held" || fail "client did not charge"
mb_dump_state
assert_eq 7 "$(mb_state app usage)" "usage of app with 7 pages held"
assert_eq 7 "$(mb_state / usage)" "usage of the root"
assert_eq 1 "$(mb_state app clients)" "clients of app"
mb_dump_field connections detached >"$MB_TMP/detached0"
kill -TERM "$c1"; wait "$c1" || true
wait_for 20 mb_dumped_ge connections detached $(($(cat "$MB_TMP/detached0") + 1)) ||
        fail "the daemon did not see the client leave"
assert_eq 0 "$(mb_state app usage)" "usage of app after the client left"

# Pages go back zeroed: write, return, charge again (lowest index first, the
# same pages), read zeroes.
out=$(wire hello app charge 8 write-pages 0x5a check-pages 0x5a uncharge-all expect-ok charge 8 check-pages 0)
echo "$out"
grep -q '^ack pages=8$' <<<"$out" || fail "Uncharge not acknowledged with 8 pages"
[ "$(grep -c '^grant pages=8 extents=1 first=0$' <<<"$out")" = 2 ] || fail "the returned pages were not reused"
grep -q '^pages ok$' <<<"$out" || fail "returned pages are not zero"

# The audit: a client that writes to pages it returned backs memory that is
# charged to nobody; the daemon punches those pages (within a tenth of a
# second) and counts one overrun on the tenant, not one per audit.  The punch of
# the returned pages follows the Ack: the client writes once it has run
# (a write before it would only be punched with them).
wire_bg "$MB_TMP/c2.out" hello app charge 4 write-pages 0x11 uncharge-all expect-ok touch "$MB_TMP/returned" \
        wait-file "$MB_TMP/punched" write-arena 0 4 0x22 touch "$MB_TMP/dirty" hold
c2=$MB_BG_PID
wait_for 20 test -e "$MB_TMP/returned" || fail "client did not return its pages"
wait_for 20 eval '[ "$(mb_dump_state; mb_state app arena_backed)" = 0 ]' || fail "the returned pages were not punched"
touch "$MB_TMP/punched"
wait_for 20 test -e "$MB_TMP/dirty" || fail "client did not write"
wait_for 20 eval '[ "$(mb_dump_state; mb_event_local app overrun)" = 1 ]' || fail "the audit did not count the overrun"
assert_eq 0 "$(mb_state app usage)" "usage of app (nothing charged)"
assert_eq 0 "$(mb_state app arena_backed)" "memory backing app's arena after the audit"
sleep 2.5  # more periodic audits: the punched pages are not counted again
mb_dump_state
assert_eq 1 "$(mb_event_local app overrun)" "overrun events of app after more audits"
# (reading them faults them in on tmpfs: the reader backs pages itself)
out=$(wire hello app check-arena 0 4 0)
grep -q '^arena ok$' <<<"$out" || fail "the pages written behind the daemon's back were not punched"
kill -TERM "$c2"; wait "$c2" || true

mb_daemon_alive
mb_stop_clean
