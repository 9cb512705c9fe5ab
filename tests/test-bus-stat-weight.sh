#!/bin/bash
# SPDX-License-Identifier: MIT
# A stat update weighs what it changes, as memcg_rstat_updated() adds
# abs(val) to the pending updates that decide a flush on read: one bulk
# allocation of 4096 pages is one library call, yet far above the flush
# threshold, so the next stat read flushes and shows it -- with the periodic
# flush out of the way (StatsFlushIntervalSec=86400).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

CLIENT_TOOL="$top_builddir/tests/client-tool"
bus_setup "Capacity=256M" "StatsFlushIntervalSec=86400"
mb_write_tenant a "Path=a"
bus_run
export MEMBROKER_SOCKET="$MB_SOCK"
PAGE=$(mgr_prop PageSize)

"$CLIENT_TOOL" steps a hold:4096 "touch:$MB_TMP/held" "wait:$MB_TMP/go" 2>"$MB_TMP/tool.err" &
pid=$!
MB_CHILDREN+=($pid)
wait_for 30 test -e "$MB_TMP/held" || { cat "$MB_TMP/tool.err"; fail "the client did not allocate"; }

assert_eq $((4096 * PAGE)) "$(stat_value a pages)" "pages of a at the next read"
assert_eq 4096 "$(stat_value a pgalloc)" "pgalloc of a at the next read"

touch "$MB_TMP/go"
rc=0
wait $pid || rc=$?
assert_eq 0 "$rc" "client exit status"
