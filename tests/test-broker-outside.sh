#!/bin/bash
# SPDX-License-Identifier: MIT
# Charge.flags OUTSIDE, pages of the client's own mappings (the malloc
# shim's anonymous mmap()s), on the raw wire: the Grant carries no extents,
# also past MB_CHARGE_MAX_PAGES; the pages are in MemoryCurrent and the stat
# key anon_mmap (read on the bus) until Uncharge.outside_pages gives them
# back, or until the session ends; at MemoryMax= the charge fails with
# ENOMEM and the session goes on; giving back more than was charged, a need
# below pages and a contiguous outside charge are refused with EINVAL and a
# close.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=1G"
mb_write_tenant app "Path=app"
mb_write_tenant small "Path=small" "MemoryMax=1M"
bus_run

# Charge{seq, pages 100000, flags OUTSIDE}, Uncharge{seq, outside_pages 100000}
CHARGE1=0000000a1a08080110a08d062002
UNCHARGE2=000000082a06080230a08d06
CHARGE3=0000000a1a08080310a08d062002
BYTES=$((100000 * 4096))

usage_is() {
        wait_for 20 eval '[ "$(tenant_prop app MemoryCurrent)" = '"$1"' ] && [ "$(stat_value app anon_mmap)" = '"$1"' ]' ||
                fail "app: MemoryCurrent $(tenant_prop app MemoryCurrent), anon_mmap $(stat_value app anon_mmap), not $1"
        pass "app: MemoryCurrent = anon_mmap = $1"
}

wire_bg "$MB_TMP/out" hello app send-hex $CHARGE1 read-reply expect-ok touch "$MB_TMP/1" wait-file "$MB_TMP/go1" \
        send-hex $UNCHARGE2 read-reply expect-ok touch "$MB_TMP/2" wait-file "$MB_TMP/go2" \
        send-hex $CHARGE3 read-reply expect-ok touch "$MB_TMP/3" wait-file "$MB_TMP/go3" quit
pid=$MB_BG_PID
wait_for 20 test -e "$MB_TMP/1" || { cat "$MB_TMP/out"; fail "the outside charge was not granted"; }
grep -qx "grant extents=0" "$MB_TMP/out" || { cat "$MB_TMP/out"; fail "the Grant carries extents"; }
usage_is $BYTES
touch "$MB_TMP/go1"
wait_for 20 test -e "$MB_TMP/2" || { cat "$MB_TMP/out"; fail "the outside uncharge was not acked"; }
grep -qx "ack pages=100000" "$MB_TMP/out" || { cat "$MB_TMP/out"; fail "the Ack does not count the pages"; }
usage_is 0
touch "$MB_TMP/go2"
wait_for 20 test -e "$MB_TMP/3" || { cat "$MB_TMP/out"; fail "the second outside charge was not granted"; }
usage_is $BYTES
touch "$MB_TMP/go3"
mb_wait "$pid" || true
usage_is 0
pass "the end of the session uncharged what was left outside"

# At MemoryMax=1M: 1000 pages fail with ENOMEM, then 10 pages are granted.
out=$(wire hello small send-hex 000000091a07080110e8072002 read-reply expect-error ENOMEM \
      send-hex 000000081a060802100a2002 read-reply expect-ok) || { echo "$out"; fail "small"; }
echo "$out"
[ "$(events_value small max)" -ge 1 ] || fail "max not counted"
pass "ENOMEM at MemoryMax=, the session goes on"

bad() {
        local name=$1 out; shift
        out=$(wire hello app send-hex "$@" read-reply expect-error EINVAL expect-close) ||
                { echo "$out"; fail "$name: no Error EINVAL and close"; }
        grep '^error ' <<<"$out" | tail -1
        pass "$name: Error EINVAL, connection closed"
        mb_daemon_alive
}
bad "uncharge of more than charged" 000000062a0408033001
bad "need below pages" 0000000a1a080801100418022002
bad "contiguous" 0000000a1a080801100420023004
usage_is 0
