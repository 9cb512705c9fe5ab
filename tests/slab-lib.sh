# SPDX-License-Identifier: MIT
# tests/slab-lib.sh - sourced by the test-slab-*.sh integration tests: a
# real membrokerd with one tenant "app" and the slab-client program.
. "$top_srcdir/tests/lib.sh"

SLAB_CLIENT="$top_builddir/tests/slab-client"
[ -x "$SLAB_CLIENT" ] || fail "$SLAB_CLIENT was not built"

slab_start_daemon() {
        mb_write_broker_conf "Capacity=256M" "PageSize=4K" "ChargeBatch=16"
        mb_write_tenant app "Path=app" "MemoryMax=128M" "AllowUsers=$(id -un)"
        mb_start_daemon
}

# slab_client COMMAND [ARGS...] : run slab-client on the tenant; stdout in
# $MB_TMP/out, stderr in $MB_TMP/err; returns its exit status.
slab_client() {
        local rc=0
        "$SLAB_CLIENT" "$MB_SOCK" app "$@" >"$MB_TMP/out" 2>"$MB_TMP/err" || rc=$?
        cat "$MB_TMP/out"
        if [ $rc -ne 0 ]; then
                echo "--- slab-client $* exited $rc; stderr:"; cat "$MB_TMP/err"
        fi
        return $rc
}

# The debug flag the client saw must match what the test asked for.
slab_expect_debug() {
        grep -qx "debug=$1" "$MB_TMP/out" || fail "caches did not run with debug=$1"
}
