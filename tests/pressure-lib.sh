# SPDX-License-Identifier: MIT
# tests/pressure-lib.sh - helpers of the memory pressure tests (sourced after
# lib.sh, broker-lib.sh and bus-lib.sh).
#
# Real processes only: membrokerd (with a private bus where a test needs the
# D-Bus API), membroker-load clients with shrinker-backed caches, and
# tests/pressure-client, a client driven line by line through a FIFO.

PRESSURE_CLIENT="$top_builddir/tests/pressure-client"
PAGE=4096

# pr_setup [BROKER-CONF-LINES...] : membroker.conf for the pressure tests
# (small batches so that stocks stay small next to the limits).
pr_setup() {
        mb_write_broker_conf "Capacity=256M" "ChargeBatch=16" "StatsFlushIntervalSec=1" "$@"
}

# pc_start NAME TENANT [ARGS...] : a pressure-client reading commands from
# the FIFO $MB_TMP/NAME.in and answering in $MB_TMP/NAME.out
declare -A PC_PID=()
pc_start() {
        local name=$1 tenant=$2; shift 2
        rm -f "$MB_TMP/$name.in"
        mkfifo "$MB_TMP/$name.in"
        "$PRESSURE_CLIENT" --socket "$MB_SOCK" --tenant "$tenant" "$@" <>"$MB_TMP/$name.in" \
                >"$MB_TMP/$name.out" 2>"$MB_TMP/$name.err" &
        PC_PID[$name]=$!
        MB_CHILDREN+=($!)
        rm -f "$MB_TMP/$name.gone"
        wait_for 20 grep -q '^ready' "$MB_TMP/$name.out" ||
                { cat "$MB_TMP/$name.err"; fail "pressure-client $name did not attach to $tenant"; }
}

# _pc_lines_above FILE N : FILE has more than N lines
_pc_lines_above() { [ "$(wc -l <"$1")" -gt "$2" ]; }

# _pc_answered_or_gone FILE N PID : FILE has more than N lines, or PID ended
_pc_answered_or_gone() { _pc_lines_above "$1" "$2" || ! mb_running "$3"; }

# _pc_gone NAME COMMAND : the client ended before it answered: say so, with
# its exit status where this shell can still learn it (not in a subshell,
# nor once waited for), and what it printed on stderr
_pc_gone() {
        local how=exited rc=0
        if [ "$BASHPID" = "$$" ]; then
                wait "${PC_PID[$1]}" 2>/dev/null || rc=$?
                [ $rc = 127 ] || how="exited with status $rc"
        fi
        # Said once: a wait_for that polls pc would repeat it every 50 ms.
        [ ! -e "$MB_TMP/$1.gone" ] || exit 1
        echo "${PC_PID[$1]}" >"$MB_TMP/$1.gone"
        cat "$MB_TMP/$1.err" >&2
        fail "pressure-client $1 (pid ${PC_PID[$1]}) $how before it answered '$2'"
}

# pc NAME COMMAND... : send one command, print its answer line.  The FIFO
# is opened read-write: a write-only open would wait in open(2) for a
# reader, forever once the client died.
pc() {
        local name=$1 before; shift
        before=$(wc -l <"$MB_TMP/$name.out")
        mb_running "${PC_PID[$name]}" || _pc_gone "$name" "$*"
        echo "$*" 1<>"$MB_TMP/$name.in"
        wait_for 60 _pc_answered_or_gone "$MB_TMP/$name.out" "$before" "${PC_PID[$name]}" ||
                { cat "$MB_TMP/$name.err" >&2; fail "pressure-client $name did not answer '$*'"; }
        _pc_lines_above "$MB_TMP/$name.out" "$before" || _pc_gone "$name" "$*"
        sed -n "$((before + 1))p" "$MB_TMP/$name.out"
}

# pc_expect NAME PREFIX WHAT COMMAND... : send COMMAND to NAME; its answer
# must begin with PREFIX, else the test fails saying WHAT.  The answer is
# left in PC_OUT (a function, not a command substitution, so that the
# failure ends the test).
pc_expect() {
        local name=$1 prefix=$2 what=$3; shift 3
        PC_OUT=$(pc "$name" "$@")
        [[ "$PC_OUT" == "$prefix"* ]] || fail "$what: $PC_OUT"
}

# pc_field NAME FIELD : one field of a fresh "report"
pc_field() {
        pc "$1" report | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# pc_quit NAME : verify and close; fails unless verify=ok
pc_quit() {
        local out rc=0
        out=$(pc "$1" quit)
        mb_wait "${PC_PID[$1]}" || rc=$?
        [ "$out" = "bye verify=ok" ] && [ $rc -eq 0 ] || fail "pressure-client $1: $out (exit $rc)"
}

# usage_pages TENANT : MemoryCurrent in pages, from the state dump
usage_pages() {
        mb_dump_state
        mb_state "$1" usage
}

# leak_check WHAT : nothing leaks: Σ leaves' usage = root usage = pages the
# daemon records as held by clients = pages + stock the clients count.
leak_check() {
        local what=$1 sums tries=0
        # The clients' stat slots reach the daemon lazily (rstat): wait up
        # to 10 s for their pages + stock to settle on the exact usage.
        while :; do
                mb_dump_state
                sums=$(awk '/^state: tenant=/ {
                                delete f
                                for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                                if (f["tenant"] == "/") { root = f["usage"]; pages = f["pages"]; stock = f["stock"] }
                                else if (f["children"] == 0) { leaves += f["usage"]; held += f["arena_used"] }
                        }
                        END { printf "%d %d %d %d %d", root, leaves, held, pages, stock }' "$MB_TMP/state.dump")
                set -- $sums
                [ $(($4 + $5)) = "$1" ] || [ $tries -ge 50 ] || { tries=$((tries + 1)); sleep 0.2; continue; }
                break
        done
        [ "$2" = "$1" ] || fail "$what: leaves use $2 pages, the root $1"
        [ "$3" = "$1" ] || fail "$what: clients hold $3 pages in the arenas, the root uses $1"
        [ $(($4 + $5)) = "$1" ] || fail "$what: clients count $4 + $5 pages, the root uses $1 (after 10 s)"
        pass "$what: no leak (root usage $1 pages = leaves = arenas = clients' pages + stock)"
}

# settle : let the clients' stats reach the daemon
settle() { sleep "${1:-0.3}"; }
