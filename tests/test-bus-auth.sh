#!/bin/bash
# SPDX-License-Identifier: MIT
# Changes need uid 0, checked from the sender's credentials as the bus
# reports them: root may SetTenantLimits; an unprivileged caller (nobody)
# gets org.freedesktop.DBus.Error.AccessDenied with a reason for every
# changing call, and nothing changes; reads stay open to it.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
need_root

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a" "MemoryMax=16M"
bus_run

obj=$(tenant_object app/a)

# Root: works and is visible at once.
mgr_call SetTenantLimits "sa{sv}b" app/a 2 MemoryMax t $((8 << 20)) MemoryHigh t $((6 << 20)) true
assert_eq $((8 << 20)) "$(tenant_prop app/a MemoryMax)" "MemoryMax set by root"
assert_eq $((6 << 20)) "$(tenant_prop app/a MemoryHigh)" "MemoryHigh set by root"
mb_busctl call "$BUS_DEST" "$obj" "$BUS_TENANT_IFACE" SetLimits "a{sv}b" 1 MemoryMax t $((12 << 20)) false
assert_eq $((12 << 20)) "$(tenant_prop app/a MemoryMax)" "MemoryMax set by root through Tenant.SetLimits"

# nobody can reach the private bus (its socket directory is 0755) and read.
assert_eq $((12 << 20)) "$(as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" get-property "$BUS_DEST" "$obj" \
        "$BUS_TENANT_IFACE" MemoryMax | _bus_value)" "MemoryMax read by nobody"
as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" \
        GetStatText s app/a | grep -q '^s "pages ' || fail "nobody cannot read GetStatText"
pass "reads are open to nobody"

# busctl as nobody: AccessDenied (busctl prints its own text for that name).
expect_fail "Access denied" as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$BUS_MGR_PATH" \
        "$BUS_MGR_IFACE" SetTenantLimits "sa{sv}b" app/a 1 MemoryMax t 4096 true
expect_fail "Access denied" as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$obj" \
        "$BUS_TENANT_IFACE" SetLimits "a{sv}b" 1 MemoryMax t 4096 true
expect_fail "Access denied" as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$BUS_MGR_PATH" \
        "$BUS_MGR_IFACE" CreateTenant "sa{sv}" app/b 0
assert_eq $((12 << 20)) "$(tenant_prop app/a MemoryMax)" "MemoryMax after the refused calls"
out=$(mgr_call GetTenant s app/b 2>&1) && fail "app/b was created by nobody"
pass "nothing changed"

# The error name and the reason, with dbus-send (methods without a{sv}).
for call in "$BUS_MGR_PATH $BUS_MGR_IFACE.RemoveTenant string:app/a" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.Reclaim string:app/a uint64:4096" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.Reload" \
            "$obj $BUS_TENANT_IFACE.Reclaim uint64:4096"; do
        # shellcheck disable=SC2086
        assert_eq org.freedesktop.DBus.Error.AccessDenied "$(error_name as_nobody "${DSEND[@]}" $call)" \
                "error of $call as nobody"
done
msg=$(as_nobody "${DSEND[@]}" "$BUS_MGR_PATH" "$BUS_MGR_IFACE.RemoveTenant" string:app/a 2>&1 || true)
case "$msg" in *"requires uid 0 (the caller runs as uid $NOBODY_UID)"*) ;;
        *) fail "the AccessDenied message gives no reason: $msg" ;; esac
pass "the reason names uid 0 and the caller's uid"
mgr_call GetTenant s app/a >/dev/null || fail "app/a was removed by nobody"

# The same through membrokerctl: the daemon's message, exit status 1.
rc=0
out=$(as_nobody "$MEMBROKERCTL" --address="$MB_BUS_ADDRESS" set app/a MemoryMax=1M 2>&1) || rc=$?
assert_eq 1 "$rc" "membrokerctl set as nobody: exit status"
case "$out" in *"Changing tenant limits requires uid 0"*) ;; *) fail "membrokerctl said: $out" ;; esac
pass "membrokerctl prints the reason"
