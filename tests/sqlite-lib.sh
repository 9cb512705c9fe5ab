# SPDX-License-Identifier: MIT
# tests/sqlite-lib.sh - helpers of the libmembroker-sqlite tests (sourced
# after lib.sh and broker-lib.sh): tests/sqlite-client, a real SQLite
# application on the broker page cache, driven through a FIFO with the
# pressure tests' helpers (pc, pc_field, pc_quit, leak_check).
. "$top_srcdir/tests/pressure-lib.sh"

SQLITE_CLIENT="$top_builddir/tests/sqlite-client"

# sq_start NAME TENANT [ARGS...] : a sqlite-client keeping its databases in
# $MB_TMP/NAME.d
sq_start() {
        local name=$1 tenant=$2; shift 2
        mkdir -p "$MB_TMP/$name.d"
        PRESSURE_CLIENT=$SQLITE_CLIENT pc_start "$name" "$tenant" --dir "$MB_TMP/$name.d" "$@"
}

# sq_expect NAME EXPECTED COMMAND... : send COMMAND, its answer must start with EXPECTED
sq_expect() {
        local name=$1 want=$2 out; shift 2
        out=$(pc "$name" "$@")
        case "$out" in "$want"*) pass "$name: $* -> $out" ;; *) fail "$name: $*: got '$out', expected '$want...'" ;; esac
}

# sq_integrity NAME DB : PRAGMA integrity_check of a database file by the
# sqlite3 shell (another process, SQLite's own page cache)
sq_integrity() {
        command -v sqlite3 >/dev/null || { echo "(sqlite3 shell not installed: integrity_check left out)"; return 0; }
        assert_eq ok "$(sqlite3 "$MB_TMP/$1.d/$2.db" 'PRAGMA integrity_check')" "integrity_check of $1/$2.db"
}
