#!/bin/bash
# SPDX-License-Identifier: MIT
# Bad arguments get typed D-Bus errors with a message, never a crash: unknown
# tenant, malformed path, unknown key, wrong variant type, a limit that is not
# a number, repeated key, out of range, removal of a busy tenant or the root,
# creation of an existing tenant or below a tenant with clients, unknown
# object.  The daemon serves on afterwards.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a"
bus_run
load_start a app/a 1M

# Error names (dbus-send prints them; busctl does not).
assert_eq org.membroker1.Error.NoSuchTenant "$(error_name "${DSEND[@]}" "$BUS_MGR_PATH" \
        "$BUS_MGR_IFACE.GetStat" string:nope)" "GetStat of an unknown tenant"
for bad in "../x" "a//b" "a b" "" "x/$(printf 'y/%.0s' $(seq 1 17))z"; do
        assert_eq org.freedesktop.DBus.Error.InvalidArgs "$(error_name "${DSEND[@]}" "$BUS_MGR_PATH" \
                "$BUS_MGR_IFACE.GetTenant" "string:$bad")" "GetTenant of malformed '$bad'"
done
assert_eq org.membroker1.Error.Busy "$(error_name "${DSEND[@]}" "$BUS_MGR_PATH" \
        "$BUS_MGR_IFACE.RemoveTenant" string:app/a)" "RemoveTenant of a tenant with a client"
assert_eq org.membroker1.Error.Busy "$(error_name "${DSEND[@]}" "$BUS_MGR_PATH" \
        "$BUS_MGR_IFACE.RemoveTenant" string:app)" "RemoveTenant of a tenant with children"
assert_eq org.freedesktop.DBus.Error.InvalidArgs "$(error_name "${DSEND[@]}" "$BUS_MGR_PATH" \
        "$BUS_MGR_IFACE.RemoveTenant" string:/)" "RemoveTenant of the root"
assert_eq org.membroker1.Error.NoSuchTenant "$(error_name "${DSEND[@]}" "$BUS_MGR_PATH" \
        "$BUS_MGR_IFACE.Reclaim" string:nope uint64:1)" "Reclaim of an unknown tenant"
assert_eq org.freedesktop.DBus.Error.UnknownObject "$(error_name "${DSEND[@]}" \
        /org/membroker1/tenant/nope "$BUS_TENANT_IFACE.GetStat")" "Tenant.GetStat on an unknown object"
assert_eq org.freedesktop.DBus.Error.InvalidArgs "$(error_name "${DSEND[@]}" "$BUS_MGR_PATH" \
        "$BUS_MGR_IFACE.GetStat" uint64:1)" "GetStat with a number for the path"

# Messages (busctl prints them) for the a{sv} arguments.
set_limits() { mgr_call SetTenantLimits "sa{sv}b" "$@"; }
expect_fail "Unknown setting 'MemorySwapMax'" set_limits app/a 1 MemorySwapMax t 1 true
expect_fail "MemoryMax must be a number of type 't'" set_limits app/a 1 MemoryMax s 1G true
expect_fail "MemoryHigh must be a number of type 't'.*got type 'i'" set_limits app/a 1 MemoryHigh i 5 true
expect_fail "MemoryLow given twice" set_limits app/a 2 MemoryLow t 1 MemoryLow t 2 true
expect_fail "ChargeBatch=0 is out of range" set_limits app/a 1 ChargeBatch t 0 true
expect_fail "MemoryMax=18446744073709551614 is out of range" set_limits app/a 1 MemoryMax t 18446744073709551614 true
expect_fail "MemoryMax=18446744073709551613 bytes is out of range: 0 to" set_limits app/a 1 MemoryMax t 18446744073709551613 true
expect_fail "No tenant 'nope'" set_limits nope 1 MemoryMax t 1 true
expect_fail "Invalid tenant path" set_limits "/../" 1 MemoryMax t 1 true
expect_fail "exists already" mgr_call CreateTenant "sa{sv}" app/a 0
expect_fail "an ancestor has clients attached" mgr_call CreateTenant "sa{sv}" app/a/sub 0
expect_fail "Invalid tenant path" mgr_call CreateTenant "sa{sv}" / 0
expect_fail "Unknown setting 'Foo'" mgr_call CreateTenant "sa{sv}" app/new 1 Foo t 1
out=$(mgr_call GetTenant s app/new 2>&1) && fail "a refused CreateTenant left app/new behind"
expect_fail "has 1 client attached" mgr_call RemoveTenant s app/a
expect_fail "has 1 child tenant" mgr_call RemoveTenant s app

# Nothing of it changed anything or hurt the daemon.
assert_eq 18446744073709551615 "$(tenant_prop app/a MemoryMax)" "MemoryMax after the bad calls"
assert_eq 3 "$(mgr_prop NTenants)" "NTenants after the bad calls"
kill -0 "$MB_DAEMON_PID" || fail "membrokerd died"
assert_eq 1 "$(mgr_prop NClients)" "the client is still attached"
pass "membrokerd serves on"
