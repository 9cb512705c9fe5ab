#!/bin/bash
# SPDX-License-Identifier: MIT
# The shipped bus policy and the interface cannot drift apart: every method
# of the introspection XML (dbus/*.xml) is called as uid 65534 through a
# real dbus-daemon that loads systemd/org.membroker1.conf over a system
# bus's default policy.  Each must reach the daemon (whatever it answers:
# a reply, InvalidArgs for the missing arguments, its own AccessDenied),
# except Manager.Reload, which the bus itself refuses ("Rejected send
# message").  Every method the policy names must exist in the XML.  Then
# the pressure reads, which an unprivileged reader is promised, for real:
# membrokerctl pressure as uid 65534.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
need_root
command -v dbus-send >/dev/null || skip "dbus-send is not installed"

POLICY=$top_srcdir/systemd/org.membroker1.conf
# Methods the bus refuses to everyone but root (interface.member).
ROOT_ONLY=" org.membroker1.Manager.Reload "

mb_start_policy_bus
mb_write_broker_conf "Capacity=64M"
mb_write_tenant a "Path=app/a" "MemoryMax=16M"
mb_start_daemon
obj=$(tenant_object app/a)
[ -n "$obj" ] || fail "no object for app/a"

# interface.member of every method of the XML files, one a line.
methods=$(for x in "$top_srcdir"/dbus/*.xml; do
        sed -n -e 's/.*<interface name="\([^"]*\)".*/I \1/p' -e 's/.*<method name="\([^"]*\)".*/M \1/p' "$x"
done | awk '$1 == "I" { i = $2 } $1 == "M" { print i "." $2 }')
n=$(wc -l <<<"$methods")
[ "$n" -ge 20 ] || fail "only $n methods found in the introspection XML"

reached=0
while read -r m; do
        iface=${m%.*}
        case $iface in
        org.membroker1.Manager) path=$BUS_MGR_PATH ;;
        org.membroker1.Tenant) path=$obj ;;
        *) fail "method $m of an interface this test does not know" ;;
        esac
        out=$(as_nobody dbus-send --bus="$MB_BUS_ADDRESS" --print-reply --reply-timeout=10000 --dest="$BUS_DEST" \
                "$path" "$m" 2>&1) || true
        case "$ROOT_ONLY" in
        *" $m "*)
                case "$out" in
                *"Rejected send message"*) ;;
                *) fail "$m is root-only, but the bus let uid 65534 through: $out" ;;
                esac ;;
        *)
                case "$out" in
                *"Rejected send message"*) fail "the shipped policy refuses $m to uid 65534: $out" ;;
                *"org.freedesktop.DBus.Error.NoReply"* | *"ServiceUnknown"* | *"Disconnected"*)
                        fail "$m: no answer from the daemon: $out" ;;
                esac
                reached=$((reached + 1)) ;;
        esac
done <<<"$methods"
pass "all $n methods of the introspection XML: $reached reach the daemon as uid 65534, the bus refuses$ROOT_ONLY"

# The other way: every member the policy names is a method of the XML.
# (Each allow rule of the policy is one send_interface= + send_member= pair.)
named=$(tr '\n' ' ' <"$POLICY" | grep -o '<allow [^>]*send_member="[^"]*"[^>]*>' |
        sed -n 's/.*send_interface="\(org\.membroker1\.[^"]*\)".*send_member="\([^"]*\)".*/\1.\2/p')
[ -n "$named" ] || fail "no send_member rule found in $POLICY"
while read -r m; do
        grep -qxF "$m" <<<"$methods" || fail "the policy names $m, which the introspection XML does not have"
done <<<"$named"
pass "the $(wc -l <<<"$named") methods the policy names all exist in the XML"

# Pressure, read by an unprivileged user through the shipped policy.
out=$(as_nobody "$MEMBROKERCTL" --address="$MB_BUS_ADDRESS" pressure /) ||
        fail "membrokerctl pressure / as uid 65534: $out"
grep -q '^some avg10=' <<<"$out" || fail "membrokerctl pressure / as uid 65534 printed: $out"
out=$(as_nobody "$MEMBROKERCTL" --address="$MB_BUS_ADDRESS" pressure app/a) ||
        fail "membrokerctl pressure app/a as uid 65534: $out"
grep -q '^full avg10=' <<<"$out" || fail "membrokerctl pressure app/a as uid 65534 printed: $out"
id=$(as_nobody "$BUSCTL" --address="$MB_BUS_ADDRESS" call "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" \
        AddPressureTrigger ss app/a "some 150000 1000000") || fail "AddPressureTrigger as uid 65534: $id"
pass "membrokerctl pressure and a pressure trigger work as uid 65534 ($id)"
