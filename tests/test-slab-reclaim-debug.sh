#!/bin/bash
# SPDX-License-Identifier: MIT
# The slab reclaim tests again with MEMBROKER_SLAB_DEBUG=1: in debug mode
# (red zones, poisoning, checks on every alloc and free, other layouts) the
# shrinkers must give back the same pages, with no false report and every
# live object intact.
export MEMBROKER_SLAB_DEBUG=1
for t in proactive max unreclaimable; do
        echo "=== test-slab-reclaim-$t with MEMBROKER_SLAB_DEBUG=1"
        bash "$top_srcdir/tests/test-slab-reclaim-$t.sh" || exit $?
done
