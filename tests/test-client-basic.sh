#!/bin/bash
# SPDX-License-Identifier: MIT
# connect, allocate, write, verify, free, close.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case basic
