#!/bin/bash
# SPDX-License-Identifier: MIT
# GetStatText is memory.stat-style text, one "key value" a line with the
# keys of docs/design.md; GetStat carries the same pairs; DumpStats covers
# every tenant; values are hierarchical, *_local ones are the tenant's own.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=grp/a"
mb_write_tenant b "Path=grp/b"
bus_run

hold=$((2 << 20))
load_start a grp/a $hold

text=$(stat_text grp/a)
# Every line is "key value" with a decimal value.
bad=$(printf '%s\n' "$text" | grep -Evx '[a-z_]+ [0-9]+' || true)
[ -z "$bad" ] || fail "lines of GetStatText that are not 'key value': $bad"
pass "GetStatText is 'key value' lines"

keys=$(printf '%s\n' "$text" | cut -d' ' -f1)
for k in pages stock slab slab_reclaimable slab_unreclaimable pgalloc pgfree charge_requests \
         uncharge_requests pgscan pgsteal throttle_usec anon_mmap; do
        printf '%s\n' "$keys" | grep -qx "$k" || fail "GetStatText lacks $k"
        printf '%s\n' "$keys" | grep -qx "${k}_local" || fail "GetStatText lacks ${k}_local"
done
[ "$(printf '%s\n' "$keys" | sort | uniq -d)" = "" ] || fail "duplicate keys in GetStatText"
pass "GetStatText has every key of docs/design.md and its _local form, once"

# GetStat returns the same ordered pairs.
pairs=$(mgr_call GetStat s grp/a | sed 's/^a(st) [0-9]* //' | tr -d '"' |
        awk '{ for (i = 1; i < NF; i += 2) print $i, $(i + 1) }')
assert_eq "$text" "$pairs" "GetStat pairs = GetStatText lines"
raw=$(mb_busctl call "$BUS_DEST" "$(tenant_object grp/a)" "$BUS_TENANT_IFACE" GetStatText)
raw=${raw#s \"}
assert_eq "$text" "$(printf '%b' "${raw%\"}")" "Tenant.GetStatText = Manager.GetStatText"

# Wait until the figures are fresh, then compare the levels.
fresh() { [ "$(stat_value grp/a pages)" = "$hold" ]; }
wait_for 20 fresh || fail "pages of grp/a never reached $hold"
assert_eq "$hold" "$(stat_value grp pages)" "pages of the parent (hierarchical)"
assert_eq 0 "$(stat_value grp pages_local)" "pages_local of the parent"
assert_eq "$hold" "$(stat_value grp/a pages_local)" "pages_local of the leaf"
assert_eq "$hold" "$(stat_value / pages)" "pages of the root"
assert_eq 0 "$(stat_value grp/b pages)" "pages of the idle sibling"
assert_eq $((hold / 4096)) "$(stat_value grp/a pgalloc)" "pgalloc (a count, not bytes)"

# DumpStats: every tenant, each with the same keys as GetStat.
dump=$(mb_busctl --json=short call "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" DumpStats)
python3 - "$dump" "$text" <<'PY' || fail "DumpStats does not match"
import json, sys
dump = json.loads(sys.argv[1])["data"][0]
want = [l.split()[0] for l in sys.argv[2].splitlines()]
paths = sorted(p for p, _ in dump)
assert paths == ["/", "grp", "grp/a", "grp/b"], paths
for p, kv in dump:
    assert [k for k, _ in kv] == want, (p, kv)
stats = {p: dict(kv) for p, kv in dump}
assert stats["grp/a"]["pages"] == stats["grp"]["pages"] == stats["/"]["pages"], stats
PY
pass "DumpStats lists every tenant with the GetStat keys"
