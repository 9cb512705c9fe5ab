#!/bin/bash
# SPDX-License-Identifier: MIT
# handle <-> pointer round trips; pointers outside the arena are refused (bulk: nothing freed).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
# The case compares the stock's figure before and after a refused bulk
# free: a charge ahead landing in between would move it.
export MEMBROKER_REFILL=0
mb_client_setup
mb_client_case handle
