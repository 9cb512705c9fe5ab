# SPDX-License-Identifier: MIT
# tests/lib.sh - shared helpers for the integration tests (sourced).
#
# Every test gets its own temporary directory ($MB_TMP) with a config dir,
# a broker socket and (with mb_start_bus) a private dbus-daemon, all torn
# down on exit.  Real processes only: membrokerd, dbus-daemon, busctl and
# the client programs the build produced.

set -eu

: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"

MEMBROKERD="$top_builddir/daemon/membrokerd"
MEMBROKER_LOAD="$top_builddir/tools/membroker-load"
MEMBROKERCTL="$top_builddir/tools/membrokerctl"
BUSCTL="${BUSCTL:-busctl}"
DBUS_DAEMON="${DBUS_DAEMON:-dbus-daemon}"

MB_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mbtest.XXXXXX")
chmod 0755 "$MB_TMP"
MB_ETC="$MB_TMP/etc"
MB_SOCK="$MB_TMP/membroker.sock"
MB_STATE="$MB_TMP/state"
MB_DUMP_FILE="$MB_TMP/membrokerd.dump"   # membrokerd --dump-file: the state dump of SIGUSR1
MB_BUS_ADDRESS=
MB_BUS_PID=
MB_DAEMON_PID=
MB_CHILDREN=()
mkdir -p "$MB_ETC/tenants.d" "$MB_STATE"

mb_cleanup() {
        local rc=$?
        set +e
        for p in "${MB_CHILDREN[@]}"; do kill -9 "$p" 2>/dev/null; done
        [ -n "$MB_DAEMON_PID" ] && kill -TERM "$MB_DAEMON_PID" 2>/dev/null && mb_wait "$MB_DAEMON_PID" 60
        [ -n "$MB_BUS_PID" ] && kill "$MB_BUS_PID" 2>/dev/null && mb_wait "$MB_BUS_PID" 60
        if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ -f "$MB_TMP/daemon.log" ]; then
                echo "--- membrokerd log (last 40 lines) ---"; tail -40 "$MB_TMP/daemon.log"
        fi
        rm -rf "$MB_TMP"
        exit $rc
}
trap mb_cleanup EXIT

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# assert_eq EXPECTED ACTUAL WHAT
assert_eq() { [ "$1" = "$2" ] || fail "$3: expected '$1', got '$2'"; pass "$3 = $1"; }

# mb_show_stuck PID WHAT : what a process that does not move is doing: its
# state and wait channel, and its threads' stacks where gdb is installed
mb_show_stuck() {
        echo "--- $2: pid $1 ---"
        ps -o pid,stat,wchan:28,args -p "$1" 2>&1 | cat
        command -v gdb >/dev/null || return 0
        timeout -s KILL 60 gdb -batch -nx -p "$1" -ex 'thread apply all bt 30' 2>&1 |
                grep -E '^(Thread |#[0-9])' | head -150
}

# mb_running PID : the process runs: neither gone nor exited and waiting to
# be reaped (a zombie, which kill -0 does not tell)
mb_running() {
        local state
        state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
        [ -n "$state" ] && [ "$state" != Z ]
}

# mb_wait PID [SECONDS] : wait for the child PID to exit, at most SECONDS
# (default 120); returns its exit status.  One that outlives the bound is
# shown (mb_show_stuck), killed, and the status is 124.
mb_wait() {
        local pid=$1 limit=${2:-120} deadline rc=0
        deadline=$(( $(date +%s) + limit ))
        while mb_running "$pid"; do
                if [ "$(date +%s)" -ge "$deadline" ]; then
                        mb_show_stuck "$pid" "did not exit within $limit s" >&2
                        kill -KILL "$pid" 2>/dev/null
                        wait "$pid" 2>/dev/null
                        return 124
                fi
                sleep 0.02
        done
        wait "$pid" || rc=$?
        return $rc
}

# wait_for SECONDS COMMAND... : retry COMMAND every 50 ms.  A condition on a
# command's output must be re-evaluated each time: wait_for N eval '[ "$(cmd)" = x ]'
wait_for() {
        local deadline=$(( $(date +%s%N) / 1000000 + $1 * 1000 )); shift
        until "$@" >/dev/null 2>&1; do
                [ $(( $(date +%s%N) / 1000000 )) -lt $deadline ] || return 1
                sleep 0.05
        done
}

# mb_write_broker_conf LINES... : membroker.conf with a [Broker] section
mb_write_broker_conf() {
        { echo "[Broker]"; echo "Socket=$MB_SOCK"; printf '%s\n' "$@"; } >"$MB_ETC/membroker.conf"
}

# mb_write_tenant NAME LINES... : tenants.d/NAME.conf with a [Tenant] section
mb_write_tenant() {
        local name=$1; shift
        { echo "[Tenant]"; printf '%s\n' "$@"; } >"$MB_ETC/tenants.d/$name.conf"
}

# mb_start_bus : a private dbus-daemon; sets MB_BUS_ADDRESS
mb_start_bus() {
        command -v "$DBUS_DAEMON" >/dev/null || skip "dbus-daemon is not installed"
        cat >"$MB_TMP/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$MB_TMP/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
CONF
        "$DBUS_DAEMON" --config-file="$MB_TMP/bus.conf" --nofork --nopidfile \
                --print-address=3 3>"$MB_TMP/bus.address" &
        MB_BUS_PID=$!
        wait_for 10 test -s "$MB_TMP/bus.address" || fail "dbus-daemon did not start"
        MB_BUS_ADDRESS=$(head -1 "$MB_TMP/bus.address")
        export DBUS_SESSION_BUS_ADDRESS="$MB_BUS_ADDRESS"
}

# mb_start_daemon [EXTRA-ARGS...] : start membrokerd on $MB_ETC/$MB_SOCK,
# on the private bus when one was started (else --no-bus); waits until the
# socket (and the bus name) is there.
mb_start_daemon() {
        local busargs=(--no-bus)
        [ -n "$MB_BUS_ADDRESS" ] && busargs=(--address "$MB_BUS_ADDRESS")
        rm -f "$MB_SOCK"
        "$MEMBROKERD" --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" \
                --dump-file "$MB_DUMP_FILE" "${busargs[@]}" "$@" >>"$MB_TMP/daemon.log" 2>&1 &
        MB_DAEMON_PID=$!
        wait_for 20 test -S "$MB_SOCK" || { cat "$MB_TMP/daemon.log"; fail "membrokerd did not create its socket"; }
        if [ -n "$MB_BUS_ADDRESS" ]; then
                wait_for 20 "$BUSCTL" --address="$MB_BUS_ADDRESS" status org.membroker1 ||
                        { cat "$MB_TMP/daemon.log"; fail "membrokerd did not take org.membroker1"; }
        fi
}

mb_stop_daemon() {
        [ -n "$MB_DAEMON_PID" ] || return 0
        kill -TERM "$MB_DAEMON_PID" 2>/dev/null || true
        mb_wait "$MB_DAEMON_PID" || true
        MB_DAEMON_PID=
}

# mb_busctl ARGS... : busctl on the private bus
mb_busctl() { "$BUSCTL" --address="$MB_BUS_ADDRESS" "$@"; }

# mb_ctl ARGS... : membrokerctl on the private bus
mb_ctl() { "$MEMBROKERCTL" --address="$MB_BUS_ADDRESS" "$@"; }
