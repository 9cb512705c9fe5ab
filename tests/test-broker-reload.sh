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

# reloads : reloads done, applied or failed, by the last state dump
reloads() { echo $(($(mb_dump_field config reloads) + $(mb_dump_field config reload_failures))); }
# reload : SIGHUP and wait until the state dump counts its outcome
reload() {
        local before
        mb_dump_state
        before=$(reloads)
        kill -HUP "$MB_DAEMON_PID"
        # eval: a new dump on every try
        wait_for 20 eval 'mb_dump_state; [ "$(reloads)" -gt "$before" ]' || fail "the reload did not finish"
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
assert_eq 0 "$(mb_dump_field config reload_failures)" "failed reloads"

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
assert_eq 1 "$(mb_dump_field config reload_failures)" "failed reloads"
grep -q '^state: config last_reload_error: .*tenants.d/a.conf:3: ' "$MB_TMP/state.dump" ||
        fail "the bad reload was not reported with file:line: $(grep last_reload_error "$MB_TMP/state.dump")"
assert_eq 40 "$(mb_state a max)" "max of a after a bad reload"
grep -q '^state: tenant=new/leaf ' "$MB_TMP/state.dump" || fail "a bad reload removed a tenant"
mb_daemon_alive

# busy goes once its client has left.
kill -TERM "$busy"; wait "$busy" || true
# (a tenant gone from the files drains: it goes with its last client)
wait_for 20 eval 'mb_dump_state; ! grep -q "^state: tenant=busy " "$MB_TMP/state.dump"' ||
        fail "busy did not go when its client left"
mb_write_tenant a "Path=a" "MemoryMax=160K"
reload
mb_dump_state
! grep -q '^state: tenant=busy ' "$MB_TMP/state.dump" || fail "busy was not removed after its client left"
! grep -q '^state: config last_reload_error:' "$MB_TMP/state.dump" || fail "a good reload kept the last error"
pass "busy removed after its client left"

# A raised Capacity= applies to the root at once; the arenas that exist keep
# their size (clients map them whole).
mb_write_broker_conf "Capacity=128M"
reload
mb_dump_state
assert_eq 32768 "$(mb_state / max)" "max of the root after Capacity=128M"
out=$(wire hello a charge 1 expect-ok) || { echo "$out"; fail "cannot attach to a after Capacity=128M"; }
grep -q ' arena_bytes=67108864' <<<"$out" || fail "the arena of a changed its size: $out"
pass "Capacity= raised at a reload, the arena of a kept at 64M"
mb_stop_clean
