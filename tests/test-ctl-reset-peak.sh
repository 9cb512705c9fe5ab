#!/bin/bash
# SPDX-License-Identifier: MIT
# MemoryPeak starts over from the current usage on request, like a write to
# memory.peak (page_counter_reset_watermark()): ResetPeak() on the Manager
# (by path) and on the Tenant object, and `membrokerctl reset-peak PATH`;
# root only.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

# What a free gives back is what this counts: no spill keeping it (far
# from every limit a client keeps megabytes it freed for itself).
export MEMBROKER_SPILL=0
bus_setup "Capacity=64M" "ChargeBatch=16"
mb_write_tenant a "Path=app/a"
bus_run

pc_start a app/a --cpu 0  # one stock serves every allocation
assert_eq "alloc ok 512" "$(pc a alloc 512)" "allocate 2M"
assert_eq "free ok 384" "$(pc a free 384)" "free 1.5M"
peak=$(tenant_prop app/a MemoryPeak)
cur=$(tenant_prop app/a MemoryCurrent)
[ "$peak" -ge $((512 * PAGE)) ] || fail "MemoryPeak $peak below what was allocated"
[ "$cur" -lt "$peak" ] || fail "MemoryCurrent $cur not below MemoryPeak $peak"

mb_ctl reset-peak app/a || fail "membrokerctl reset-peak failed"
assert_eq "$cur" "$(tenant_prop app/a MemoryPeak)" "MemoryPeak of app/a after reset-peak"
assert_eq "$peak" "$(tenant_prop app MemoryPeak)" "MemoryPeak of app (not reset)"

mgr_call ResetPeak s app >/dev/null
assert_eq "$(tenant_prop app MemoryCurrent)" "$(tenant_prop app MemoryPeak)" "MemoryPeak of app after Manager.ResetPeak"

# Past what the stock holds: new charges, a new peak below the old one.
assert_eq "alloc ok 200" "$(pc a alloc 200)" "allocate again"
peak2=$(tenant_prop app/a MemoryPeak)
[ "$peak2" -gt "$cur" ] && [ "$peak2" -lt "$peak" ] || fail "MemoryPeak $peak2 does not follow the usage from the reset"
pass "MemoryPeak grows again from the reset: $peak2"
assert_eq "free ok 200" "$(pc a free 200)" "free again"
mb_busctl call "$BUS_DEST" "$(tenant_object app/a)" "$BUS_TENANT_IFACE" ResetPeak >/dev/null ||
        fail "Tenant.ResetPeak failed"
assert_eq "$(tenant_prop app/a MemoryCurrent)" "$(tenant_prop app/a MemoryPeak)" "MemoryPeak after Tenant.ResetPeak"

expect_fail "No tenant 'nope'" mb_ctl reset-peak nope
if as_nobody true 2>/dev/null; then
        assert_eq org.freedesktop.DBus.Error.AccessDenied \
                "$(error_name as_nobody "${DSEND[@]}" "$BUS_MGR_PATH" "$BUS_MGR_IFACE.ResetPeak" string:app)" \
                "ResetPeak as nobody"
fi
pc_quit a
mb_daemon_alive
