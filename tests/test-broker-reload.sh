#!/bin/bash
# SIGHUP re-reads the configuration: a lowered MemoryMax= applies to the next
# charge even below the current usage (memory_max_write()), new tenants
# appear, tenants gone from the files are removed once they have no clients,
# and a bad file keeps the running configuration with a file:line message.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant a "Path=a" "MemoryMax=400K"
mb_write_tenant gone "Path=gone"
mb_write_tenant busy "Path=busy"
mb_start_daemon

wire_bg "$MB_TMP/a.out" hello a charge 50 expect-ok touch "$MB_TMP/a.ready" wait-file "$MB_TMP/a.go" \
        charge 1 expect-error ENOMEM uncharge 0 20 expect-ok charge 15 expect-error ENOMEM \
        charge 10 expect-ok print-held
a=$MB_BG_PID
wire_bg "$MB_TMP/busy.out" hello busy charge 1 hold
busy=$MB_BG_PID
wait_for 20 test -e "$MB_TMP/a.ready" || fail "client of a did not charge"
wait_for 20 grep -q ready "$MB_TMP/busy.out" || fail "client of busy did not attach"

# reload : SIGHUP and wait until the daemon logged the outcome
reload() {
        local before
        before=$(grep -c 'configuration reloaded\|reload failed' "$MB_TMP/daemon.log" || true)
        kill -HUP "$MB_DAEMON_PID"
        # eval: the count is taken again on every try
        wait_for 20 eval '[ "$(grep -c -e "configuration reloaded" -e "reload failed" "$MB_TMP/daemon.log")" -gt "$before" ]' ||
                fail "no reload logged"
}

mb_write_tenant a "Path=a" "MemoryMax=160K"   # 40 pages, below the 50 in use
rm "$MB_ETC/tenants.d/gone.conf" "$MB_ETC/tenants.d/busy.conf"
mb_write_tenant new "Path=new/leaf" "MemoryMax=1M"
reload
mb_dump_state
assert_eq 40 "$(mb_state a max)" "max of a after the reload"
assert_eq 50 "$(mb_state a usage)" "usage of a is kept above the new max"
assert_eq 256 "$(mb_state new/leaf max)" "max of the new tenant"
! grep -q '^state: tenant=gone ' "$MB_TMP/state.dump" || fail "tenant gone was not removed"
grep -q '^state: tenant=busy ' "$MB_TMP/state.dump" || fail "tenant busy was removed under its client"
grep -q 'reload: tenant gone removed' "$MB_TMP/daemon.log" || fail "the removal was not logged"

# The lowered max applies to the next charge: with 50 pages held 1 more
# fails; after returning 20, 15 more (45) fail and 10 more (40) succeed.
touch "$MB_TMP/a.go"
wait "$a" || { cat "$MB_TMP/a.out"; fail "the client of a failed"; }
cat "$MB_TMP/a.out"
grep -q 'reason=charge of 4 KiB (1 page) to a failed: a at max: usage 200 KiB (50 pages), MemoryMax=160 KiB (40 pages)' "$MB_TMP/a.out" ||
        fail "the lowered max did not apply to the next charge"
grep -q '^held=40$' "$MB_TMP/a.out" || fail "charges under the new max did not succeed"

out=$(wire hello new/leaf charge 10 expect-ok) || { echo "$out"; fail "cannot attach to the new tenant"; }
pass "clients attach to a tenant added by a reload"

# A bad file: the running configuration stays.
mb_write_tenant a "Path=a" "MemoryMax=twelve"
reload
grep -q 'reload failed, keeping the running configuration: .*tenants.d/a.conf:3: ' "$MB_TMP/daemon.log" ||
        fail "the bad reload was not reported with file:line"
mb_dump_state
assert_eq 40 "$(mb_state a max)" "max of a after a bad reload"
grep -q '^state: tenant=new/leaf ' "$MB_TMP/state.dump" || fail "a bad reload removed a tenant"
mb_daemon_alive

# busy goes once its client has left.
kill -TERM "$busy"; wait "$busy" || true
wait_for 20 grep -q 'detached from tenant busy' "$MB_TMP/daemon.log" || fail "busy's client did not leave"
mb_write_tenant a "Path=a" "MemoryMax=160K"
reload
mb_dump_state
! grep -q '^state: tenant=busy ' "$MB_TMP/state.dump" || fail "busy was not removed after its client left"
pass "busy removed after its client left"

# A raised Capacity= applies to the root at once; the reload says that the
# arenas that exist keep their size.
mb_write_broker_conf "Capacity=128M"
reload
grep -q 'Capacity= raised: the arenas that exist keep their size' "$MB_TMP/daemon.log" ||
        fail "no warning about the arenas at a raised Capacity="
mb_dump_state
assert_eq 32768 "$(mb_state / max)" "max of the root after Capacity=128M"
pass "Capacity= raised at a reload, with the warning"
mb_stop_clean
