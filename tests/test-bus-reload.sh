#!/bin/bash
# SPDX-License-Identifier: MIT
# Reload() re-reads the configuration: a changed limit shows at once (with
# PropertiesChanged), a new tenant appears on the bus; a broken file gets
# org.membroker1.Error.BadConfig naming file:line, and the running
# configuration is kept.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a" "MemoryMax=16M"
bus_run

monitor_start props "type='signal',sender='$BUS_DEST',path='/org/membroker1/tenant/app_2fa'"
mb_write_tenant a "Path=app/a" "MemoryMax=8M"
mb_write_tenant b "Path=app/b" "MemoryHigh=4M"
mgr_call Reload
assert_eq $((8 << 20)) "$(tenant_prop app/a MemoryMax)" "MemoryMax after Reload"
assert_eq $((4 << 20)) "$(tenant_prop app/b MemoryHigh)" "the new tenant app/b"
monitor_wait props "Member=PropertiesChanged" || fail "no PropertiesChanged for app/a on Reload"
pass "Reload applied the files"

mb_write_tenant a "Path=app/a" "MemoryMax=lots"
name=$(error_name "${DSEND[@]}" "$BUS_MGR_PATH" "$BUS_MGR_IFACE.Reload")
assert_eq org.membroker1.Error.BadConfig "$name" "error of a Reload with a bad file"
expect_fail "a.conf:3: bad size .lots. for MemoryMax=" mgr_call Reload
expect_fail "the running configuration is kept" mb_ctl reload
assert_eq $((8 << 20)) "$(tenant_prop app/a MemoryMax)" "MemoryMax kept after a bad Reload"
