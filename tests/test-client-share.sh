#!/bin/bash
# SPDX-License-Identifier: MIT
# a page handle shared between two processes of one tenant: the second maps the same arena.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case share
