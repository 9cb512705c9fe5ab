#!/bin/bash
# SPDX-License-Identifier: MIT
# Delegate= by group: "@GROUP" names a group, matched against the
# supplementary groups the bus daemon recorded for the caller (setpriv
# --groups), for bus calls, and against the client's groups for admission;
# the same uid without that group is refused.  Names resolve
# through NSS; an unknown one makes the reload fail naming file:line.
# DelegateMaxDescendants= bounds how many tenants delegates make below it.
# Delegate= removed at reload ends the rights at once but keeps the subtree
# and the limits the delegate persisted; a tenant gone from the files loses
# its Delegate= as well (it drains).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
need_root

# Users and groups with passwd/group entries: dbus-daemon refuses
# connections from uids it cannot look up.
DUID=$(getent passwd uucp | cut -d: -f3) || skip "no user 'uucp' in the passwd database (dbus-daemon needs one)"
DGID=$(getent group staff | cut -d: -f3) || skip "no group 'staff' in the group database"
in_group() { setpriv --reuid=$DUID --regid=$DUID --groups=$DGID "$@"; }
no_group() { setpriv --reuid=$DUID --regid=$DUID --clear-groups "$@"; }
g_mgr() { local m=$1; shift; in_group "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$BUS_MGR_PATH" \
        "$BUS_MGR_IFACE" "$m" "$@"; }
n_mgr() { local m=$1; shift; no_group "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$BUS_MGR_PATH" \
        "$BUS_MGR_IFACE" "$m" "$@"; }

bus_setup "Capacity=64M"
mb_write_tenant team "Path=team" "MemoryMax=32M" "Delegate=@staff"
mb_write_tenant lab "Path=lab" "Delegate=uucp" "DelegateMaxDescendants=3"
bus_run

assert_eq "as 1 \"@$DGID\"" "$(mb_busctl get-property "$BUS_DEST" "$(tenant_object team)" "$BUS_TENANT_IFACE" \
        Delegate)" "Delegate property of team (a group)"
assert_eq "as 1 \"$DUID\"" "$(mb_busctl get-property "$BUS_DEST" "$(tenant_object lab)" "$BUS_TENANT_IFACE" \
        Delegate)" "Delegate property of lab (a user name, resolved)"

# ---- the group form ----
expect_fail "Access denied" n_mgr CreateTenant "sa{sv}" team/a 0
g_mgr CreateTenant "sa{sv}" team/a 0 >/dev/null || fail "a member of staff cannot create team/a"
g_mgr SetTenantLimits "sa{sv}b" team/a 1 MemoryMax t $((4 << 20)) false || fail "a member of staff cannot set team/a"
assert_eq $((4 << 20)) "$(tenant_prop team/a MemoryMax)" "MemoryMax of team/a set through the group"
expect_fail "Access denied" n_mgr SetTenantLimits "sa{sv}b" team/a 1 MemoryMax t 4096 true
expect_fail "Access denied" g_mgr SetTenantLimits "sa{sv}b" team 1 MemoryMax t 4096 true
msg=$(in_group "${DSEND[@]}" "$BUS_MGR_PATH" "$BUS_MGR_IFACE.RemoveTenant" string:team 2>&1 || true)
case "$msg" in *"uid $DUID may manage tenants below 'team' (Delegate=), not 'team' itself"*) ;;
        *) fail "RemoveTenant(team) by a member of staff: $msg" ;; esac
# Clients: admitted below team with the group, refused without it.
load_as() { local who=$1; shift; "$who" "$MEMBROKER_LOAD" --socket "$MB_SOCK" --hold 64K --seconds 0 "$@"; }
load_as in_group --tenant team/a >"$MB_TMP/l.out" 2>&1 || fail "a member of staff's client: $(cat "$MB_TMP/l.out")"
load_as no_group --tenant team/a >"$MB_TMP/l.out" 2>&1 && fail "a client without staff was admitted in team/a"
grep -q "so only root may attach, and those Delegate= of team names" "$MB_TMP/l.out" || fail "refused client: $(cat "$MB_TMP/l.out")"
pass "a member of staff's client is admitted in team/a, the same uid without the group is not"
# The user form by name, for the same uid, in its own subtree only.
n_mgr CreateTenant "sa{sv}" lab/x 0 >/dev/null || fail "uucp cannot create lab/x"
expect_fail "Access denied" n_mgr CreateTenant "sa{sv}" team/y 0
# DelegateMaxDescendants=3 (cgroup.max.descendants): lab/x, lab/y, lab/y/z,
# then no more for the delegate; root is not bound by it.
n_mgr CreateTenant "sa{sv}" lab/y/z 0 >/dev/null || fail "uucp cannot create lab/y/z (3 below lab)"
msg=$(no_group "$MEMBROKERCTL" --address="$MB_BUS_ADDRESS" create lab/w 2>&1) && fail "a 4th tenant below lab"
case "$msg" in *"'lab' has 3 tenants below it, and its delegates may make at most DelegateMaxDescendants=3"*) ;;
        *) fail "a 4th tenant below lab by the delegate: $msg" ;; esac
mgr_call CreateTenant "sa{sv}" lab/r 0 >/dev/null || fail "root cannot create a 4th tenant below lab"
mgr_call RemoveTenant s lab/r
pass "DelegateMaxDescendants= bounds what delegates create"
pass "groups count where the bus reported them, users by name"

# ---- an unknown name: the reload fails and names file:line ----
mb_write_tenant team "Path=team" "MemoryMax=32M" "Delegate=@staff no-such-user-mbtest"
out=$(mb_ctl reload 2>&1) && fail "a reload with an unknown user in Delegate= succeeded"
case "$out" in *"team.conf:4: unknown user 'no-such-user-mbtest' in Delegate="*) ;;
        *) fail "the reload error does not name file:line: $out" ;; esac
mb_write_tenant team "Path=team" "MemoryMax=32M" "Delegate=@no-such-group-mbtest"
out=$(mb_ctl reload 2>&1) && fail "a reload with an unknown group in Delegate= succeeded"
case "$out" in *"team.conf:4: unknown group 'no-such-group-mbtest' in Delegate="*) ;;
        *) fail "the reload error does not name file:line: $out" ;; esac
g_mgr SetTenantLimits "sa{sv}b" team/a 1 MemoryHigh t $((3 << 20)) true || fail "the failed reload changed the rights"
pass "a bad Delegate= keeps the running configuration (and its rights)"

# ---- Delegate= removed at reload: the rights end, the subtree stays ----
mb_write_tenant team "Path=team" "MemoryMax=32M"
mb_ctl reload || fail "reload without Delegate="
assert_eq "as 0" "$(mb_busctl get-property "$BUS_DEST" "$(tenant_object team)" "$BUS_TENANT_IFACE" Delegate)" \
        "Delegate property of team after the reload"
expect_fail "Access denied" g_mgr SetTenantLimits "sa{sv}b" team/a 1 MemoryMax t 4096 true
expect_fail "Access denied" g_mgr CreateTenant "sa{sv}" team/b 0
expect_fail "Access denied" g_mgr RemoveTenant s team/a
load_as in_group --tenant team/a >"$MB_TMP/l.out" 2>&1 && fail "a staff client was admitted after Delegate= went"
mgr_call GetTenant s team/a >/dev/null || fail "team/a is gone after the reload"
assert_eq $((4 << 20)) "$(tenant_prop team/a MemoryMax)" "team/a keeps the MemoryMax the delegate persisted"
grep -q '^Path=team/a$' "$MB_STATE/limits.conf" || fail "team/a's limits left limits.conf"
pass "removing Delegate= ends the rights and keeps the subtree"

# ---- a delegated tenant gone from the files drains without its Delegate= ----
rm "$MB_ETC/tenants.d/lab.conf"
mb_ctl reload || fail "reload without lab"
expect_fail "Access denied" n_mgr SetTenantLimits "sa{sv}b" lab/x 1 MemoryMax t 4096 true
assert_eq "as 0" "$(mb_busctl get-property "$BUS_DEST" "$(tenant_object lab)" "$BUS_TENANT_IFACE" Delegate)" \
        "Delegate property of lab, gone from the files"
pass "a tenant gone from the files delegates no more"

# ---- and back ----
mb_write_tenant team "Path=team" "MemoryMax=32M" "Delegate=@$DGID"
mb_ctl reload || fail "reload with Delegate=@GID"
g_mgr SetTenantLimits "sa{sv}b" team/a 1 MemoryMax t $((2 << 20)) true || fail "Delegate= back: still refused"
assert_eq $((2 << 20)) "$(tenant_prop team/a MemoryMax)" "MemoryMax of team/a once Delegate= is back (by gid)"
