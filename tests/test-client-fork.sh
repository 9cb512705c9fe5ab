#!/bin/bash
# SPDX-License-Identifier: MIT
# a fork() child cannot use the parent's connection (ECHILD) but may connect anew; the parent goes on.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case fork
