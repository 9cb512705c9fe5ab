# SPDX-License-Identifier: MIT
# tests/client-env.sh - the broker the client tests attach to (sourced after
# lib.sh).  ChargeBatch=8 so that stocks fill and overflow quickly.
#   app     MemoryMax=64M (the capacity: never binding, but a limit, so that
#           its batch is ChargeBatch=8 and not the 4x of a tenant with
#           nothing limited, daemon/conn/conn.c UNLIMITED_CHARGE_BATCH_FACTOR)
#   small   MemoryMax=240K (60 pages: not a multiple of the batch)
#   mid     MemoryMax=400K (100 pages: room for charges ahead, then a limit)
#   grp     a parent of grp/leaf (clients attach to leaves only)
#   locked  AllowUsers=root

TEST_CLIENT="$top_builddir/tests/test-client"
CLIENT_TOOL="$top_builddir/tests/client-tool"

mb_client_setup() {
        mb_write_broker_conf "Capacity=64M" "ChargeBatch=8"
        mb_write_tenant app "Path=app" "MemoryMax=64M"
        mb_write_tenant small "Path=small" "MemoryMax=240K"
        mb_write_tenant mid "Path=mid" "MemoryMax=400K"
        mb_write_tenant grp "Path=grp"
        mb_write_tenant grp-leaf "Path=grp/leaf"
        mb_write_tenant locked "Path=locked" "AllowUsers=root"
        mb_start_daemon
        MEMBROKER_SOCKET="$MB_SOCK"
        export MEMBROKER_SOCKET
}

# mb_client_case CASE : run one case of tests/test-client.c
mb_client_case() {
        CK_RUN_CASE="$1" CK_DEFAULT_TIMEOUT=60 "$TEST_CLIENT"
}
