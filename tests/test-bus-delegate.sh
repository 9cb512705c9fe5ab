#!/bin/bash
# SPDX-License-Identifier: MIT
# Delegate= on a tenant lets the users it names manage the subtree below it,
# as cgroup v2 delegation does.  A delegated uid ("news", by setpriv, no groups, on
# the real bus: the daemon reads its uid from the bus) creates team/a, sets
# and reverts its limits (persisted like root's), reclaims from it, resets
# its peak and removes it, over busctl and membrokerctl, and its clients are
# admitted below team (nobody else's); it is refused, with
# org.freedesktop.DBus.Error.AccessDenied naming the rule, on team itself,
# on a sibling, on the root, on a new top-level tenant, and on Reload; path
# tricks ("team/../other", overlong names, too deep) create nothing.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
need_root
# Reclaim asserts on what the stock alone gives back.
export MEMBROKER_REFILL=0

# A uid with a passwd entry: dbus-daemon refuses connections from others.
DUID=$(getent passwd news | cut -d: -f3) || skip "no user 'news' in the passwd database (dbus-daemon needs one)"
as_delegate() { setpriv --reuid=$DUID --regid=$DUID --clear-groups "$@"; }
d_busctl() { as_delegate "$BUSCTL" --address="$MB_BUS_ADDRESS" "$@"; }
d_mgr() { local m=$1; shift; d_busctl call "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" "$m" "$@"; }
d_ctl() { as_delegate "$MEMBROKERCTL" --address="$MB_BUS_ADDRESS" "$@"; }

bus_setup "Capacity=64M"
mb_write_tenant team "Path=team" "MemoryMax=32M" "Delegate=$DUID"
mb_write_tenant other "Path=other" "MemoryMax=16M"
mb_write_tenant other-a "Path=other/a"
bus_run

assert_eq "as 1 \"$DUID\"" "$(mb_busctl get-property "$BUS_DEST" "$(tenant_object team)" "$BUS_TENANT_IFACE" Delegate)" \
        "Delegate property of team"
assert_eq 'as 0' "$(mb_busctl get-property "$BUS_DEST" "$(tenant_object other)" "$BUS_TENANT_IFACE" Delegate)" \
        "Delegate property of other"

# ---- what the delegate may do: below team ----
d_mgr CreateTenant "sa{sv}" team/a 1 MemoryMax t $((8 << 20)) >/dev/null || fail "the delegate cannot create team/a"
assert_eq $((8 << 20)) "$(tenant_prop team/a MemoryMax)" "MemoryMax of team/a created by the delegate"
d_mgr SetTenantLimits "sa{sv}b" team/a 1 MemoryMax t $((4 << 20)) false || fail "the delegate cannot set team/a"
assert_eq $((4 << 20)) "$(tenant_prop team/a MemoryMax)" "MemoryMax of team/a set by the delegate"
grep -q '^Path=team/a$' "$MB_STATE/limits.conf" && grep -q "^MemoryMax=$((4 << 20))$" "$MB_STATE/limits.conf" ||
        fail "the delegate's limit was not persisted: $(cat "$MB_STATE/limits.conf")"
pass "the delegate's MemoryMax is persisted in limits.conf like root's"
d_busctl call "$BUS_DEST" "$(tenant_object team/a)" "$BUS_TENANT_IFACE" SetLimits "a{sv}b" 1 MemoryHigh t \
        $((3 << 20)) true || fail "the delegate cannot Tenant.SetLimits team/a"
assert_eq $((3 << 20)) "$(tenant_prop team/a MemoryHigh)" "MemoryHigh of team/a set by the delegate (Tenant)"
# A child may be given more than the delegated tenant has: the parent's
# max bounds it anyway (as in cgroup v2).
d_mgr CreateTenant "sa{sv}" team/big 1 MemoryMax t $((48 << 20)) >/dev/null || fail "team/big"
pass "the delegate may give a child more than team's MemoryMax"

# Reclaim: a client (root may attach anywhere) holds pages in team/a.
load_start a team/a 2M
out=$(d_mgr Reclaim st team/a $((1 << 20)) 2>&1) || true
# Allowed: the reclaim ran (all of it, or memory.reclaim's EAGAIN with
# what it got), not AccessDenied.
case "$out" in "t "[0-9]*|*"Reclaimed "[0-9]*" of $((1 << 20)) bytes from 'team/a'"*) ;;
        *) fail "Reclaim of team/a by the delegate: $out" ;; esac
pass "the delegate reclaims from team/a: $out"
d_busctl call "$BUS_DEST" "$(tenant_object team/a)" "$BUS_TENANT_IFACE" ResetPeak || fail "ResetPeak by the delegate"
pass "the delegate resets team/a's peak"
load_stop a

d_mgr RevertTenantLimits "sasb" team/a 1 MemoryHigh true || fail "the delegate cannot revert team/a"
assert_eq 18446744073709551615 "$(tenant_prop team/a MemoryHigh)" "MemoryHigh of team/a reverted by the delegate"

# Any spelling of a path below team, and missing parents made on the way.
d_mgr CreateTenant "sa{sv}" /team/b/c/ 0 >/dev/null || fail "the delegate cannot create /team/b/c/"
mgr_call GetTenant s team/b >/dev/null || fail "team/b was not made on the way"
pass "the delegate creates team/b/c and its missing parent"

# Its own clients are admitted below team (as the owner of a delegated
# cgroup may move its processes into it), not elsewhere.
as_delegate "$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant team/a --hold 64K --seconds 0 \
        >"$MB_TMP/dl.out" 2>&1 || fail "the delegate's client was refused in team/a: $(cat "$MB_TMP/dl.out")"
grep -q "verify=ok" "$MB_TMP/dl.out" || fail "the delegate's client in team/a: $(cat "$MB_TMP/dl.out")"
pass "the delegate's client is admitted in team/a"
rc=0
as_delegate "$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant other/a --hold 64K --seconds 0 \
        >"$MB_TMP/dl.out" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "the delegate's client was admitted in other/a"
grep -q "uid $DUID (news) is not allowed in tenant other/a" "$MB_TMP/dl.out" ||
        fail "the delegate's client in other/a: $(cat "$MB_TMP/dl.out")"
rc=0
as_nobody "$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant team/a --hold 64K --seconds 0 >"$MB_TMP/dl.out" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "nobody's client was admitted in team/a"
grep -q "so only root may attach, and those Delegate= of team names" "$MB_TMP/dl.out" || fail "nobody in team/a: $(cat "$MB_TMP/dl.out")"
pass "other uids and other tenants stay closed"

# ---- what it may not do ----
obj_team=$(tenant_object team)
for call in "$BUS_MGR_PATH $BUS_MGR_IFACE.RemoveTenant string:team" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.Reclaim string:team uint64:4096" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.ResetPeak string:team" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.RevertTenantLimits string:team array:string: boolean:false" \
            "$obj_team $BUS_TENANT_IFACE.Reclaim uint64:4096" \
            "$obj_team $BUS_TENANT_IFACE.ResetPeak" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.RemoveTenant string:other/a" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.Reclaim string:other uint64:4096" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.ResetPeak string:other/a" \
            "$(tenant_object other/a) $BUS_TENANT_IFACE.Reclaim uint64:4096" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.Reclaim string:/ uint64:4096" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.Reload"; do
        # shellcheck disable=SC2086
        assert_eq org.freedesktop.DBus.Error.AccessDenied "$(error_name as_delegate "${DSEND[@]}" $call)" \
                "error of $call as the delegate"
done
msg=$(as_delegate "${DSEND[@]}" "$BUS_MGR_PATH" "$BUS_MGR_IFACE.RemoveTenant" string:team 2>&1 || true)
case "$msg" in *"uid $DUID may manage tenants below 'team' (Delegate=), not 'team' itself"*) ;;
        *) fail "RemoveTenant(team) gives no rule: $msg" ;; esac
msg=$(as_delegate "${DSEND[@]}" "$BUS_MGR_PATH" "$BUS_MGR_IFACE.RemoveTenant" string:other/a 2>&1 || true)
case "$msg" in *"requires uid 0 (the caller runs as uid $DUID), or a Delegate= on a tenant above 'other/a'"*) ;;
        *) fail "RemoveTenant(other/a) gives no rule: $msg" ;; esac
pass "the errors name the rule"
expect_fail "Access denied" d_mgr SetTenantLimits "sa{sv}b" team 1 MemoryMax t $((64 << 20)) false
expect_fail "Access denied" d_busctl call "$BUS_DEST" "$obj_team" "$BUS_TENANT_IFACE" SetLimits "a{sv}b" 1 \
        MemoryMax t $((64 << 20)) true
expect_fail "Access denied" d_mgr SetTenantLimits "sa{sv}b" other 1 MemoryMax t $((64 << 20)) true
expect_fail "Access denied" d_mgr SetTenantLimits "sa{sv}b" other/a 1 MemoryMax t 4096 true
expect_fail "Access denied" d_mgr CreateTenant "sa{sv}" other/x 0
expect_fail "Access denied" d_mgr CreateTenant "sa{sv}" x 0
expect_fail "Access denied" d_mgr CreateTenant "sa{sv}" team 0
expect_fail "Access denied" d_mgr SetTenantLimits "sa{sv}b" / 1 MemoryMax t 4096 true
assert_eq $((32 << 20)) "$(tenant_prop team MemoryMax)" "team's MemoryMax after the refused calls"
assert_eq $((16 << 20)) "$(tenant_prop other MemoryMax)" "other's MemoryMax after the refused calls"
assert_eq 18446744073709551615 "$(tenant_prop other/a MemoryMax)" "other/a's MemoryMax after the refused calls"

# ---- path tricks: normalised first, the rule on the result ----
before=$(mgr_call ListTenants)
long=$(printf 'x%.0s' $(seq 1 256))
deep=team$(printf '/d%.0s' $(seq 1 16))
for p in "team/../other" "team/../other/z" "team/a/../../x" "team/./a/z" "team/.." "team//x" \
         "team/$long" "$deep" "team/a b" "team/a/../../other/a"; do
        expect_fail "Invalid\|invalid" d_mgr CreateTenant "sa{sv}" "$p" 0
        expect_fail "Invalid\|invalid\|No tenant" d_mgr SetTenantLimits "sa{sv}b" "$p" 1 MemoryMax t 4096 true
        expect_fail "Invalid\|invalid\|No tenant" d_mgr RemoveTenant s "$p"
done
assert_eq "$before" "$(mgr_call ListTenants)" "the tenants after the path tricks"
assert_eq 18446744073709551615 "$(tenant_prop other/a MemoryMax)" "other/a after the path tricks"

# ---- membrokerctl, as the delegate ----
d_ctl create team/m MemoryMax=2M || fail "membrokerctl create as the delegate"
d_ctl set team/m MemoryHigh=1M || fail "membrokerctl set as the delegate"
assert_eq $((1 << 20)) "$(tenant_prop team/m MemoryHigh)" "MemoryHigh set with membrokerctl by the delegate"
d_ctl revert team/m || fail "membrokerctl revert as the delegate"
d_ctl reset-peak team/m || fail "membrokerctl reset-peak as the delegate"
out=$(d_ctl reclaim team/m 4K 2>&1) || true
case "$out" in *"Access denied"*|*"requires uid 0"*) fail "membrokerctl reclaim as the delegate: $out" ;; esac
d_ctl remove team/m || fail "membrokerctl remove as the delegate"
out=$(mgr_call GetTenant s team/m 2>&1) && fail "team/m is still there"
rc=0
out=$(d_ctl set team MemoryMax=1G 2>&1) || rc=$?
assert_eq 1 "$rc" "membrokerctl set team as the delegate: exit status"
case "$out" in *"may manage tenants below 'team' (Delegate=), not 'team' itself"*) ;;
        *) fail "membrokerctl set team said: $out" ;; esac
rc=0
out=$(d_ctl reload 2>&1) || rc=$?
assert_eq 1 "$rc" "membrokerctl reload as the delegate: exit status"
case "$out" in *"Reload requires uid 0"*) ;; *) fail "membrokerctl reload said: $out" ;; esac
rc=0
out=$(d_ctl create other/y 2>&1) || rc=$?
assert_eq 1 "$rc" "membrokerctl create other/y as the delegate: exit status"
pass "membrokerctl works for the delegate below team and is refused elsewhere"

# The delegate removes what it made; another uid may do nothing there.
d_mgr RemoveTenant s team/b/c && d_mgr RemoveTenant s team/b && d_mgr RemoveTenant s team/big ||
        fail "the delegate cannot remove its tenants"
expect_fail "Access denied" as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$BUS_MGR_PATH" \
        "$BUS_MGR_IFACE" SetTenantLimits "sa{sv}b" team/a 1 MemoryMax t 4096 true
expect_fail "Access denied" as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$BUS_MGR_PATH" \
        "$BUS_MGR_IFACE" CreateTenant "sa{sv}" team/n 0
assert_eq $((4 << 20)) "$(tenant_prop team/a MemoryMax)" "team/a after nobody's attempts"
