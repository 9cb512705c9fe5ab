# SPDX-License-Identifier: MIT
# bench/lib.sh - helpers for the benchmark driver (sourced by mb-bench.sh).
#
# Like tests/lib.sh, every run gets its own temporary directory with config
# dirs, sockets and (when asked) a private dbus-daemon; everything it started
# is stopped and everything it created is removed on exit, including the
# kernel memory cgroups table 7 makes.

: "${top_builddir:?set top_builddir (make bench does)}"
: "${top_srcdir:?set top_srcdir (make bench does)}"

MEMBROKERD="$top_builddir/daemon/membrokerd"
MEMBROKERCTL="$top_builddir/tools/membrokerctl"
BENCH_BIN="${MB_BENCH_DIR:-$top_builddir/bench}"
export MB_BENCH_DIR="$BENCH_BIN"
BUSCTL="${BUSCTL:-busctl}"
DBUS_DAEMON="${DBUS_DAEMON:-dbus-daemon}"
[ -n "$BUSCTL" ] || BUSCTL=busctl
[ -n "$DBUS_DAEMON" ] || DBUS_DAEMON=dbus-daemon

MB_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mbbench.XXXXXX")
chmod 0755 "$MB_TMP"
MB_BUS_PID=
MB_BUS_ADDRESS=
MB_DAEMON_PID=
MB_CGROUP_DIRS=()  # kernel cgroups to remove (deepest last in the list)

mb_bench_cleanup() {
        local rc=$?
        set +e
        mb_stop_daemon
        if [ -n "$MB_BUS_PID" ]; then
                kill "$MB_BUS_PID" 2>/dev/null
                wait "$MB_BUS_PID" 2>/dev/null
        fi
        local i
        for ((i = ${#MB_CGROUP_DIRS[@]} - 1; i >= 0; i--)); do
                mb_cgroup_remove "${MB_CGROUP_DIRS[$i]}"
        done
        # table 13b reserved hugetlb pages: put the pool back
        [ -n "$MB_HUGETLB_ORIG" ] && echo "$MB_HUGETLB_ORIG" >"$MB_HUGETLB_POOL/nr_hugepages"
        rm -rf "$MB_TMP"
        exit $rc
}
MB_HUGETLB_POOL=/sys/kernel/mm/hugepages/hugepages-2048kB
MB_HUGETLB_ORIG=
trap mb_bench_cleanup EXIT
trap 'exit 130' INT TERM

# say TEXT: a line on stderr (progress; stdout carries the tables)
say() { echo "bench: $(date +%T) $*" >&2; }

# now_ms: monotonic-enough wall clock in ms for the driver's own timing
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# wait_for SECONDS COMMAND...: retry COMMAND every 20 ms
wait_for() {
        local deadline=$(( $(now_ms) + $1 * 1000 )); shift
        until "$@" >/dev/null 2>&1; do
                [ "$(now_ms)" -lt "$deadline" ] || return 1
                sleep 0.02
        done
}

# mb_config DIR CAPACITY [LINES...]: a fresh config dir with membroker.conf
mb_config() {
        local dir=$1 cap=$2; shift 2
        rm -rf "$dir"
        mkdir -p "$dir/tenants.d"
        { echo "[Broker]"; echo "Capacity=$cap"; printf '%s\n' "$@"; } >"$dir/membroker.conf"
}

# mb_tenant DIR NAME LINES...: tenants.d/NAME.conf
mb_tenant() {
        local dir=$1 name=$2; shift 2
        { echo "[Tenant]"; printf '%s\n' "$@"; } >"$dir/tenants.d/$name.conf"
}

mb_have_daemon() { [ -x "$MEMBROKERD" ]; }

# mb_start_bus: a private dbus-daemon; sets MB_BUS_ADDRESS
mb_start_bus() {
        [ -n "$MB_BUS_PID" ] && return 0
        command -v "$DBUS_DAEMON" >/dev/null || return 1
        cat >"$MB_TMP/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$MB_TMP/bus</listen>
  <auth>EXTERNAL</auth>
  <limit name="max_message_size">134217728</limit>
  <limit name="max_incoming_bytes">134217728</limit>
  <limit name="max_outgoing_bytes">134217728</limit>
  <limit name="max_completed_connections">100000</limit>
  <limit name="max_connections_per_user">100000</limit>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
CONF
        "$DBUS_DAEMON" --config-file="$MB_TMP/bus.conf" --nofork --nopidfile \
                --print-address=3 3>"$MB_TMP/bus.address" </dev/null >>"$MB_TMP/bus.log" 2>&1 &
        MB_BUS_PID=$!
        wait_for 10 test -s "$MB_TMP/bus.address" || return 1
        MB_BUS_ADDRESS=$(head -1 "$MB_TMP/bus.address")
}

# mb_start_daemon CONFDIR [bus]: membrokerd on CONFDIR, socket
# $MB_TMP/mb.sock; on the private bus with "bus", else --no-bus.  Sets
# MB_DAEMON_PID and MB_SOCK.
mb_start_daemon() {
        local conf=$1 busargs=(--no-bus)
        MB_SOCK="$MB_TMP/mb.sock"
        if [ "${2:-}" = bus ]; then
                mb_start_bus || return 1
                busargs=(--address "$MB_BUS_ADDRESS")
        fi
        rm -f "$MB_SOCK"
        mkdir -p "$MB_TMP/state"
        "$MEMBROKERD" --config-dir "$conf" --socket "$MB_SOCK" --state-dir "$MB_TMP/state" \
                "${busargs[@]}" >>"$MB_TMP/daemon.log" 2>&1 &
        MB_DAEMON_PID=$!
        export MB_BENCH_DAEMON_PID=$MB_DAEMON_PID  # bench-broker reads its CPU clock
        if ! wait_for 60 test -S "$MB_SOCK"; then
                say "membrokerd did not start:"; tail -20 "$MB_TMP/daemon.log" >&2
                mb_stop_daemon; return 1
        fi
        if [ "${2:-}" = bus ] &&
                ! wait_for 60 "$BUSCTL" --address="$MB_BUS_ADDRESS" status org.membroker1; then
                say "membrokerd did not take org.membroker1:"; tail -20 "$MB_TMP/daemon.log" >&2
                mb_stop_daemon; return 1
        fi
}

mb_stop_daemon() {
        [ -n "$MB_DAEMON_PID" ] || return 0
        kill -TERM "$MB_DAEMON_PID" 2>/dev/null
        local i
        for i in $(seq 100); do
                kill -0 "$MB_DAEMON_PID" 2>/dev/null || break
                sleep 0.05
        done
        kill -KILL "$MB_DAEMON_PID" 2>/dev/null
        wait "$MB_DAEMON_PID" 2>/dev/null
        MB_DAEMON_PID=
}

# ---- kernel memory cgroups (table 2's kernel row, table 7) ----

# mb_cgroup_dir FSTYPE OPTION REL: the directory of cgroup REL (a path from
# /proc/self/cgroup) in the mounted hierarchy of FSTYPE (with OPTION among
# its super options), also when the mount's root is not "/".
mb_cgroup_dir() {
        awk -v fs="$1" -v opt="$2" -v rel="$3" '{
                split($0, halves, " - "); split(halves[2], t, " ")
                if (t[1] != fs) next
                if (opt != "" && ("," t[3] ",") !~ ("," opt ",")) next
                root = $4; mnt = $5
                if (root == "/") { print mnt rel; exit }
                if (index(rel "/", root "/") == 1) { print mnt substr(rel, length(root) + 1); exit }
        }' /proc/self/mountinfo
}

# mb_memcg_base: print the directory of this process's memory cgroup, v2
# (unified, memory controller enabled for children) or v1; nothing and
# status 1 when neither is usable.
mb_memcg_base() {
        local line rel
        # cgroup v1 memory controller
        rel=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}memory\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' /proc/self/cgroup | head -1)
        if [ -n "$rel" ]; then
                line=$(mb_cgroup_dir cgroup memory "$rel")
                if [ -n "$line" ] && [ -d "$line" ]; then
                        echo "${line%/}"; return 0
                fi
        fi
        # cgroup v2
        rel=$(sed -n 's/^0::\(.*\)$/\1/p' /proc/self/cgroup | head -1)
        if [ -n "$rel" ]; then
                line=$(mb_cgroup_dir cgroup2 "" "$rel")
                line=${line%/}
                # children get the memory controller only when it is in our
                # subtree_control; enabling it fails while processes live in
                # a non-root cgroup (no internal processes): then give up
                grep -qw memory "$line/cgroup.controllers" 2>/dev/null || return 1
                grep -qw memory "$line/cgroup.subtree_control" 2>/dev/null ||
                        echo +memory >"$line/cgroup.subtree_control" 2>/dev/null || return 1
                echo "$line"; return 0
        fi
        return 1
}

# mb_memcg_version DIR: v1 or v2
mb_memcg_version() {
        if [ -e "$1/cgroup.controllers" ]; then echo v2; else echo v1; fi
}

# mb_cgroup_make DIR: mkdir and remember for removal
mb_cgroup_make() {
        mkdir "$1" 2>/dev/null || return 1
        MB_CGROUP_DIRS+=("$1")
}

# mb_cgroup_remove DIR: move any process back to the parent, then rmdir
mb_cgroup_remove() {
        local d=$1 p sub
        [ -d "$d" ] || return 0
        for sub in "$d"/*/; do
                [ -d "$sub" ] && [ -f "$sub/cgroup.procs" ] && mb_cgroup_remove "${sub%/}"
        done
        if [ -f "$d/cgroup.procs" ]; then
                while read -r p; do
                        echo "$p" >"$(dirname "$d")/cgroup.procs" 2>/dev/null
                done <"$d/cgroup.procs"
        fi
        rmdir "$d" 2>/dev/null
}

# mb_machine: the machine the figures come from
mb_machine() {
        local cpu
        cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
        [ -n "$cpu" ] || cpu=$(uname -m)
        echo "- CPU: $cpu"
        echo "- cores: $(nproc) online ($(getconf _NPROCESSORS_CONF) possible)"
        echo "- memory: $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
        echo "- kernel: $(uname -r)"
        echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}
