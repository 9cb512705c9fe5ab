#!/bin/bash
# SPDX-License-Identifier: MIT
# Lazy flush on read (docs/design.md, flush batching): with the periodic flush out of
# the way, a stat read of a tenant with enough pending updates flushes it and
# shows what the client allocated; a read of a subtree with nothing pending,
# and a second read, do no flush work (StatsFlushes/StatsFlushedNodes).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M" "StatsFlushIntervalSec=86400"
mb_write_tenant a "Path=grp/a"
mb_write_tenant b "Path=other/b"
bus_run

flush_work() { echo "$(mgr_prop StatsFlushes) $(mgr_prop StatsFlushedNodes)"; }

# 1024 pages: thousands of updates, far above the flush threshold.
hold=$((4 << 20))
load_start a grp/a $hold
w0=$(flush_work)

# A subtree without pending updates: nothing to do.
assert_eq 0 "$(stat_value other/b pages)" "pages of other/b"
assert_eq "$w0" "$(flush_work)" "flush work after reading an idle subtree"

# The busy tenant: the read flushes and shows the allocation.
assert_eq "$hold" "$(stat_value grp/a pages)" "pages of grp/a at the first read"
w1=$(flush_work)
[ "${w1%% *}" -gt "${w0%% *}" ] || fail "the first read did no flush (before: $w0, after: $w1)"
[ "${w1##* }" -gt "${w0##* }" ] || fail "the first read flushed no node (before: $w0, after: $w1)"
pass "the first read flushed ($w0 -> $w1)"

# The ancestors still hold grp/a's flushed deltas as pending (as in
# mem_cgroup_css_rstat_flush(): a parent folds its children's deltas when it
# is flushed itself), so the first read of the root flushes them.
assert_eq "$hold" "$(stat_value / pages)" "pages of the root"
w2=$(flush_work)

# Nothing pending any more: reads cost no flush.
assert_eq "$hold" "$(stat_value grp/a pages)" "pages of grp/a at the second read"
assert_eq "$hold" "$(stat_value grp pages)" "pages of grp"
assert_eq "$hold" "$(stat_value / pages)" "pages of the root at the second read"
mgr_call GetStat s grp/a >/dev/null
mgr_call GetEvents s grp/a >/dev/null
mgr_call DumpStats >/dev/null
mb_busctl call "$BUS_DEST" "$(tenant_object grp/a)" "$BUS_TENANT_IFACE" GetStat >/dev/null
assert_eq "$w2" "$(flush_work)" "flush work after reads with nothing pending"

# The client leaves: its gauges are retired, the next read shows it.
load_stop a
assert_eq 0 "$LOAD_RC" "membroker-load exit status"
wait_for 10 eval '[ "$(mgr_prop NClients)" = 0 ]' || fail "the client did not detach"
# Local values are settled at detach (rstat_source_detach()); the
# hierarchical ones follow at the next flush of the subtree.
assert_eq 0 "$(stat_value grp/a pages_local)" "pages_local after the client left"
