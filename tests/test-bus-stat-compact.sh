#!/bin/bash
# SPDX-License-Identifier: MIT
# DumpStats and DumpStatsCompact agree key for key with the per-tenant
# calls: for every tenant, DumpStats' pairs are GetStat's (same keys, same
# order, same values), and DumpStatsCompact's three arrays are GetStat's
# values under its stat_keys, GetEvents' values under its event_keys, and
# the Tenant properties under its property names.  Figures that are not
# zero (pages held by a client, a limit, max and oom events) make a value
# put under the wrong key show.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=grp/a" "MemoryHigh=32M" "MemoryLow=1M"
mb_write_tenant b "Path=grp/b" "MemoryMin=2M"
mb_write_tenant c "Path=other/c" "MemoryMax=1M"
bus_run

hold=$((2 << 20))
load_start a grp/a $hold
# A charge over MemoryMax: max and oom events on other/c.
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant other/c --hold 2M --seconds 1 >"$MB_TMP/over.out" 2>&1 &&
        fail "membroker-load over MemoryMax succeeded"
fresh() { [ "$(stat_value grp/a pages)" = "$hold" ] && [ "$(events_value other/c max)" -ge 1 ]; }
wait_for 20 fresh || fail "the figures of grp/a and other/c never settled"

dump=$(mb_busctl --json=short call "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" DumpStats) ||
        fail "DumpStats failed"
compact=$(mb_busctl --json=short call "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" DumpStatsCompact) ||
        fail "DumpStatsCompact failed"
# The per-tenant view of the same moment (the client only holds its pages:
# nothing moves now).
percall=$MB_TMP/percall.json
{
        echo "{"
        first=1
        for p in / grp grp/a grp/b other other/c; do
                obj=$(tenant_object "$p")
                [ -n "$first" ] || echo ","
                first=
                printf '"%s": {"stat": %s, "events": %s, "props": %s}' "$p" \
                        "$(mb_busctl --json=short call "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" GetStat s "$p")" \
                        "$(mb_busctl --json=short call "$BUS_DEST" "$BUS_MGR_PATH" "$BUS_MGR_IFACE" GetEvents s "$p")" \
                        "$(mb_busctl --json=short call "$BUS_DEST" "$obj" org.freedesktop.DBus.Properties GetAll s \
                                "$BUS_TENANT_IFACE")"
        done
        echo "}"
} >"$percall"

python3 - "$dump" "$compact" "$percall" <<'PY' || fail "DumpStats / DumpStatsCompact disagree with the per-tenant calls"
import json, sys
dump = json.loads(sys.argv[1])["data"][0]
props, stat_keys, event_keys, tenants = json.loads(sys.argv[2])["data"]
percall = json.load(open(sys.argv[3]))

def pairs(reply):
    return [(k, v) for k, v in reply["data"][0]]

want_paths = sorted(percall)
assert sorted(p for p, _ in dump) == want_paths, [p for p, _ in dump]
assert sorted(t[0] for t in tenants) == want_paths, [t[0] for t in tenants]
assert len(stat_keys) == len(set(stat_keys)) and len(event_keys) == len(set(event_keys))
for p, kv in dump:
    got = [(k, v) for k, v in kv]
    assert got == pairs(percall[p]["stat"]), ("DumpStats", p, got, percall[p]["stat"])
nonzero = set()
for p, pv, sv, ev in tenants:
    stat = pairs(percall[p]["stat"])
    assert stat_keys == [k for k, _ in stat], ("stat_keys", stat_keys)
    assert sv == [v for _, v in stat], ("stat values", p, sv, stat)
    events = pairs(percall[p]["events"])
    assert event_keys == [k for k, _ in events], ("event_keys", event_keys)
    assert ev == [v for _, v in events], ("event values", p, ev, events)
    allprops = {k: v["data"] for k, v in percall[p]["props"]["data"][0].items()}
    assert len(pv) == len(props), (p, pv, props)
    for name, value in zip(props, pv):
        assert name in allprops, ("not a Tenant property", name)
        assert allprops[name] == value, ("property", p, name, value, allprops[name])
    nonzero |= {k for k, v in zip(stat_keys, sv) if v} | {k for k, v in zip(event_keys, ev) if v} \
        | {k for k, v in zip(props, pv) if v}
for k in ("pages", "pages_local", "pgalloc", "max", "oom", "max.local", "MemoryCurrent", "MemoryHigh",
          "MemoryMax", "MemoryLow", "MemoryMin", "ChargeBatch", "NClients"):
    assert k in nonzero, ("never non-zero, so not compared for real", k)
for k in ("MemoryCurrent", "MemoryPeak", "MemoryMax", "MemoryHigh", "MemoryLow", "MemoryMin",
          "EffectiveMemoryMin", "EffectiveMemoryLow", "ChargeBatch", "NClients"):
    assert k in props, ("property missing", k)
PY
pass "DumpStats = GetStat and DumpStatsCompact = GetStat, GetEvents and the properties, for every tenant"

# membrokerctl stat --format=prometheus (which reads DumpStatsCompact) gives
# the per-tenant figures too.
out=$(mb_ctl stat --format=prometheus) || fail "membrokerctl stat --format=prometheus failed"
grep -qx "membroker_pages_bytes{tenant=\"grp/a\"} $hold" <<<"$out" || fail "pages of grp/a: $(grep 'pages_bytes{tenant="grp/a"' <<<"$out")"
grep -qx 'membroker_memory_events_total{tenant="other/c",event="max"} [1-9][0-9]*' <<<"$out" ||
        fail "max events of other/c: $(grep 'events_total{tenant="other/c",event="max"' <<<"$out")"
grep -qx "membroker_memory_max_bytes{tenant=\"other/c\"} $((1 << 20))" <<<"$out" || fail "MemoryMax of other/c"
pass "membrokerctl stat --format=prometheus shows the compact figures"
load_stop a
