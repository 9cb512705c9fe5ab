#!/bin/bash
# SPDX-License-Identifier: MIT
# 8 threads on one client with the stock locks in atomic mode (MEMBROKER_RSEQ=0); contents verified.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
MEMBROKER_RSEQ=0 mb_client_case threads
