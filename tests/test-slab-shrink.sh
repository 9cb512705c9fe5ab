#!/bin/bash
# Empty slabs of a reclaimable cache go back: past the threshold on free, and
# all of them on mb_cache_shrink(); the client's pages in use go down.
. "$top_srcdir/tests/slab-lib.sh"
slab_start_daemon
slab_client shrink || fail "mb_cache_shrink did not give the pages back"
slab_expect_debug "${MEMBROKER_SLAB_DEBUG:-0}"
pass "empty slabs returned"
