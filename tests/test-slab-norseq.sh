#!/bin/bash
# The slab unit tests again with MEMBROKER_SLAB_RSEQ=0: the per-CPU slab
# lock without restartable sequences (a plain spinlock), as on machines
# where glibc registers no rseq area or the kernel lacks membarrier RSEQ.
set -eu
: "${top_builddir:?run through make check}"
export MEMBROKER_SLAB_RSEQ=0
"$top_builddir/tests/test-slab"
"$top_builddir/tests/test-slab-lock" | tee /dev/stderr | grep -qx "rseq fast path: no"
