#!/bin/bash
# Slab caches under concurrency: 4 threads, 2 million operations on 16 object
# sizes (8..2048), checksummed contents, no overlap between live objects,
# remote frees, exact slab stats, every page back at the end.
. "$top_srcdir/tests/slab-lib.sh"
slab_start_daemon
ops=${SLAB_STRESS_OPS:-500000}
slab_client stress 4 "$ops" || fail "slab stress failed"
slab_expect_debug "${MEMBROKER_SLAB_DEBUG:-0}"
pass "concurrent slab stress"
