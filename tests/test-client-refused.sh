#!/bin/bash
# SPDX-License-Identifier: MIT
# refused tenants: unknown, non-leaf, a uid not allowed, no daemon; mb_last_error() says why.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case refused
