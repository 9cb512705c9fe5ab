#!/bin/bash
# SPDX-License-Identifier: MIT
# membrokerctl set: sizes with K/M/G/T, fractions, percentages of the
# capacity, infinity; ChargeBatch in pages; --runtime; clear errors with
# exit status 1 and nothing changed on a bad value.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a"
bus_run

mb_ctl set app/a MemoryMax=16M MemoryHigh=1.5M MemoryLow=512K MemoryMin=4096
assert_eq $((16 << 20)) "$(tenant_prop app/a MemoryMax)" "MemoryMax=16M"
assert_eq $((3 << 19)) "$(tenant_prop app/a MemoryHigh)" "MemoryHigh=1.5M"
assert_eq $((512 << 10)) "$(tenant_prop app/a MemoryLow)" "MemoryLow=512K"
assert_eq 4096 "$(tenant_prop app/a MemoryMin)" "MemoryMin=4096"
mb_ctl set --runtime app/a MemoryMax=25% ChargeBatch=8
assert_eq $((16 << 20)) "$(tenant_prop app/a MemoryMax)" "MemoryMax=25% of 64M"
assert_eq 8 "$(tenant_prop app/a ChargeBatch)" "ChargeBatch=8"
mb_ctl set app/a MemoryMax=infinity MemoryHigh=max
assert_eq 18446744073709551615 "$(tenant_prop app/a MemoryMax)" "MemoryMax=infinity"
assert_eq 18446744073709551615 "$(tenant_prop app/a MemoryHigh)" "MemoryHigh=max"
mb_ctl set app MemoryMax=1G
assert_eq $((1 << 30)) "$(tenant_prop app MemoryMax)" "MemoryMax=1G"

expect_fail "invalid value for MemoryMax: '12X'" mb_ctl set app/a MemoryMax=12X
expect_fail "invalid value for MemoryLow: '-1'" mb_ctl set app/a MemoryLow=-1
expect_fail "invalid value for ChargeBatch: '1K'" mb_ctl set app/a ChargeBatch=1K
expect_fail "unknown setting 'MemorySwapMax'" mb_ctl set app/a MemorySwapMax=1G
expect_fail "'MemoryMax' is not of the form Key=Value" mb_ctl set app/a MemoryMax
expect_fail "No tenant 'nope'" mb_ctl set nope MemoryMax=1G
expect_fail "ChargeBatch=0 is out of range" mb_ctl set app/a ChargeBatch=0
assert_eq 18446744073709551615 "$(tenant_prop app/a MemoryMax)" "MemoryMax after the refused calls"
assert_eq 8 "$(tenant_prop app/a ChargeBatch)" "ChargeBatch after the refused calls"

rc=0; mb_ctl set app/a MemoryMax=1X >/dev/null 2>&1 || rc=$?
assert_eq 1 "$rc" "exit status of a bad value"
rc=0; mb_ctl set app/a >/dev/null 2>&1 || rc=$?
assert_eq 2 "$rc" "exit status of set without assignments (usage)"
