#!/bin/bash
# Bad input gets an Error with a reason and the connection is closed, while
# the daemon and another connected client carry on untouched: random bytes,
# a length over the cap, an empty frame, a frame truncated at end of input,
# messages out of order, a second Hello, an unknown tenant, an internal
# tenant, a bad protocol version, a Charge outside 1..16384, returning
# pages the client does not hold, and an extent whose count is 0 or does
# not fit its 32 bits.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant app "Path=app"
mb_write_tenant inner "Path=group/leaf"
mb_start_daemon

# The bystander: attached and holding pages through all of it, then works on.
wire_bg "$MB_TMP/good.out" --name bystander hello app charge 8 expect-ok write-pages 0x77 \
        touch "$MB_TMP/good.ready" wait-file "$MB_TMP/go" \
        check-pages 0x77 charge 8 expect-ok uncharge-all expect-ok print-held
good=$MB_BG_PID
wait_for 20 test -e "$MB_TMP/good.ready" || fail "the bystander did not attach"

# bad NAME CODE STEPS... : a client whose STEPS end in Error{CODE} and a close
bad() {
        local name=$1 code=$2 out; shift 2
        out=$(wire --name "$name" "$@" expect-error "$code" expect-close) ||
                { echo "$out"; fail "$name: no Error $code and close"; }
        grep '^error ' <<<"$out" | tail -1
        pass "$name: Error $code, connection closed"
        mb_daemon_alive
}

bad random-bytes EPROTO send-garbage 200 read-error
bad over-cap EMSGSIZE send-header 70000 read-error
bad huge-length EMSGSIZE send-hex ffffffff0000 read-error
bad empty-frame EPROTO send-hex 00000000 read-error
bad truncated-frame EPROTO hello app send-header 100 send-hex 0a0b0c shutdown-wr read-error
bad truncated-header EPROTO hello app send-hex 0000 shutdown-wr read-error
# A Charge carrying a field numbered 0 (tag bytes 80 00), which protobuf
# forbids and protobuf-c would keep as an unknown field: refused, so that
# the daemon accepts only what it could encode again.
bad field-zero EPROTO hello app send-hex 000000091a0708011001800014 read-error
bad charge-before-hello EPROTO charge 1
bad second-hello EPROTO hello app hello app
bad grant-from-client EPROTO hello app send-hex 0000000422020801 read-error
bad unknown-tenant ENOENT hello no/such/tenant
bad invalid-path EINVAL hello "../etc"
bad internal-tenant EISDIR hello group
bad old-version EPROTO hello-version 99 app
bad charge-zero EINVAL hello app charge 0
bad charge-too-big EINVAL hello app charge 16385
bad not-held EINVAL hello app charge 4 uncharge 1000 1
bad held-by-other EINVAL hello app uncharge 0 1
bad beyond-arena EINVAL hello app charge 1 uncharge 18446744073709551615 1
bad named-twice EINVAL hello app charge 2 uncharge-twice
# Extent.count is a uint32: a varint past 2^32 - 1 is not a count (protobuf-c
# would keep its low 32 bits: 2^63 and 2^32 as 0 pages, 2^32 + 1 as one
# page), and an extent of 0 pages names nothing.  Raw Uncharge frames of
# page 0: count 2^63, 2^32, 2^32 + 1 and 0.
bad count-2e63 EINVAL hello app charge 1 send-hex 000000132a110801120d08001080808080808080808001 read-error
bad count-2e32 EINVAL hello app charge 1 send-hex 0000000e2a0c080112080800108080808010 read-error
bad count-2e32-plus-1 EINVAL hello app charge 1 send-hex 0000000e2a0c080112080800108180808010 read-error
bad count-zero EINVAL hello app charge 1 send-hex 0000000a2a080801120408001000 read-error

# The reason names the page.
out=$(wire hello app uncharge 3 1 || true)
grep -q 'reason=page 3 is not held by this client' <<<"$out" || fail "reason does not name the page: $out"

# A client that connects and never says Hello is no problem for the others.
wire_bg "$MB_TMP/idle.out" hold
wait_for 20 grep -q ready "$MB_TMP/idle.out" || fail "the idle client did not connect"
mb_daemon_alive

touch "$MB_TMP/go"
wait "$good" || { cat "$MB_TMP/good.out"; fail "the bystander failed"; }
cat "$MB_TMP/good.out"
grep -q '^held=0$' "$MB_TMP/good.out" || fail "the bystander did not return its pages"
grep -q '^pages ok$' "$MB_TMP/good.out" || fail "the bystander's pages changed"

# (the daemon sees the last client's hang-up on its own time: wait for it)
wait_for 20 eval '[ "$(mb_dump_state; mb_state app clients)" = 0 ]' || true
assert_eq 0 "$(mb_state app usage)" "usage of app after all of it"
assert_eq 0 "$(mb_state / usage)" "usage of the root after all of it"
assert_eq 0 "$(mb_state app clients)" "clients of app after all of it"
mb_stop_clean
