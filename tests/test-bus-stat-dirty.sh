#!/bin/bash
# SPDX-License-Identifier: MIT
# A client's fast-path writes reach a stat read through its region's dirty
# word, not through the periodic flush: with StatsFlushIntervalSec far away,
# a churning client's pgalloc read over the bus keeps growing after the
# first read consumed the word.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M" "StatsFlushIntervalSec=86400"
mb_write_tenant a "Path=grp/a"
bus_run

load_start a grp/a $((1 << 20)) --churn 20000
p0=$(stat_value grp/a pgalloc)
p1=$(stat_value grp/a pgalloc)
grown() { p2=$(stat_value grp/a pgalloc); [ "$p2" -gt "$p1" ]; }
wait_for 10 grown || fail "pgalloc of grp/a stayed at $p1 (first read $p0): the churn never reached a read"
pass "pgalloc grows between reads without the periodic flush ($p0, $p1 -> $p2)"
load_stop a
assert_eq 0 "$LOAD_RC" "membroker-load exit status"
