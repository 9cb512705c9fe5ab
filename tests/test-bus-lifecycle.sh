#!/bin/bash
# SPDX-License-Identifier: MIT
# CreateTenant makes a tenant (and missing parents) that clients can attach
# to at once, announced with InterfacesAdded through the object manager;
# RemoveTenant of an idle leaf removes it with InterfacesRemoved;
# GetManagedObjects lists every tenant with its properties.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
bus_run

monitor_start om "type='signal',sender='$BUS_DEST',interface='org.freedesktop.DBus.ObjectManager'"

out=$(mgr_call CreateTenant "sa{sv}" jobs/j1 2 MemoryMax t $((2 << 20)) ChargeBatch t 16)
assert_eq 'o "/org/membroker1/tenant/jobs_2fj1"' "$out" "CreateTenant reply"
assert_eq $((2 << 20)) "$(tenant_prop jobs/j1 MemoryMax)" "MemoryMax from the settings"
assert_eq 16 "$(tenant_prop jobs/j1 ChargeBatch)" "ChargeBatch from the settings"
assert_eq 18446744073709551615 "$(tenant_prop jobs MemoryMax)" "the parent created with it has no limit"
assert_eq 3 "$(mgr_prop NTenants)" "NTenants"
monitor_wait om "Path=/org/membroker1 .*Member=InterfacesAdded" || fail "no InterfacesAdded"
monitor_wait om 'OBJECT_PATH "/org/membroker1/tenant/jobs_2fj1";' || fail "InterfacesAdded lacks jobs/j1"
monitor_wait om 'OBJECT_PATH "/org/membroker1/tenant/jobs";' || fail "InterfacesAdded lacks the parent jobs"
pass "InterfacesAdded for jobs and jobs/j1"

# GetManagedObjects: every tenant, with the Tenant interface's properties.
managed=$(mb_busctl --json=short call "$BUS_DEST" "$BUS_MGR_PATH" org.freedesktop.DBus.ObjectManager GetManagedObjects)
python3 - "$managed" <<'PY' || fail "GetManagedObjects is not what it should be"
import json, sys
objs = json.loads(sys.argv[1])["data"][0]
assert sorted(objs) == ["/org/membroker1/tenant/_2f", "/org/membroker1/tenant/jobs",
                        "/org/membroker1/tenant/jobs_2fj1"], sorted(objs)
j1 = objs["/org/membroker1/tenant/jobs_2fj1"]["org.membroker1.Tenant"]
assert j1["Path"]["data"] == "jobs/j1" and j1["MemoryMax"]["data"] == 2 << 20, j1
PY
pass "GetManagedObjects lists the tenants with their properties"

# A client attaches to the new tenant and is held to its limit.
rc=0
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant jobs/j1 --hold 3M --seconds 1 >"$MB_TMP/j1.out" 2>&1 || rc=$?
assert_eq 1 "$rc" "a client of jobs/j1 stops at its MemoryMax"
grep -q "held=2097152 " "$MB_TMP/j1.out" || fail "the client did not hold 2M: $(cat "$MB_TMP/j1.out")"
pass "the new tenant serves clients within its limit"

mgr_call RemoveTenant s jobs/j1
monitor_wait om "Member=InterfacesRemoved" || fail "no InterfacesRemoved"
out=$(mgr_call GetTenant s jobs/j1 2>&1) && fail "jobs/j1 still exists"
mgr_call RemoveTenant s jobs
assert_eq 1 "$(mgr_prop NTenants)" "NTenants after the removals"
pass "RemoveTenant with InterfacesRemoved"
