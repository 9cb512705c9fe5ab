#!/bin/bash
# SPDX-License-Identifier: MIT
# mb_last_error() is per thread.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case last-error
