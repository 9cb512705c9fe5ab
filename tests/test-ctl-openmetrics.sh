#!/bin/bash
# SPDX-License-Identifier: MIT
# membrokerctl stat --format=openmetrics is valid OpenMetrics text (the
# families a node-exporter textfile collector reads): TYPE/UNIT/HELP before
# each family's samples, counters sampled as *_total, unit suffixes, a tenant
# label on every sample, "# EOF" last, and the values the bus reports.
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
python3 - "$om" "$(events_value app/a max)" <<'PY' || fail "not valid OpenMetrics as expected"
import re, sys
text, max_events = sys.argv[1], int(sys.argv[2])
lines = text.split("\n")
assert lines[-1] == "# EOF", "last line: %r" % lines[-1]
families, current, seen = {}, None, set()
sample_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)$')
values = {}
for l in lines[:-1]:
    if l.startswith("# "):
        kind, name, rest = l[2:].split(" ", 2)
        assert kind in ("TYPE", "UNIT", "HELP"), l
        if kind == "TYPE":
            assert name not in families, "family %s twice" % name
            assert rest in ("gauge", "counter"), l
            families[name] = {"type": rest}
            current = name
        else:
            assert name == current, "%s outside its family" % l
            if kind == "UNIT":
                assert name.endswith("_" + rest), "unit suffix: %s" % l
        continue
    m = sample_re.match(l)
    assert m, "bad sample line %r" % l
    name, labels, value = m.groups()
    fam = families[current]
    want = current + "_total" if fam["type"] == "counter" else current
    assert name == want, "sample %s in family %s (%s)" % (name, current, fam["type"])
    assert re.match(r'^tenant="[^"]*"(,[a-z]+="[^"]*")*$', labels), labels
    float(value)  # numbers, +Inf
    values[(name, labels)] = value
for t in ("/", "app", "app/a", "app/b"):
    assert ("membroker_memory_current_bytes", 'tenant="%s"' % t) in values, t
assert values[("membroker_pages_bytes", 'tenant="app/b"')] == str(2 << 20)
assert values[("membroker_memory_max_bytes", 'tenant="app/a"')] == str(1 << 20)
assert values[("membroker_memory_max_bytes", 'tenant="app/b"')] == "+Inf"
assert values[("membroker_memory_events_total", 'tenant="app/a",event="max"')] == str(max_events)
assert values[("membroker_memory_events_local_total", 'tenant="app",event="max"')] == "0"
assert families["membroker_pgalloc"]["type"] == "counter"
assert "membroker_throttle_seconds" in families and "membroker_pages_local_bytes" in families
PY
pass "OpenMetrics text is valid and carries the bus figures"

one=$(mb_ctl stat --format=openmetrics app/b)
! printf '%s\n' "$one" | grep -q 'tenant="app/a"' || fail "stat app/b printed other tenants"
printf '%s\n' "$one" | grep -qx 'membroker_clients{tenant="app/b"} 1' || fail "clients of app/b"
pass "OpenMetrics for one tenant"
