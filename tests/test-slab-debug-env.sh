#!/bin/bash
# The slab suite again with MEMBROKER_SLAB_DEBUG=1: every cache in debug mode
# (red zones, poisoning, checks on every alloc and free) must pass the same
# concurrency, stats and shrink tests, with no false report.
export MEMBROKER_SLAB_DEBUG=1
export SLAB_STRESS_OPS=${SLAB_STRESS_OPS:-250000}
for t in concurrency stats shrink; do
        echo "=== test-slab-$t with MEMBROKER_SLAB_DEBUG=1"
        bash "$top_srcdir/tests/test-slab-$t.sh" || exit $?
done
