#!/bin/bash
# SPDX-License-Identifier: MIT
# Undoing "membrokerctl set": an empty value ("MemoryMax=") resets the key in
# the layer set writes (the runtime layer with --runtime; the persisted
# layer, and the runtime value over it, without), so that what is below
# applies again; "revert PATH [KEY...]" drops both layers as "systemctl
# revert" does.  Range errors name the key, the range and bytes.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a" "MemoryMax=32M" "MemoryLow=1M"
bus_run

max() { tenant_prop app/a MemoryMax; }

# Runtime over the files, then reset: the file's value again.
mb_ctl set --runtime app/a MemoryMax=16M
assert_eq $((16 << 20)) "$(max)" "runtime MemoryMax=16M"
mb_ctl set --runtime app/a MemoryMax=
assert_eq $((32 << 20)) "$(max)" "runtime MemoryMax= gives the file's 32M back"

# Persisted, runtime over it; resetting the runtime value gives the
# persisted one back, resetting the persisted one the file's.
mb_ctl set app/a MemoryMax=8M
grep -q '^MemoryMax=8388608$' "$MB_STATE/limits.conf" || fail "MemoryMax=8M not persisted"
mb_ctl set --runtime app/a MemoryMax=4M
assert_eq $((4 << 20)) "$(max)" "runtime 4M over persisted 8M"
mb_ctl set --runtime app/a MemoryMax=
assert_eq $((8 << 20)) "$(max)" "runtime reset: the persisted 8M"
mb_ctl set --runtime app/a MemoryMax=4M
mb_ctl set app/a MemoryMax=
assert_eq $((32 << 20)) "$(max)" "persisted reset (drops the runtime value too): the file's 32M"
! grep -q '^MemoryMax=' "$MB_STATE/limits.conf" 2>/dev/null || fail "MemoryMax still in limits.conf"
pass "limits.conf no longer sets MemoryMax"

# A reset and a value in one call.
mb_ctl set app/a MemoryHigh=2M
mb_ctl set app/a MemoryHigh= MemoryMin=512K
assert_eq 18446744073709551615 "$(tenant_prop app/a MemoryHigh)" "MemoryHigh= back to max"
assert_eq $((512 << 10)) "$(tenant_prop app/a MemoryMin)" "MemoryMin=512K in the same call"

# revert with keys: only those; without: everything, both layers.
mb_ctl set app/a MemoryLow=4M ChargeBatch=8
mb_ctl set --runtime app/a MemoryMax=2M
mb_ctl revert app/a ChargeBatch
assert_eq 64 "$(tenant_prop app/a ChargeBatch)" "revert ChargeBatch: the broker default again"
assert_eq $((4 << 20)) "$(tenant_prop app/a MemoryLow)" "revert ChargeBatch leaves MemoryLow"
assert_eq $((2 << 20)) "$(max)" "revert ChargeBatch leaves the runtime MemoryMax"
mb_ctl revert app/a
assert_eq $((32 << 20)) "$(max)" "revert: MemoryMax from the file"
assert_eq $((1 << 20)) "$(tenant_prop app/a MemoryLow)" "revert: MemoryLow from the file"
assert_eq 0 "$(tenant_prop app/a MemoryMin)" "revert: MemoryMin from the file (default)"
! grep -q '^Path=app/a$' "$MB_STATE/limits.conf" 2>/dev/null || fail "app/a still in limits.conf"
pass "limits.conf no longer names app/a"
mb_ctl revert app/a # nothing to revert: fine

# A tenant made at run time goes back to no limit.
mb_ctl create app/n MemoryMax=1M
mb_ctl revert app/n MemoryMax
assert_eq 18446744073709551615 "$(tenant_prop app/n MemoryMax)" "revert of a created tenant: no limit"

# The Tenant object's RevertLimits.
mb_ctl set app/a MemoryHigh=3M
mb_busctl call "$BUS_DEST" "$(tenant_object app/a)" "$BUS_TENANT_IFACE" RevertLimits asb 1 MemoryHigh false
assert_eq 18446744073709551615 "$(tenant_prop app/a MemoryHigh)" "Tenant.RevertLimits"

# Errors: the key, the accepted range, bytes.
expect_fail "unknown setting 'MemorySwapMax'" mb_ctl revert app/a MemorySwapMax
expect_fail "unknown setting 'Foo'" mb_ctl set app/a Foo=
expect_fail "No tenant 'nope'" mb_ctl revert nope
expect_fail "ChargeBatch=99999 is out of range: 1 to 16384 pages" mb_ctl set app/a ChargeBatch=99999
expect_fail "invalid value for ChargeBatch: 'x' (a number of pages, 1 to 16384" mb_ctl set app/a ChargeBatch=x
expect_fail "MemoryMax=18446744073709551613 bytes is out of range: 0 to [0-9]* bytes ([0-9]* pages of 4096 bytes)" \
        mgr_call SetTenantLimits "sa{sv}b" app/a 1 MemoryMax t 18446744073709551613 true
expect_fail "Unknown setting 'Foo'" mgr_call RevertTenantLimits sasb app/a 1 Foo true
expect_fail "ChargeBatch=0 is out of range: 1 to 16384 pages (4096 to 67108864 bytes)" \
        mgr_call SetTenantLimits "sa{sv}b" app/a 1 ChargeBatch t 0 true
expect_fail "ChargeBatch=18446744073709551614 is out of range: 1 to 16384 pages" \
        mgr_call SetTenantLimits "sa{sv}b" app/a 1 ChargeBatch t 18446744073709551614 true
expect_fail "ChargeBatch=99999 is out of range: 1 to 16384 pages (4096 to 67108864 bytes)" \
        mgr_call CreateTenant "sa{sv}" app/new 1 ChargeBatch t 99999
