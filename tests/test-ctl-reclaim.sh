#!/bin/bash
# SPDX-License-Identifier: MIT
# membrokerctl reclaim PATH SIZE: asks the daemon, prints what came back;
# when less than asked could come back (memory.reclaim's EAGAIN) it says how
# much and exits 1.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a"
bus_run
load_start a app/a 1M --cache 2M
wait_for 20 eval '[ "$(tenant_prop app/a MemoryCurrent)" -ge $((3 << 20)) ]' || fail "the cache did not fill"

out=$(mb_ctl reclaim app/a 512K)
printf '%s\n' "$out" | grep -Eqx "Reclaimed [0-9.]+[BKM] of 512.0K from app/a" || fail "reclaim output: $out"
json=$(mb_ctl --json reclaim app 4K)
python3 - "$json" <<'PY' || fail "reclaim --json: $json"
import json, sys
r = json.loads(sys.argv[1])
assert r["Path"] == "app" and r["Requested"] == 4096 and 0 <= r["Reclaimed"] <= 4096, r
PY
pass "reclaim output"
rc=0
out=$(mb_ctl reclaim app/a 100M 2>&1) || rc=$?
assert_eq 1 "$rc" "exit status of a reclaim of more than can be reclaimed"
printf '%s\n' "$out" | grep -Eqx "membrokerctl: reclaim: Reclaimed [0-9]+ of 104857600 bytes from 'app/a': nothing more could be reclaimed" ||
        fail "reclaim of too much: $out"
pass "reclaim of too much: $out"
expect_fail "invalid size '12Q'" mb_ctl reclaim app/a 12Q
expect_fail "No tenant 'nope'" mb_ctl reclaim nope 1M
