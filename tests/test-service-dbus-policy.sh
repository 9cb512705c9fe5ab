#!/bin/bash
# SPDX-License-Identifier: MIT
# The shipped D-Bus policy (systemd/org.membroker1.conf), loaded by a real
# dbus-daemon that applies a system bus's default policy (method calls
# denied unless a policy file allows them): root owns org.membroker1,
# nobody may not; everyone may read (properties, stats, introspection);
# Reload is root-only in the bus itself; the calls that change a tenant
# reach the daemon, which decides (uid 0, or Delegate=).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
need_root
command -v "$DBUS_DAEMON" >/dev/null || skip "dbus-daemon is not installed"
command -v "$BUSCTL" >/dev/null || skip "busctl is not installed"
command -v dbus-send >/dev/null || skip "dbus-send is not installed"

mb_start_policy_bus
pass "dbus-daemon loads the shipped policy"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant a "Path=app/a" "MemoryMax=16M"
DUID=$(getent passwd news | cut -d: -f3) || DUID=
[ -z "$DUID" ] || mb_write_tenant team "Path=team" "Delegate=$DUID"
mb_start_daemon
pass "root owns org.membroker1"

DSEND=(dbus-send --bus="$MB_BUS_ADDRESS" --print-reply --dest="$BUS_DEST")
obj=$(tenant_object app/a)

# Reads are open to nobody.
as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" get-property "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" \
        Capacity >/dev/null || fail "nobody cannot read a Manager property"
as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" get-property "$BUS_DEST" "$obj" "$BUS_TENANT_IFACE" \
        MemoryMax >/dev/null || fail "nobody cannot read a Tenant property"
for m in "ListTenants" "GetTenant s app/a" "GetStat s app/a" "GetStatText s app/a" "GetEvents s app/a" \
         "DumpStats" "DumpStatsCompact"; do
        # shellcheck disable=SC2086
        as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" $m \
                >/dev/null || fail "nobody cannot call $m"
done
for m in GetStat GetStatText GetEvents; do
        as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$obj" "$BUS_TENANT_IFACE" $m \
                >/dev/null || fail "nobody cannot call Tenant.$m"
done
as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" introspect "$BUS_DEST" "$BUS_MGR_PATH" >/dev/null ||
        fail "nobody cannot introspect"
pass "reads are open to nobody"

# Reload is refused by the bus itself (dbus-daemon's "Rejected send
# message" text, not the daemon's "requires uid 0").
out=$(as_nobody "${DSEND[@]}" "$BUS_MGR_PATH" "$BUS_MGR_IFACE.Reload" 2>&1) && fail "nobody may call Reload"
case "$out" in
*org.freedesktop.DBus.Error.AccessDenied*"Rejected send message"*) ;;
*) fail "Reload was not refused by the bus policy: $out" ;;
esac
# The calls that change a tenant reach the daemon, which decides (uid 0 or
# Delegate=): its own AccessDenied, naming the rule.
for call in "$BUS_MGR_PATH $BUS_MGR_IFACE.RemoveTenant string:app/a" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.Reclaim string:app/a uint64:4096" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.ResetPeak string:app/a" \
            "$BUS_MGR_PATH $BUS_MGR_IFACE.RevertTenantLimits string:app/a array:string: boolean:true" \
            "$obj $BUS_TENANT_IFACE.Reclaim uint64:4096" \
            "$obj $BUS_TENANT_IFACE.ResetPeak" \
            "$obj $BUS_TENANT_IFACE.RevertLimits array:string: boolean:true"; do
        # shellcheck disable=SC2086
        out=$(as_nobody "${DSEND[@]}" $call 2>&1) && fail "nobody may call $call"
        case "$out" in
        *org.freedesktop.DBus.Error.AccessDenied*"requires uid 0 (the caller runs as uid $NOBODY_UID)"*) ;;
        *) fail "$call did not reach the daemon's check: $out" ;;
        esac
done
# (busctl prints its own text for AccessDenied: membrokerctl shows the
# daemon's message for the calls with an a{sv}.)
for cmd in "set --runtime app/a MemoryMax=4K" "create app/b"; do
        # shellcheck disable=SC2086
        out=$(as_nobody "$MEMBROKERCTL" --address="$MB_BUS_ADDRESS" $cmd 2>&1) && fail "nobody may $cmd"
        case "$out" in *"requires uid 0 (the caller runs as uid $NOBODY_UID)"*) ;;
                *) fail "membrokerctl $cmd did not reach the daemon's check: $out" ;; esac
done
expect_fail "Access denied" as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$obj" \
        "$BUS_TENANT_IFACE" SetLimits "a{sv}b" 1 MemoryMax t 4096 true
assert_eq $((16 << 20)) "$(tenant_prop app/a MemoryMax)" "MemoryMax after nobody's calls"
pass "changes reach the daemon, which refuses nobody"

# ... allowed to a delegate below its tenant (the policy lets it through) ...
if [ -n "$DUID" ]; then
        setpriv --reuid="$DUID" --regid="$DUID" --clear-groups "$MEMBROKERCTL" --address="$MB_BUS_ADDRESS" \
                create team/x MemoryMax=1M || fail "the delegate cannot create team/x through the shipped policy"
        setpriv --reuid="$DUID" --regid="$DUID" --clear-groups "$MEMBROKERCTL" --address="$MB_BUS_ADDRESS" \
                remove team/x || fail "the delegate cannot remove team/x through the shipped policy"
        pass "a delegate manages its subtree through the shipped policy"
else
        echo "no user 'news' in the passwd database: the delegate's calls are not tried"
fi

# ... and allowed to root.
mgr_call SetTenantLimits "sa{sv}b" app/a 1 MemoryMax t $((8 << 20)) true
assert_eq $((8 << 20)) "$(tenant_prop app/a MemoryMax)" "MemoryMax set by root"
mgr_call Reload >/dev/null || fail "root cannot Reload"

# Only root may own the name.
out=$(as_nobody dbus-send --bus="$MB_BUS_ADDRESS" --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.RequestName string:org.membroker1 uint32:4 2>&1) && fail "nobody may own org.membroker1"
case "$out" in *AccessDenied*) ;; *) fail "RequestName as nobody: $out" ;; esac
pass "nobody may not own org.membroker1"
