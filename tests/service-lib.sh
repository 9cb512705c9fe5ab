# SPDX-License-Identifier: MIT
# tests/service-lib.sh - helpers of the service tests (sourced after lib.sh):
# membrokerd under tests/fake-systemd, which plays systemd's part (notify
# socket, fd store, $LISTEN_FDS, watchdog).

FAKE_SYSTEMD="$top_builddir/tests/fake-systemd"
MB_SD_LOG="$MB_TMP/systemd.log"
MB_SD_PIDFILE="$MB_TMP/main.pid"
: >"$MB_SD_LOG"

# On failure, what the harness saw too (without the watchdog pings).
fail() {
        echo "FAIL: $*" >&2
        if [ -s "$MB_SD_LOG" ]; then
                echo "--- fake-systemd log (last 30 lines, without WATCHDOG=1) ---"
                grep -v '^notify pid=[0-9]* fds=0 WATCHDOG=1$' "$MB_SD_LOG" | tail -30
        fi
        exit 1
}

# mb_sd_start [FAKE-SYSTEMD-OPTIONS...] [-- DAEMON-ARGS...] : membrokerd under
# fake-systemd (on the private bus when one was started, else --no-bus);
# waits for READY=1.  The harness pid is $MB_DAEMON_PID, so that lib.sh's
# clean-up stops it (and it stops the daemon).
mb_sd_start() {
        local sdargs=() dargs=() busargs=(--no-bus)
        while [ $# -gt 0 ] && [ "$1" != "--" ]; do sdargs+=("$1"); shift; done
        [ $# -gt 0 ] && shift
        dargs=("$@")
        [ -n "$MB_BUS_ADDRESS" ] && busargs=(--address "$MB_BUS_ADDRESS")
        rm -f "$MB_SOCK"
        "$FAKE_SYSTEMD" --dir "$MB_TMP" --log "$MB_SD_LOG" --pidfile "$MB_SD_PIDFILE" "${sdargs[@]}" -- \
                "$MEMBROKERD" --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" \
                        --dump-file "$MB_DUMP_FILE" \
                "${busargs[@]}" "${dargs[@]}" >>"$MB_TMP/daemon.log" 2>&1 &
        MB_DAEMON_PID=$!
        mb_sd_wait_ready 1
}

# mb_sd_count PATTERN : how many lines of the harness log match PATTERN
mb_sd_count() { grep -c -- "$1" "$MB_SD_LOG" || true; }

# mb_sd_at_least N PATTERN : at least N lines of the harness log match
mb_sd_at_least() { [ "$(mb_sd_count "$2")" -ge "$1" ]; }

# mb_sd_wait_ready N : wait until READY=1 arrived N times in all
mb_sd_wait_ready() {
        wait_for 30 mb_sd_at_least "$1" 'notify .*READY=1' ||
                { cat "$MB_SD_LOG"; tail -30 "$MB_TMP/daemon.log"; fail "membrokerd did not say READY=1 (#$1)"; }
}

# mb_sd_start_ready N : true once the Nth start of the daemon has said
# READY=1 (a READY=1 logged after the line "start n=N"; not the READY=1
# that ends a reload of an earlier start, which mb_sd_wait_ready counts too)
mb_sd_start_ready() {
        awk -v n="$1" '$1 == "start" && $2 == "n=" n { on = 1; next }
                on && /^notify .*READY=1/ { found = 1 } END { exit !found }' "$MB_SD_LOG"
}

# mb_sd_wait_started N : wait until the Nth start of the daemon is ready
# (after a restart: clients may connect from then on)
mb_sd_wait_started() {
        wait_for 30 mb_sd_start_ready "$1" ||
                { cat "$MB_SD_LOG"; tail -30 "$MB_TMP/daemon.log"; fail "membrokerd start #$1 did not say READY=1"; }
}

# mb_sd_main_pid : the pid of the running membrokerd
mb_sd_main_pid() { cat "$MB_SD_PIDFILE"; }

# mb_sd_stop : stop the service (SIGTERM to the harness) and wait
mb_sd_stop() {
        [ -n "$MB_DAEMON_PID" ] || return 0
        kill -TERM "$MB_DAEMON_PID" 2>/dev/null || true
        mb_wait "$MB_DAEMON_PID" || true
        MB_DAEMON_PID=
}

# mb_load_bg NAME ARGS... : membroker-load in the background, output in
# $MB_TMP/NAME.out, pid in $MB_BG_PID (killed at the end of the test)
mb_load_bg() {
        local name=$1; shift
        "$MEMBROKER_LOAD" --socket "$MB_SOCK" "$@" >"$MB_TMP/$name.out" 2>&1 &
        MB_BG_PID=$!
        MB_CHILDREN+=("$MB_BG_PID")
}

# mb_wait_holding NAME : wait until membroker-load NAME said it holds its pages
mb_wait_holding() {
        wait_for 30 grep -q "holding [0-9]* pages" "$MB_TMP/$1.out" ||
                { cat "$MB_TMP/$1.out"; fail "client $1 did not fill its pages"; }
}

# mb_finish_load NAME PID : SIGTERM a membroker-load, wait, and check it
# verified every byte and succeeded
mb_finish_load() {
        local rc=0
        kill -TERM "$2" 2>/dev/null || true
        mb_wait "$2" || rc=$?
        grep -q 'verify=ok' "$MB_TMP/$1.out" || { cat "$MB_TMP/$1.out"; fail "client $1 did not verify its pages"; }
        [ $rc -eq 0 ] || { cat "$MB_TMP/$1.out"; fail "client $1 exited with $rc"; }
        pass "client $1: $(grep verify= "$MB_TMP/$1.out" | tail -1)"
}

# mb_tenant_prop TENANT PROPERTY : a property of TENANT's object, over the
# bus, without its type letter
mb_tenant_prop() {
        local obj
        obj=$(mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager GetTenant s "$1" |
              sed -e 's/^o "//' -e 's/"$//')
        mb_busctl get-property org.membroker1 "$obj" org.membroker1.Tenant "$2" | sed 's/^[a-z] //'
}

# mb_usage TENANT : MemoryCurrent of TENANT in bytes
mb_usage() { mb_tenant_prop "$1" MemoryCurrent; }

# mb_nclients TENANT : NClients of TENANT
mb_nclients() { mb_tenant_prop "$1" NClients; }

# mb_has_clients TENANT : true when TENANT has a client
mb_has_clients() { [ "$(mb_nclients "$1")" -ge 1 ]; }

# mb_usage_is TENANT BYTES : true when TENANT's usage is BYTES
mb_usage_is() { [ "$(mb_usage "$1")" = "$2" ]; }

# mb_churn_report PID NAME : SIGUSR1 a membroker-load, wait for the report
# it prints, and put its allocs= figure in MB_ALLOCS
mb_churn_report() {
        # (locals, not $2: the eval runs inside wait_for, with its arguments)
        local out="$MB_TMP/$2.out" n
        n=$(grep -c 'allocs=' "$out" || true)
        kill -USR1 "$1"
        wait_for 20 eval '[ "$(grep -c allocs= "$out")" -gt "$n" ]' ||
                { cat "$out"; fail "client $2 did not report"; }
        MB_ALLOCS=$(grep -o 'allocs=[0-9]*' "$out" | tail -1 | cut -d= -f2)
}

# mb_restart_scenario SIGNAL : clients of three tenants hold and write
# pages; membrokerd is killed with SIGNAL and restarted by the harness with
# its fd store; the clients reconnect by themselves; usage is exactly what it
# was; new allocations work; every byte reads back (verify=ok).
mb_restart_scenario() {
        local sig=$1 tenants=(a b/x c) before=() after i pid
        command -v "$BUSCTL" >/dev/null || skip "busctl is not installed"

        mb_write_broker_conf "Capacity=256M" "ChargeBatch=32"
        mb_write_tenant a "Path=a" "MemoryMax=64M" "MemoryHigh=48M"
        mb_write_tenant b "Path=b/x" "MemoryMax=32M" "MemoryLow=4M"
        mb_write_tenant c "Path=c" "MemoryMax=32M"
        mb_start_bus
        mb_sd_start --restart 1 -- --address "$MB_BUS_ADDRESS"
        # A tenant made at run time, with a runtime limit: both come back.
        mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager CreateTenant "sa{sv}" \
                rt 1 MemoryMax t $((8 << 20)) >/dev/null

        mb_load_bg hold-a --tenant a --hold 8M --threads 2
        local la=$MB_BG_PID
        mb_load_bg hold-b --tenant b/x --hold 3M
        local lb=$MB_BG_PID
        mb_load_bg hold-rt --tenant rt --hold 1M
        local lr=$MB_BG_PID
        # This one keeps freeing and allocating through the restart.
        mb_load_bg churn-c --tenant c --hold 2M --churn 500
        local lc=$MB_BG_PID
        for n in hold-a hold-b hold-rt churn-c; do mb_wait_holding $n; done

        for t in a b/x b rt /; do before+=("$(mb_usage "$t")"); done
        [ "${before[0]}" -ge $((8 << 20)) ] || fail "usage of a before the restart: ${before[0]}"

        pid=$(mb_sd_main_pid)
        kill "-$sig" "$pid"
        mb_sd_wait_ready 2
        [ "$(mb_sd_main_pid)" != "$pid" ] || fail "the harness did not restart membrokerd"
        grep -q "^start n=2 .*listen_fds=[1-9]" "$MB_SD_LOG" || fail "the fd store was empty at the restart"
        pass "membrokerd restarted after SIG$sig with its fd store: $(grep '^start n=2' "$MB_SD_LOG")"

        for t in a b/x rt c; do
                wait_for 30 mb_has_clients "$t" ||
                        { tail -20 "$MB_TMP/daemon.log"; fail "the client of $t did not reconnect"; }
        done
        pass "every client reconnected by itself"
        # Usage is exactly what it was (the churning tenant c is not compared:
        # it keeps changing).
        i=0
        for t in a b/x b rt; do
                assert_eq "${before[$i]}" "$(mb_usage "$t")" "usage of $t after the restart"
                i=$((i + 1))
        done
        assert_eq $((8 << 20)) "$(mb_tenant_prop rt MemoryMax)" "runtime MemoryMax of the run-time tenant"

        # New allocations work, in a new client and in the churning one.
        "$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant a --hold 2M --seconds 0 >"$MB_TMP/new.out" 2>&1 ||
                { cat "$MB_TMP/new.out"; fail "a new client cannot allocate after the restart"; }
        pass "a new client allocates after the restart: $(grep verify= "$MB_TMP/new.out")"
        # A restored tmpfs arena keeps its bound: it can still be resized.
        local dpid=$MB_DAEMON_PID
        MB_DAEMON_PID=$(mb_sd_main_pid)
        mb_dump_state
        MB_DAEMON_PID=$dpid
        case $(mb_dump_field config backing) in
        tmpfs*) assert_eq yes "$(mb_state a resizable)" "a restored tmpfs arena can be resized" ;;
        esac
        local allocs1 allocs2
        mb_churn_report "$lc" churn-c; allocs1=$MB_ALLOCS
        sleep 1
        mb_churn_report "$lc" churn-c; allocs2=$MB_ALLOCS
        [ "$allocs2" -gt "$allocs1" ] || fail "the churning client does not allocate after the restart"
        pass "the churning client keeps allocating ($allocs1 -> $allocs2)"

        # Every byte written before the restart reads back.
        mb_finish_load hold-a "$la"
        mb_finish_load hold-b "$lb"
        mb_finish_load hold-rt "$lr"
        mb_finish_load churn-c "$lc"
        wait_for 20 mb_usage_is / 0 || fail "pages left after every client went: $(mb_usage /)"
        pass "everything returned at the end"
}
