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

# The reclaim tests (test-slab-reclaim-*.sh) drive "slab-client serve"
# through a FIFO with the pc/pc_field/pc_quit helpers of pressure-lib.sh
# (source lib.sh's siblings broker-lib.sh, bus-lib.sh and pressure-lib.sh
# after this file).
#
# sc_start NAME TENANT : a slab-client serve on TENANT, reading commands
# from $MB_TMP/NAME.in and answering in $MB_TMP/NAME.out
sc_start() {
        local name=$1 tenant=$2
        rm -f "$MB_TMP/$name.in"
        mkfifo "$MB_TMP/$name.in"
        "$SLAB_CLIENT" "$MB_SOCK" "$tenant" serve <>"$MB_TMP/$name.in" \
                >"$MB_TMP/$name.out" 2>"$MB_TMP/$name.err" &
        PC_PID[$name]=$!
        MB_CHILDREN+=($!)
        rm -f "$MB_TMP/$name.gone"
        wait_for 20 grep -q '^ready' "$MB_TMP/$name.out" ||
                { cat "$MB_TMP/$name.err"; fail "slab-client serve $name did not attach to $tenant"; }
        grep -qx "debug=${MEMBROKER_SLAB_DEBUG:-0}" "$MB_TMP/$name.out" ||
                fail "slab-client $name: caches did not run with debug=${MEMBROKER_SLAB_DEBUG:-0}"
}

# sc_report NAME : one "report" line into SC[KEY]=VALUE (one round trip, so
# that the figures belong together); fails unless verify=ok
declare -A SC=()
sc_report() {
        local line kv
        line=$(pc "$1" report)
        [ "${line%% *}" = report ] || fail "slab-client $1: report answered '$line'"
        SC=()
        for kv in ${line#report }; do SC[${kv%%=*}]=${kv#*=}; done
        [ "${SC[verify]}" = ok ] || fail "slab-client $1: live objects or pages corrupted ($line)"
}
