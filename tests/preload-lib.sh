# SPDX-License-Identifier: MIT
# tests/preload-lib.sh - the malloc shim's tests (sourced after lib.sh and
# broker-lib.sh): membroker-run from the build tree with the shim built
# next to it.

MEMBROKER_RUN="$top_builddir/tools/membroker-run"
export MEMBROKER_PRELOAD="$top_builddir/client/.libs/libmembroker-preload.so"

# Preloading a library built with a sanitizer into programs that are not
# does not work (the runtime must come first): such builds skip.
preload_check() {
        [ "${MB_SANITIZED:-no}" != yes ] ||
                skip "sanitizer build: libmembroker-preload.so cannot be preloaded into uninstrumented programs"
        [ -f "$MEMBROKER_PRELOAD" ] || fail "no $MEMBROKER_PRELOAD"
}

# need_program NAME : skip unless NAME is installed
need_program() {
        command -v "$1" >/dev/null || skip "$1 is not installed (scripts/install-deps)"
}

# mbrun TENANT PROGRAM ARGS... : PROGRAM under the shim on TENANT
mbrun() {
        local tenant=$1; shift
        "$MEMBROKER_RUN" --socket "$MB_SOCK" --tenant "$tenant" -- "$@"
}

# preload_broker : a daemon with tenants t (MemoryMax=256M) and small
# (MemoryMax=20M) under Capacity=512M
preload_broker() {
        mb_write_broker_conf "Capacity=512M"
        mb_write_tenant t "Path=t" "MemoryMax=256M"
        mb_write_tenant small "Path=small" "MemoryMax=20M"
        mb_write_tenant locked "Path=locked" "AllowUsers=root"
        mb_start_daemon
}

# usage_back_to_zero TENANT : the tenant's usage returns to 0 (all clients gone)
usage_back_to_zero() {
        wait_for 20 eval 'mb_dump_state; [ "$(mb_state '"$1"' usage)" = 0 ]' ||
                fail "usage of $1 is $(mb_state "$1" usage) pages after the program exited"
}
