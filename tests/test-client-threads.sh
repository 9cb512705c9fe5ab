#!/bin/bash
# SPDX-License-Identifier: MIT
# 8 threads allocating and freeing on one client; every page's contents verified.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case threads
