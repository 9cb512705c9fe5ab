#!/bin/bash
# kill -9 of a client holding pages: everything it held is uncharged and
# returned at once (its tenant's usage goes back to what the others hold),
# hole-punched (reused pages are zero), and the others are untouched.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant app "Path=app"
mb_start_daemon

wire_bg "$MB_TMP/a.out" --name victim hello app charge 30 write-pages 0xee touch "$MB_TMP/a.ready" hold
a=$MB_BG_PID
wait_for 20 test -e "$MB_TMP/a.ready" || fail "client a did not charge"
wire_bg "$MB_TMP/b.out" --name survivor hello app charge 20 write-pages 0x33 touch "$MB_TMP/b.ready" \
        wait-file "$MB_TMP/b.go" check-pages 0x33 charge 5 expect-ok print-held
b=$MB_BG_PID
wait_for 20 test -e "$MB_TMP/b.ready" || fail "client b did not charge"

mb_dump_state
assert_eq 50 "$(mb_state app usage)" "usage with both clients"

kill -9 "$a"
wait "$a" 2>/dev/null || true
wait_for 20 mb_dumped_ge connections detached 1 || fail "the daemon did not see the victim go"
mb_dump_state
assert_eq 20 "$(mb_state app usage)" "usage after kill -9 (the survivor's pages)"
assert_eq 20 "$(mb_state / usage)" "root usage after kill -9"
assert_eq 1 "$(mb_state app clients)" "clients after kill -9"
assert_eq 0 "$(mb_state app unaccounted)" "unaccounted after kill -9 (the victim's pages were punched)"

# The victim's pages come back zeroed to the next client.
out=$(wire hello app charge 30 check-pages 0)
echo "$out"
grep -q '^grant pages=30 extents=1 first=0$' <<<"$out" || fail "the victim's pages were not reused"
grep -q '^pages ok$' <<<"$out" || fail "the victim's data survived"

# The survivor carries on.
touch "$MB_TMP/b.go"
wait "$b" || { cat "$MB_TMP/b.out"; fail "the survivor failed"; }
grep -q '^held=25$' "$MB_TMP/b.out" || fail "the survivor could not charge more"

# A client killed between connect and Hello, and one killed mid-frame.
wire_bg "$MB_TMP/c.out" hold
c=$MB_BG_PID
wire_bg "$MB_TMP/d.out" hello app charge 3 send-header 100 send-hex 0102 hold
d=$MB_BG_PID
wait_for 20 grep -q ready "$MB_TMP/c.out" || fail "client c did not connect"
wait_for 20 grep -q ready "$MB_TMP/d.out" || fail "client d did not charge"
kill -9 "$c" "$d"
wait "$c" "$d" 2>/dev/null || true
# the survivor, the reader of the victim's pages, c and d
wait_for 20 mb_dumped_ge connections detached 4 ||
        fail "the daemon did not see the clients killed before their Hello and mid-frame go"
mb_dump_state
assert_eq 0 "$(mb_state app usage)" "usage when every client is gone"
mb_daemon_alive
mb_stop_clean
