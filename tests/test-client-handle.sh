#!/bin/bash
# SPDX-License-Identifier: MIT
# handle <-> pointer round trips; pointers outside the arena are refused (bulk: nothing freed).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case handle
