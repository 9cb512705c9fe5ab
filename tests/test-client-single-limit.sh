#!/bin/bash
# SPDX-License-Identifier: MIT
# single allocations reach exactly MemoryMax (batch fallback, other CPUs' stocks), then ENOMEM.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case single-limit
