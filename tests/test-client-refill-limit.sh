#!/bin/bash
# SPDX-License-Identifier: MIT
# A charge ahead by the library's thread that meets the limit after all: the
# daemon's drain for it is answered by that thread itself, never waited out.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
. "$top_srcdir/tests/broker-lib.sh"
mb_client_setup
mb_client_case refill-limit
mb_dump_state
[ "$(mb_dump_field reclaim requests)" -ge 1 ] || fail "the case sent the daemon no request to drain: it proves nothing"
assert_eq 0 "$(mb_dump_field reclaim timeouts)" "drain and reclaim requests waited out (the daemon's counter)"
