#!/bin/bash
# SPDX-License-Identifier: MIT
# Charge.contig_pages, a contiguous charge (alloc_pages(order)): the Grant
# is one extent of exactly that many pages, also past the holes a
# fragmented arena has and past MB_CHARGE_MAX_PAGES; no free run that long
# is a clean ENOMEM (nothing charged, the session goes on); bad values
# (0, above MB_CONTIG_MAX_PAGES, disagreeing with pages or need) are
# refused with EINVAL and a close, while a bystander carries on.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

mb_write_broker_conf "Capacity=128M"
mb_write_tenant app "Path=app"
mb_write_tenant small "Path=small" "MemoryMax=1M"
mb_start_daemon

wire_bg "$MB_TMP/good.out" --name bystander hello app charge 8 expect-ok write-pages 0x77 \
        touch "$MB_TMP/good.ready" wait-file "$MB_TMP/go" \
        check-pages 0x77 uncharge-all expect-ok print-held
good=$MB_BG_PID
wait_for 20 test -e "$MB_TMP/good.ready" || fail "the bystander did not attach"

bad() {
        local name=$1 code=$2 out; shift 2
        out=$(wire --name "$name" "$@" expect-error "$code" expect-close) ||
                { echo "$out"; fail "$name: no Error $code and close"; }
        grep '^error ' <<<"$out" | tail -1
        pass "$name: Error $code, connection closed"
        mb_daemon_alive
}
# Charge{seq 1, pages 1, contig_pages 0}: a zero the wire client cannot send
bad contig-zero EINVAL hello app send-hex 000000081a0608011001300000 read-error
bad contig-too-big EINVAL hello app charge-contig 262145 0 262145
bad contig-not-pages EINVAL hello app charge-contig 4 0 5
bad contig-need-less EINVAL hello app charge-contig 4 2 4
bad pages-too-big-without-contig EINVAL hello app charge-contig 16385 0 0

# A fragmented arena: the bystander holds 8 pages at 0..7; this client takes
# 8 more, returns every other page, then asks for 3 contiguous ones.
out=$(wire hello app charge 8 expect-ok uncharge 9 1 uncharge 11 1 uncharge 13 1 \
        charge-contig 3 0 3 expect-ok print-held) || { echo "$out"; fail "contiguous charge in a fragmented arena"; }
echo "$out" | grep grant-contig
line=$(grep '^grant-contig' <<<"$out")
[[ $line == *"extents=1 "* && $line == *"count=3" ]] || fail "not one extent of 3: $line"
first=$(sed -n 's/.* first=\([0-9]*\) .*/\1/p' <<<"$line")
[ "$first" -ge 16 ] || fail "the run starts at $first, inside the holes"
pass "3 contiguous pages past the holes, at $first"

# More than one Charge may ask (16384), as one extent.
out=$(wire hello app charge-contig 20000 0 20000 expect-ok write-pages 0x11 check-pages 0x11) || { echo "$out"; fail "20000 contiguous pages"; }
grep -q 'grant-contig pages=20000 extents=1 .*count=20000' <<<"$out" || fail "not one extent: $out"
pass "20000 pages in one extent"

# (the previous client's pages are back first)
wait_for 20 eval 'mb_dump_state; [ "$(mb_state app usage)" = 8 ]' || fail "the 20000 pages were not returned"
# Room under the max but no run that long: pages 16..16015 and 16017..
# 32767 are free around one held page (16016) and the bystander's (0..7);
# a run of 17000 is a clean ENOMEM (nothing charged), the session goes on.
out=$(wire hello app charge-contig 8 0 8 expect-ok charge-contig 16000 0 16000 expect-ok \
        charge-contig 1 0 1 expect-ok uncharge 16 16000 expect-ok \
        charge-contig 17000 0 17000 expect-error ENOMEM print-held charge 1 expect-ok print-held) ||
        { echo "$out"; fail "no clean ENOMEM for a run the arena lacks"; }
grep '^error\|^grant' <<<"$out"
grep -q 'first=16016 count=1' <<<"$out" || fail "the layout is not the one planned: $out"
grep -q 'reason=the arena of the tenant has no free run that long' <<<"$out" || fail "not refused for the arena"
pass "no run of 17000 pages: ENOMEM, the session went on"
mb_dump_state
assert_eq 8 "$(mb_state app usage)" "usage after the refused run (the bystander's 8 pages)"

# At a limit: ENOMEM and max counted.
out=$(wire hello small charge-contig 512 0 512 expect-error ENOMEM charge-contig 16 0 16 expect-ok) ||
        { echo "$out"; fail "contiguous charge past MemoryMax"; }
mb_dump_state
[ "$(mb_event small max)" -ge 1 ] || fail "max not counted"
pass "a run past MemoryMax: ENOMEM, max counted"

touch "$MB_TMP/go"
wait "$good" || { cat "$MB_TMP/good.out"; fail "the bystander failed"; }
grep -q '^held=0$' "$MB_TMP/good.out" || fail "the bystander did not return its pages"
grep -q '^pages ok$' "$MB_TMP/good.out" || fail "the bystander's pages changed"
pass "the bystander carried on"
