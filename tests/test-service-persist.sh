#!/bin/bash
# SPDX-License-Identifier: MIT
# Limits changed over D-Bus, layered like systemd drop-ins:
#   /etc (the files) < persisted (runtime=false, STATE_DIR/limits.conf) <
#   runtime (runtime=true, until the service stops).
# Persisted changes survive a reload and a restart; runtime changes survive
# a reload but not a restart (without the fd store); a persistent change of a
# field drops its runtime value; RemoveTenant forgets both; a bad
# limits.conf or a bad configuration file fails Reload() with file:line in
# the D-Bus error and keeps everything as it was.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

M=$((1 << 20))
bus_setup "Capacity=256M"
mb_write_tenant a "Path=a" "MemoryMax=16M" "MemoryHigh=12M"
mb_write_tenant b "Path=b" "MemoryMax=16M"
bus_run

set_limits() { # PATH KEY BYTES RUNTIME
        mgr_call SetTenantLimits "sa{sv}b" "$1" 1 "$2" t "$3" "$4"
}

set_limits a MemoryMax $((8 * M)) false
assert_eq $((8 * M)) "$(tenant_prop a MemoryMax)" "persisted MemoryMax of a applies at once"
grep -qx "MemoryMax=$((8 * M))" "$MB_STATE/limits.conf" || fail "limits.conf: $(cat "$MB_STATE/limits.conf")"
pass "the persisted change is in limits.conf"

set_limits b MemoryMax $((4 * M)) true
assert_eq $((4 * M)) "$(tenant_prop b MemoryMax)" "runtime MemoryMax of b applies at once"
! grep -q "Path=b" "$MB_STATE/limits.conf" || fail "a runtime change was written to limits.conf"
pass "the runtime change is not on disk"

set_limits a MemoryHigh $((6 * M)) false
set_limits a MemoryHigh $((5 * M)) true
assert_eq $((5 * M)) "$(tenant_prop a MemoryHigh)" "runtime MemoryHigh over persisted"

# Through the Tenant object as well (persisted).
obj=$(tenant_object b)
mb_busctl call "$BUS_DEST" "$obj" "$BUS_TENANT_IFACE" SetLimits "a{sv}b" 1 MemoryLow t $((1 * M)) false
assert_eq $((1 * M)) "$(tenant_prop b MemoryLow)" "Tenant.SetLimits persisted MemoryLow"

# A reload re-applies the layers over the files.
mb_write_tenant a "Path=a" "MemoryMax=10M" "MemoryHigh=9M" "MemoryMin=1M"
mgr_call Reload
assert_eq $((8 * M)) "$(tenant_prop a MemoryMax)" "after a reload, persisted MemoryMax over the file"
assert_eq $((5 * M)) "$(tenant_prop a MemoryHigh)" "after a reload, runtime MemoryHigh over the others"
assert_eq $((1 * M)) "$(tenant_prop a MemoryMin)" "after a reload, MemoryMin from the file"
assert_eq $((4 * M)) "$(tenant_prop b MemoryMax)" "after a reload, runtime MemoryMax of b"

# A restart without the fd store: persisted stays, runtime goes.
mb_stop_daemon
mb_start_daemon
assert_eq $((8 * M)) "$(tenant_prop a MemoryMax)" "after a restart, persisted MemoryMax"
assert_eq $((6 * M)) "$(tenant_prop a MemoryHigh)" "after a restart, persisted MemoryHigh (runtime gone)"
assert_eq $((16 * M)) "$(tenant_prop b MemoryMax)" "after a restart, MemoryMax of b from the file (runtime gone)"
assert_eq $((1 * M)) "$(tenant_prop b MemoryLow)" "after a restart, persisted MemoryLow of b"

# A persistent change of a field drops its runtime value.
set_limits a MemoryHigh $((3 * M)) true
set_limits a MemoryHigh $((7 * M)) false
assert_eq $((7 * M)) "$(tenant_prop a MemoryHigh)" "what was set last applies"
mgr_call Reload
assert_eq $((7 * M)) "$(tenant_prop a MemoryHigh)" "and still after a reload"

# "max" is persisted as max.
set_limits b MemoryMax 18446744073709551615 false
grep -q "MemoryMax=max" "$MB_STATE/limits.conf" || fail "max was not written as max"
assert_eq 18446744073709551615 "$(tenant_prop b MemoryMax)" "MemoryMax=max persisted"

# RemoveTenant forgets what was persisted for the tenant.
mgr_call CreateTenant "sa{sv}" c 0 >/dev/null
set_limits c MemoryMax $((2 * M)) false
grep -q "Path=c" "$MB_STATE/limits.conf" || fail "c is not in limits.conf"
mgr_call RemoveTenant s c
! grep -q "Path=c" "$MB_STATE/limits.conf" || fail "RemoveTenant left c in limits.conf"
mgr_call CreateTenant "sa{sv}" c 0 >/dev/null
assert_eq 18446744073709551615 "$(tenant_prop c MemoryMax)" "a tenant made again starts without old limits"
pass "RemoveTenant forgets the tenant's limits"

# A bad limits.conf: Reload() fails with file:line, nothing changes.
cp "$MB_STATE/limits.conf" "$MB_TMP/limits.good"
printf '[Tenant]\nPath=a\nMemoryMax=lots\n' >"$MB_STATE/limits.conf"
out=$(mgr_call Reload 2>&1) && fail "Reload accepted a bad limits.conf"
case "$out" in *"limits.conf:3: invalid size \"lots\""*) ;; *) fail "Reload error: $out" ;; esac
assert_eq $((8 * M)) "$(tenant_prop a MemoryMax)" "MemoryMax of a after the bad reload"
pass "a bad limits.conf fails Reload with file:line"
cp "$MB_TMP/limits.good" "$MB_STATE/limits.conf"

# A bad configuration file: the same, with the file's name.
mb_write_tenant b "Path=b" "MemoryMax=sixteen"
out=$(mgr_call Reload 2>&1) && fail "Reload accepted a bad configuration"
case "$out" in *"tenants.d/b.conf:3: "*) ;; *) fail "Reload error: $out" ;; esac
assert_eq 18446744073709551615 "$(tenant_prop b MemoryMax)" "MemoryMax of b after the bad reload"
pass "a bad tenants.d file fails Reload with file:line"
mb_write_tenant b "Path=b" "MemoryMax=16M"

# A bad limits.conf at start-up stops the daemon with the reason.
printf '[Tenant]\nMemoryMax=1\n' >"$MB_STATE/limits.conf"
mb_stop_daemon
rc=0
"$MEMBROKERD" --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" --no-bus \
        >"$MB_TMP/bad-start.log" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "membrokerd started with a bad limits.conf"
grep -q "limits.conf:1: \[Tenant\] section without Path=" "$MB_TMP/bad-start.log" ||
        fail "no file:line at start-up: $(cat "$MB_TMP/bad-start.log")"
pass "a bad limits.conf stops start-up with file:line"
