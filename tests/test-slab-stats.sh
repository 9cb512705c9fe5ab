#!/bin/bash
# slab_reclaimable / slab_unreclaimable in the client's stats region equal the
# bytes of live objects once the byte stocks are drained.
. "$top_srcdir/tests/slab-lib.sh"
slab_start_daemon
slab_client stats || fail "slab stats are not exact"
slab_expect_debug "${MEMBROKER_SLAB_DEBUG:-0}"
pass "slab stats exact after quiescence"
