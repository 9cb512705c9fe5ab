# SPDX-License-Identifier: MIT
# tests/bus-lib.sh - helpers of the D-Bus tests (sourced after lib.sh).
#
# Everything goes through the real bus: a private dbus-daemon, the real
# membrokerd on it, real busctl (and dbus-send where an error *name* must be
# seen: busctl prints its own text for AccessDenied), real membroker-load
# clients and the real membrokerctl.

BUS_DEST=org.membroker1
BUS_MGR_PATH=/org/membroker1
BUS_MGR_IFACE=org.membroker1.Manager
BUS_TENANT_IFACE=org.membroker1.Tenant
NOBODY_UID=65534

# bus_setup [BROKER-CONF-LINES...] : membroker.conf with the lines given; the
# tenants are written by the caller (mb_write_tenant) before bus_run.
bus_setup() {
        mb_write_broker_conf "$@"
}

# bus_run [DAEMON-ARGS...] : private bus + membrokerd on it
bus_run() {
        command -v "$BUSCTL" >/dev/null || skip "busctl is not installed"
        mb_start_bus
        DSEND=(dbus-send --bus="$MB_BUS_ADDRESS" --print-reply --dest="$BUS_DEST")
        mb_start_daemon "$@"
}

# mgr_call METHOD [SIGNATURE ARGS...] : call a Manager method with busctl
mgr_call() {
        local method=$1; shift
        mb_busctl call "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" "$method" "$@"
}

# busctl output "t 123" / 's "x"' -> 123 / x
_bus_value() { sed -e 's/^[a-z]* //' -e 's/^"\(.*\)"$/\1/'; }

# mgr_prop NAME : value of a Manager property
mgr_prop() {
        mb_busctl get-property "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" "$1" | _bus_value
}

# tenant_object PATH : object path of a tenant, from GetTenant
tenant_object() {
        mgr_call GetTenant s "$1" | _bus_value
}

# tenant_prop PATH NAME : value of a Tenant property
tenant_prop() {
        local obj
        obj=$(tenant_object "$1")
        mb_busctl get-property "$BUS_DEST" "$obj" "$BUS_TENANT_IFACE" "$2" | _bus_value
}

# stat_text PATH : GetStatText as real lines
stat_text() {
        local raw
        raw=$(mgr_call GetStatText s "$1")
        raw=${raw#s \"}
        raw=${raw%\"}
        printf '%b' "$raw"
}

# stat_value PATH KEY : one value of GetStatText
stat_value() {
        stat_text "$1" | awk -v k="$2" '$1 == k { print $2; found = 1 } END { exit !found }'
}

# events_value PATH KEY : one value of GetEvents ("max", "max.local", ...)
events_value() {
        mgr_call GetEvents s "$1" | tr ' ' '\n' | awk -v k="\"$2\"" 'prev == k { print; found = 1 } { prev = $0 } END { exit !found }'
}

# load_start NAME TENANT HOLD [ARGS...] : a membroker-load client holding
# HOLD bytes; returns once it holds them ("holding" on its stderr).  Its pid
# is in LOAD_PID[NAME], its output in $MB_TMP/NAME.out/.err.
# The client runs on one CPU: the pages stocked on a CPU are charged too
# (like the kernel's memcg_stock), so a client that migrates mid-way leaves
# up to a batch behind on the CPU it left, and the tenant's usage is then
# HOLD plus that batch.  One CPU makes the usage exactly HOLD (a multiple of
# the batch), which the tests compare.
declare -A LOAD_PID=()
load_start() {
        local name=$1 tenant=$2 hold=$3; shift 3
        taskset -c 0 "$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant "$tenant" --hold "$hold" "$@" \
                >"$MB_TMP/$name.out" 2>"$MB_TMP/$name.err" &
        LOAD_PID[$name]=$!
        MB_CHILDREN+=($!)
        wait_for 20 grep -q holding "$MB_TMP/$name.err" ||
                { cat "$MB_TMP/$name.err"; fail "membroker-load $name in $tenant did not get its pages"; }
}

# reclaim_call PATH BYTES : Manager.Reclaim; prints "t N" when all of it came
# back, "again N" when it failed with memory.reclaim's EAGAIN
# (org.membroker1.Error.Again) after N bytes
reclaim_call() {
        local out
        if out=$(mgr_call Reclaim st "$1" "$2" 2>&1); then
                echo "$out"
                return 0
        fi
        out=$(sed -n "s/.*Reclaimed \([0-9]*\) of $2 bytes from '.*': nothing more could be reclaimed.*/again \1/p" \
                <<<"$out")
        [ -n "$out" ] || fail "Reclaim($1, $2) failed: $out"
        echo "$out"
}

# load_stop NAME : SIGTERM, wait; the exit status goes to LOAD_RC (not a
# $(...): a subshell cannot wait for its parent's children)
LOAD_RC=
load_stop() {
        LOAD_RC=0
        kill -TERM "${LOAD_PID[$1]}" 2>/dev/null || true
        mb_wait "${LOAD_PID[$1]}" || LOAD_RC=$?
}

# monitor_start NAME MATCH : busctl monitor in the background (ended with
# the test: it exits when the private bus goes); output in $MB_TMP/NAME.mon
monitor_start() {
        timeout 600 "$BUSCTL" --address="$MB_BUS_ADDRESS" monitor --match "$2" >"$MB_TMP/$1.mon" 2>&1 &
        MB_CHILDREN+=($!)
        wait_for 10 grep -q "Monitoring bus message stream" "$MB_TMP/$1.mon" || fail "busctl monitor did not start"
}

# monitor_wait NAME PATTERN [SECONDS] : wait until the monitor saw PATTERN
monitor_wait() {
        wait_for "${3:-10}" grep -q -- "$2" "$MB_TMP/$1.mon"
}

# as_nobody CMD... : run CMD as uid/gid 65534 without groups
as_nobody() {
        setpriv --reuid=$NOBODY_UID --regid=$NOBODY_UID --clear-groups "$@"
}

need_root() {
        [ "$(id -u)" = 0 ] || skip "needs root (to compare uid 0 with an unprivileged caller)"
        command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
}

# expect_fail PATTERN CMD... : CMD must fail and print PATTERN (stdout+stderr)
expect_fail() {
        local pattern=$1 out rc=0; shift
        out=$("$@" 2>&1) || rc=$?
        [ $rc -ne 0 ] || fail "'$*' succeeded, expected a failure matching '$pattern' (output: $out)"
        printf '%s\n' "$out" | grep -q -- "$pattern" || fail "'$*' failed without '$pattern': $out"
        pass "refused: $* -> $pattern"
}

# error_name CMD... : run CMD (e.g. "${DSEND[@]}" ...), which must fail, and
# echo the D-Bus error name dbus-send printed ("Error NAME: message")
error_name() {
        local out
        out=$("$@" 2>&1) && { echo "(succeeded)"; return 0; }
        printf '%s\n' "$out" | sed -n 's/^Error \([^:]*\):.*/\1/p'
}

# mb_start_policy_bus : a real dbus-daemon with a system bus's default
# policy (the defaults of Debian's system.conf: method calls denied unless a
# policy file allows them) and the shipped systemd/org.membroker1.conf;
# sets MB_BUS_ADDRESS
mb_start_policy_bus() {
        command -v "$DBUS_DAEMON" >/dev/null || skip "dbus-daemon is not installed"
        cat >"$MB_TMP/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$MB_TMP/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Peer"/>
  </policy>
  <include ignore_missing="no">$top_srcdir/systemd/org.membroker1.conf</include>
</busconfig>
CONF
        "$DBUS_DAEMON" --config-file="$MB_TMP/bus.conf" --nofork --nopidfile --print-address=3 \
                3>"$MB_TMP/bus.address" 2>"$MB_TMP/bus.log" &
        MB_BUS_PID=$!
        wait_for 10 test -s "$MB_TMP/bus.address" || { cat "$MB_TMP/bus.log"; fail "dbus-daemon rejected the policy"; }
        MB_BUS_ADDRESS=$(head -1 "$MB_TMP/bus.address")
}
