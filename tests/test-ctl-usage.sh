#!/bin/bash
# SPDX-License-Identifier: MIT
# membrokerctl help and usage errors: --help lists every verb, each verb has
# its own help (help VERB = VERB --help), usage errors exit with 2, and
# without membrokerd on the bus it says so and exits with 1.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

main=$("$MEMBROKERCTL" --help)
for v in status tree stat events set revert reclaim reset-peak top create remove reload help; do
        printf '%s\n' "$main" | grep -q "^  $v" || fail "--help does not list $v"
done
for v in status tree stat events set revert reclaim reset-peak top create remove reload; do
        h=$("$MEMBROKERCTL" help "$v")
        assert_eq "$h" "$("$MEMBROKERCTL" "$v" --help)" "help $v = $v --help"
        printf '%s\n' "$h" | head -1 | grep -q "^membrokerctl \[OPTIONS...\] $v" || fail "help $v: $(printf '%s\n' "$h" | head -1)"
done
pass "help for the tool and every verb"

usage() { # usage ARGS... : must exit 2
        local rc=0
        "$MEMBROKERCTL" --address=unix:path=/nonexistent "$@" >/dev/null 2>&1 || rc=$?
        assert_eq 2 "$rc" "exit status of: membrokerctl $*"
}
usage
usage frobnicate
usage stat --format=yaml
usage events
usage events a b
usage reclaim app
usage reset-peak
usage reset-peak a b
usage tree a b
usage status --format=openmetrics
usage top -n x
usage top -d 0
usage help nosuchverb

# A bus without membrokerd.
mb_start_bus
rc=0
out=$(mb_ctl status 2>&1) || rc=$?
assert_eq 1 "$rc" "exit status without membrokerd"
case "$out" in *"membrokerd is not running on this bus"*) ;; *) fail "message without membrokerd: $out" ;; esac
rc=0
out=$("$MEMBROKERCTL" --address=unix:path="$MB_TMP/nonexistent" status 2>&1) || rc=$?
assert_eq 1 "$rc" "exit status without a bus"
case "$out" in *"cannot connect to unix:path="*) ;; *) fail "message without a bus: $out" ;; esac

# --user without a session bus: says why and what to do instead.
rc=0
out=$(env -u DBUS_SESSION_BUS_ADDRESS -u XDG_RUNTIME_DIR "$MEMBROKERCTL" --user status 2>&1) || rc=$?
assert_eq 1 "$rc" "exit status of --user without a session bus"
case "$out" in *"not a login session (neither \$DBUS_SESSION_BUS_ADDRESS nor \$XDG_RUNTIME_DIR is set)"*"drop --user"*) ;;
*) fail "message of --user without a session bus: $out" ;; esac
rc=0
out=$(env -u DBUS_SESSION_BUS_ADDRESS XDG_RUNTIME_DIR="$MB_TMP/no-runtime-dir" "$MEMBROKERCTL" --user status 2>&1) || rc=$?
assert_eq 1 "$rc" "exit status of --user without a bus in XDG_RUNTIME_DIR"
case "$out" in *"no session bus listens on $MB_TMP/no-runtime-dir/bus"*) ;;
*) fail "message of --user without a bus socket: $out" ;; esac
pass "--user without a session bus: $out"

# --no-pager is accepted (as systemctl's), --version works.
"$MEMBROKERCTL" --no-pager --no-legend --help >/dev/null || fail "--no-pager --no-legend"
"$MEMBROKERCTL" --version | grep -q '^membrokerctl [0-9]' || fail "--version"
pass "--no-pager and --version"
