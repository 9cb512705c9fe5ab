#!/bin/bash
# SPDX-License-Identifier: MIT
# the CPU's stats slot shows pages/stock/pgalloc/pgfree exactly after quiescence.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
# The exact count of a stock after known operations is what this checks:
# no charging ahead of need (tests/test-client-refill.sh covers it).
export MEMBROKER_REFILL=0
# ... and no spill between the CPUs' stocks (tests/test-preload-xthread.sh).
export MEMBROKER_SPILL=0
mb_client_case stats
