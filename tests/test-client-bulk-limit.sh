#!/bin/bash
# SPDX-License-Identifier: MIT
# bulk allocation at the limit is all or nothing: ENOMEM and nothing leaked.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case bulk-limit
