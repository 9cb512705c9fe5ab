#!/bin/bash
# SPDX-License-Identifier: MIT
# membrokerctl top -n N -d SEC (not a terminal): N plain refreshes, tenants
# ordered by usage, allocation rates from the second refresh on; --json one
# object per refresh.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
# Exact usage after a known allocation is what this checks: no charging
# ahead of need (tests/test-client-refill.sh covers it).
export MEMBROKER_REFILL=0

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a"
mb_write_tenant b "Path=app/b"
mb_write_tenant c "Path=app/c"
bus_run
load_start a app/a 1M
load_start b app/b 3M --churn 2000

out=$(mb_ctl top -n 2 -d 0.5)
printf '%s\n' "$out"
case "$out" in *$'\033'*) fail "escape sequences although stdout is not a terminal" ;; esac
assert_eq 2 "$(printf '%s\n' "$out" | grep -c '^TENANT ')" "number of refreshes"
order=$(printf '%s\n' "$out" | awk '/^TENANT / { n++; next } n == 2 && NF == 10 { print $1 }')
assert_eq "$(printf '%s\n' / app app/b app/a app/c)" "$order" "tenants by usage"
set -- $(printf '%s\n' "$out" | awk '/^TENANT / { n++ } n == 1' | grep '^app/b ')
assert_eq "- -" "$8 $9" "no rates at the first refresh"
set -- $(printf '%s\n' "$out" | awk '/^TENANT / { n++ } n == 2' | grep '^app/b ')
[ "$8" -gt 0 ] 2>/dev/null || fail "no allocation rate for the churning tenant: $*"
assert_eq "1 3.0M" "$2 $3" "clients and usage of app/b"
pass "top shows rates from the second refresh on"

json=$(mb_ctl --json top -n 2 -d 0.2)
python3 - "$json" <<'PY' || fail "top --json: $json"
import json, sys
docs = [json.loads(l) for l in sys.argv[1].splitlines()]
assert len(docs) == 2, docs
ts = docs[1]["Tenants"]
assert [t["Path"] for t in ts][:3] == ["/", "app", "app/b"], ts
assert "PgallocPerSec" in ts[0] and "PgallocPerSec" not in docs[0]["Tenants"][0], ts
assert ts[1]["MemoryMax"] == "max" and "Pages" in ts[1] and "Stock" in ts[1], ts[1]
PY
pass "top --json"

rc=0; mb_ctl top -n 0 >/dev/null 2>&1 || rc=$?
assert_eq 2 "$rc" "top -n 0 is a usage error"
