#!/bin/bash
# SPDX-License-Identifier: MIT
# membrokerctl stat --format=openmetrics is valid metrics text (the families
# a Prometheus scrape or a node-exporter textfile collector reads): every
# sample name has its own # HELP and # TYPE lines (a counter's name, samples
# and metadata alike, ends in _total), unit suffixes, a tenant label on every
# sample, "# EOF" last, and the values the bus reports; promtool check
# metrics accepts it where promtool is installed.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a" "MemoryMax=1M"
mb_write_tenant b "Path=app/b"
bus_run
load_start b app/b 2M
rc=0
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant app/a --hold 2M --seconds 1 >/dev/null 2>&1 || rc=$?
assert_eq 1 "$rc" "a client over MemoryMax (for a max event)"
fresh() { [ "$(stat_value app/b pages)" = $((2 << 20)) ]; }
wait_for 20 fresh || fail "stats of app/b never fresh"

om=$(mb_ctl stat --format=openmetrics)
printf '%s\n' "$om" | head -20
printf '%s\n' "$om" >"$MB_TMP/metrics.txt"
python3 - "$MB_TMP/metrics.txt" "$(events_value app/a max)" <<'PY' || fail "not valid metrics text as expected"
import re, sys
text, max_events = open(sys.argv[1]).read().rstrip("\n"), int(sys.argv[2])
lines = text.split("\n")
assert lines[-1] == "# EOF", "last line: %r" % lines[-1]
# Metadata by the exact name it gives, in the order the names come.
meta, order, current = {}, [], None
sample_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)$')
values, sampled = {}, set()
for l in lines[:-1]:
    if l.startswith("# "):
        kind, name, rest = l[2:].split(" ", 2)
        assert kind in ("TYPE", "UNIT", "HELP"), l
        if name != current:
            assert name not in meta, "metadata of %s split or repeated" % name
            meta[name], current = {}, name
            order.append(name)
        assert kind not in meta[name], "two %s lines for %s" % (kind, name)
        meta[name][kind] = rest
        continue
    m = sample_re.match(l)
    assert m, "bad sample line %r" % l
    name, labels, value = m.groups()
    # Each sample's own name has its # HELP and # TYPE, right above its
    # family's samples (Prometheus text format, promtool check metrics).
    assert name == current, "sample %s under the metadata of %s" % (name, current)
    assert "TYPE" in meta[name] and "HELP" in meta[name], "%s lacks HELP or TYPE" % name
    assert re.match(r'^tenant="[^"]*"(,[a-z]+="[^"]*")*$', labels), labels
    float(value)  # numbers, +Inf
    values[(name, labels)] = value
    sampled.add(name)
for name, md in meta.items():
    assert md.get("TYPE") in ("gauge", "counter"), "%s: TYPE %r" % (name, md.get("TYPE"))
    assert md.get("HELP"), "%s: no HELP" % name
    assert (md["TYPE"] == "counter") == name.endswith("_total"), "%s is a %s" % (name, md["TYPE"])
    if "UNIT" in md:
        base = name[:-len("_total")] if md["TYPE"] == "counter" else name
        assert base.endswith("_" + md["UNIT"]), "unit suffix: %s %s" % (name, md["UNIT"])
for t in ("/", "app", "app/a", "app/b"):
    assert ("membroker_memory_current_bytes", 'tenant="%s"' % t) in values, t
assert values[("membroker_pages_bytes", 'tenant="app/b"')] == str(2 << 20)
assert values[("membroker_memory_max_bytes", 'tenant="app/a"')] == str(1 << 20)
assert values[("membroker_memory_max_bytes", 'tenant="app/b"')] == "+Inf"
assert values[("membroker_memory_events_total", 'tenant="app/a",event="max"')] == str(max_events)
assert values[("membroker_memory_events_local_total", 'tenant="app",event="max"')] == "0"
assert meta["membroker_pgalloc_total"]["TYPE"] == "counter"
assert meta["membroker_throttle_seconds_total"]["UNIT"] == "seconds"
assert "membroker_pages_local_bytes" in sampled
PY
if command -v promtool >/dev/null; then
    promtool check metrics <"$MB_TMP/metrics.txt" || fail "promtool check metrics"
    pass "promtool check metrics accepts it"
fi
pass "OpenMetrics text is valid and carries the bus figures"

one=$(mb_ctl stat --format=openmetrics app/b)
! printf '%s\n' "$one" | grep -q 'tenant="app/a"' || fail "stat app/b printed other tenants"
printf '%s\n' "$one" | grep -qx 'membroker_clients{tenant="app/b"} 1' || fail "clients of app/b"
pass "OpenMetrics for one tenant"
