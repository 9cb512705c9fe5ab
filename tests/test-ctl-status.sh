#!/bin/bash
# SPDX-License-Identifier: MIT
# membrokerctl status: the broker's figures as the Manager's properties say,
# human sizes by default, exact with --bytes, JSON with --json.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M" "ChargeBatch=32"
mb_write_tenant a "Path=app/a"
bus_run
load_start a app/a 1M

out=$(mb_ctl status)
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q "^membrokerd $(mgr_prop Version) on $MB_BUS_ADDRESS\$" || fail "first line"
printf '%s\n' "$out" | grep -qx " *Capacity: 64.0M" || fail "Capacity line"
printf '%s\n' "$out" | grep -qx " *Page size: 4.0K" || fail "Page size line"
printf '%s\n' "$out" | grep -qx " *Charge batch: 32 pages" || fail "Charge batch line"
printf '%s\n' "$out" | grep -qx " *Tenants: 3" || fail "Tenants line"
printf '%s\n' "$out" | grep -qx " *Clients: 1" || fail "Clients line"
printf '%s\n' "$out" | grep -Eq "^ *Current: 1\.[0-9]M \([0-9.]+% of capacity\)$" || fail "Current line"
pass "status text"

mb_ctl --bytes status | grep -qx " *Capacity: $((64 << 20))" || fail "status --bytes"
pass "status --bytes"

# StatsFlushes moves with the periodic flush: read it before and after.
flushes_before=$(mgr_prop StatsFlushes)
json=$(mb_ctl --json status)
python3 - "$json" "$(mgr_prop MemoryCurrent)" "$flushes_before" "$(mgr_prop StatsFlushes)" <<'PY' || fail "status --json: $json"
import json, sys
s = json.loads(sys.argv[1])
assert s["Capacity"] == 64 << 20 and s["PageSize"] == 4096 and s["ChargeBatch"] == 32, s
assert s["NTenants"] == 3 and s["NClients"] == 1, s
assert s["MemoryCurrent"] == int(sys.argv[2]), s
assert int(sys.argv[3]) <= s["StatsFlushes"] <= int(sys.argv[4]), (s, sys.argv[3:])
PY
pass "status --json matches the properties"
