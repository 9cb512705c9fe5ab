#!/bin/bash
# SPDX-License-Identifier: MIT
# the CPU's stats slot shows pages/stock/pgalloc/pgfree exactly after quiescence.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case stats
