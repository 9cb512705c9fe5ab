# SPDX-License-Identifier: MIT
# tests/broker-lib.sh - helpers for the broker's integration tests (sourced
# after tests/lib.sh): the raw-frame client and the daemon's state dump.

WIRE_CLIENT="$top_builddir/tests/wire-client"

# wire ARGS... : run the raw-frame client on the test socket
wire() { "$WIRE_CLIENT" --socket "$MB_SOCK" "$@"; }

# mb_dump_state : ask the daemon (SIGUSR1) to log its tenant tree and put
# the lines of that dump into $MB_TMP/state
mb_dump_state() {
        local before
        before=$(grep -c '^state: dump [0-9]* end' "$MB_TMP/daemon.log" || true)
        kill -USR1 "$MB_DAEMON_PID"
        # eval: the count is taken again on every try
        wait_for 20 eval '[ "$(grep -c "^state: dump [0-9]* end" "$MB_TMP/daemon.log")" -gt "$before" ]' ||
                fail "the daemon did not log its state"
        awk '/^state: dump [0-9]* begin/ { n++; buf = "" } n > 0 { buf = buf $0 "\n" }
             /^state: dump [0-9]* end/ { last = buf } END { printf "%s", last }' \
                "$MB_TMP/daemon.log" >"$MB_TMP/state.dump"
}

# mb_state TENANT FIELD : a field ("usage", "max", "events", ...) of TENANT in
# the last dump
mb_state() {
        local line
        line=$(grep "^state: tenant=$1 " "$MB_TMP/state.dump") || fail "no tenant $1 in the state dump"
        printf '%s\n' "$line" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# mb_event TENANT EVENT : hierarchical count of EVENT (max, oom, ...) of TENANT
mb_event() {
        mb_state "$1" events | tr ',' '\n' | sed -n "s/^$2://p"
}

# mb_event_local TENANT EVENT
mb_event_local() {
        mb_state "$1" events_local | tr ',' '\n' | sed -n "s/^$2://p"
}

# mb_daemon_alive : fail unless membrokerd still runs
mb_daemon_alive() {
        kill -0 "$MB_DAEMON_PID" 2>/dev/null || fail "membrokerd died"
}

# wire_bg OUTFILE ARGS... : the raw-frame client in the background; its pid
# (the client itself, so that signals reach it) in $MB_BG_PID
wire_bg() {
        local out=$1; shift
        "$WIRE_CLIENT" --socket "$MB_SOCK" "$@" >"$out" 2>&1 &
        MB_BG_PID=$!
        MB_CHILDREN+=("$MB_BG_PID")
}

# mb_stop_clean : SIGTERM the daemon and require exit status 0 (under the
# sanitizer build this also means LeakSanitizer found nothing)
mb_stop_clean() {
        local rc=0
        kill -TERM "$MB_DAEMON_PID"
        mb_wait "$MB_DAEMON_PID" || rc=$?
        MB_DAEMON_PID=
        [ $rc = 0 ] || { tail -40 "$MB_TMP/daemon.log"; fail "membrokerd exited with $rc"; }
        pass "membrokerd stopped cleanly"
}
