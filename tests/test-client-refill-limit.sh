#!/bin/bash
# SPDX-License-Identifier: MIT
# A charge ahead by the library's thread that meets the limit after all: the
# daemon's drain for it is answered by that thread itself, never waited out.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case refill-limit
if grep 'did not answer' "$MB_TMP/daemon.log"; then
        fail "the daemon waited out a client for a request of its own charge"
fi
pass "every drain and reclaim request was answered"
