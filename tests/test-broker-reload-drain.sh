#!/bin/bash
# SPDX-License-Identifier: MIT
# A tenant removed from the files while a client is attached drains, as a
# removed systemd unit does: after Reload() it admits no new client (an
# Error names the draining), the attached client keeps charging, the state
# dump and the Tenant.Draining property show it; when its last client
# leaves, the tenant goes (GetTenant fails, ListTenants lacks it) without
# another reload.  A drained tenant that comes back in the files before that
# is un-drained and takes the new settings.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
command -v "$BUSCTL" >/dev/null || skip "busctl is not installed"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant keep "Path=keep"
mb_write_tenant drain "Path=drain" "MemoryMax=1M"
mb_write_tenant back "Path=grp/back" "MemoryMax=1M"
mb_write_tenant p "Path=p" "MemoryMax=8M"
mb_write_tenant pleaf "Path=p/leaf"
mb_start_bus
mb_start_daemon

wire_bg "$MB_TMP/d.out" hello drain charge 4 expect-ok touch "$MB_TMP/d.ready" wait-file "$MB_TMP/d.go" \
        charge 4 expect-ok uncharge-all expect-ok
dpid=$MB_BG_PID
wire_bg "$MB_TMP/b.out" hello grp/back charge 1 expect-ok hold
bpid=$MB_BG_PID
wire_bg "$MB_TMP/p.out" hello p/leaf charge 1 expect-ok hold
ppid=$MB_BG_PID
wait_for 20 grep -q ready "$MB_TMP/p.out" || { cat "$MB_TMP/p.out"; fail "the client of p/leaf did not attach"; }
wait_for 20 test -e "$MB_TMP/d.ready" || { cat "$MB_TMP/d.out"; fail "the client of drain did not charge"; }
wait_for 20 grep -q ready "$MB_TMP/b.out" || { cat "$MB_TMP/b.out"; fail "the client of grp/back did not attach"; }

rm "$MB_ETC/tenants.d/drain.conf" "$MB_ETC/tenants.d/back.conf" "$MB_ETC/tenants.d/p.conf" \
        "$MB_ETC/tenants.d/pleaf.conf"
mgr_call Reload >/dev/null || fail "Reload() failed"

out=$(wire hello drain expect-error ENOENT) || { echo "$out"; fail "a new client of a draining tenant was not refused"; }
echo "$out" | grep -q 'reason=.*drain.*draining' || { echo "$out"; fail "the refusal does not say the tenant drains"; }
pass "a new client of the draining tenant is refused: $(echo "$out" | grep -o 'reason=.*')"
mb_dump_state
mb_state drain draining | grep -q '^yes$' || { cat "$MB_TMP/state.dump"; fail "the state dump does not mark drain draining"; }
mb_state keep draining | grep -q '^no$' || fail "keep is marked draining"
assert_eq "b true" "$(mb_busctl get-property "$BUS_DEST" "$(tenant_object drain)" org.membroker1.Tenant Draining)" \
        "Tenant.Draining of drain"

# The attached client keeps working.
touch "$MB_TMP/d.go"
wait "$dpid" || { cat "$MB_TMP/d.out"; fail "the attached client of drain failed after the reload"; }
pass "the attached client kept charging"

# Its last client gone, the tenant goes, without a reload.
wait_for 20 sh -c "! '$BUSCTL' --address='$MB_BUS_ADDRESS' call $BUS_DEST $BUS_MGR_PATH $BUS_MGR_IFACE GetTenant s drain" ||
        fail "drain still exists after its last client left"
! mgr_call ListTenants | grep -q '"drain"' || fail "ListTenants still lists drain"
pass "drain went with its last client"

# p (a parent) and p/leaf drain; both go when the last client of p/leaf
# leaves.
assert_eq "b true" "$(mb_busctl get-property "$BUS_DEST" "$(tenant_object p)" org.membroker1.Tenant Draining)" \
        "Tenant.Draining of p (its child has a client)"
out=$(wire hello p/leaf expect-error ENOENT) || { echo "$out"; fail "a new client of p/leaf was not refused"; }
kill -TERM "$ppid"; wait "$ppid" 2>/dev/null || true
wait_for 20 sh -c "! '$BUSCTL' --address='$MB_BUS_ADDRESS' call $BUS_DEST $BUS_MGR_PATH $BUS_MGR_IFACE GetTenant s p" ||
        fail "p still exists after the last client of its child left"
! mgr_call ListTenants | grep -q '"p/leaf"' || fail "ListTenants still lists p/leaf"
pass "p/leaf and then p went with the last client"

# grp/back drains too; it comes back in the files before its client leaves:
# un-drained, with the new settings.
mb_write_tenant back "Path=grp/back" "MemoryMax=2M"
mgr_call Reload >/dev/null || fail "second Reload() failed"
assert_eq "b false" "$(mb_busctl get-property "$BUS_DEST" "$(tenant_object grp/back)" org.membroker1.Tenant Draining)" \
        "Tenant.Draining of grp/back back in the files"
assert_eq $((2 << 20)) "$(tenant_prop grp/back MemoryMax)" "MemoryMax of grp/back back in the files"
out=$(wire hello grp/back charge 1 expect-ok) || { echo "$out"; fail "grp/back refuses clients after coming back"; }
kill -TERM "$bpid"; wait "$bpid" 2>/dev/null || true
sleep 0.5
tenant_object grp/back >/dev/null || fail "grp/back (in the files) went with its client"
pass "grp/back un-drained and kept"
mb_daemon_alive
