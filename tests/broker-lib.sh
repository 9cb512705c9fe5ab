# SPDX-License-Identifier: MIT
# tests/broker-lib.sh - helpers for the broker's integration tests (sourced
# after tests/lib.sh): the raw-frame client and the daemon's state dump.

WIRE_CLIENT="$top_builddir/tests/wire-client"

# wire ARGS... : run the raw-frame client on the test socket
wire() { "$WIRE_CLIENT" --socket "$MB_SOCK" "$@"; }

# mb_dump_state : ask the daemon (SIGUSR1) for its state dump and put it
# into $MB_TMP/state.dump: the daemons of the test helpers write it to
# $MB_DUMP_FILE (membrokerd --dump-file), a file replaced whole at every dump
mb_dump_state() {
        # the daemon replaces the file by a rename: once it is there again,
        # it is this dump, whole
        rm -f "$MB_DUMP_FILE"
        kill -USR1 "$MB_DAEMON_PID"
        wait_for 20 test -e "$MB_DUMP_FILE" || fail "the daemon did not write its state dump to $MB_DUMP_FILE"
        cp "$MB_DUMP_FILE" "$MB_TMP/state.dump"
        tail -1 "$MB_TMP/state.dump" | grep -q '^state: dump [0-9]* end$' || fail "a state dump without its end line"
}

# mb_dump_field WHAT KEY : KEY's value on the dump's "state: WHAT ..." line
# (WHAT: connections, config, reclaim) in the last dump
mb_dump_field() {
        sed -n "s/^state: $1 \(.* \)\{0,1\}$2=\([^ ]*\).*/\2/p" "$MB_TMP/state.dump" | head -1
}

# mb_dumped_ge WHAT KEY N : a new dump says KEY of WHAT is at least N (for
# wait_for)
mb_dumped_ge() {
        mb_dump_state
        [ "$(mb_dump_field "$1" "$2")" -ge "$3" ]
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
