#!/bin/bash
# SPDX-License-Identifier: MIT
# mb_close() returns every page: a tenant at its max is whole again for the next client.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case close
