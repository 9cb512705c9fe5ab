#!/bin/bash
# SPDX-License-Identifier: MIT
# membrokerctl stat --format=prometheus writes the Prometheus text format
# that node_exporter's textfile collector reads: # HELP and # TYPE (in that
# order) for every family, no # UNIT and no "# EOF", names ending in
# _bytes, _seconds_total or _total, a tenant label on every sample, the
# figures the bus reports; promtool check metrics accepts it.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
# Exact usage after a known allocation is what this checks: no charging
# ahead of need (tests/test-client-refill.sh covers it).
export MEMBROKER_REFILL=0

command -v promtool >/dev/null || skip "promtool (Debian package prometheus) is not installed"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a" "MemoryMax=1M"
mb_write_tenant b "Path=app/b"
bus_run
load_start b app/b 2M
fresh() { [ "$(stat_value app/b pages)" = $((2 << 20)) ]; }
wait_for 20 fresh || fail "stats of app/b never fresh"

mb_ctl stat --format=prometheus >"$MB_TMP/membroker.prom"
head -12 "$MB_TMP/membroker.prom"
promtool check metrics <"$MB_TMP/membroker.prom" || fail "promtool check metrics"
pass "promtool check metrics accepts it"

python3 - "$MB_TMP/membroker.prom" <<'PY' || fail "not the Prometheus text format as expected"
import re, sys
lines = open(sys.argv[1]).read().rstrip("\n").split("\n")
sample_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(tenant="[^"]*"(?:,[a-z]+="[^"]*")*)\} (\S+)$')
help_, type_, values = {}, {}, {}
prev = None
for l in lines:
    assert not l.startswith("# UNIT") and l != "# EOF", "OpenMetrics line in Prometheus text: %r" % l
    if l.startswith("# HELP "):
        name = l.split(" ")[2]
        assert name not in help_, "two HELP lines for " + name
        help_[name] = l
    elif l.startswith("# TYPE "):
        _, _, name, t = l.split(" ")
        assert prev == "# HELP " + name or prev.startswith("# HELP %s " % name), "TYPE %s not after its HELP" % name
        type_[name] = t
    else:
        m = sample_re.match(l)
        assert m, "bad sample line %r" % l
        name = m.group(1)
        assert name in help_ and name in type_, "no HELP/TYPE for " + name
        float(m.group(3))
        values[(name, m.group(2))] = m.group(3)
    prev = l
for name, t in type_.items():
    assert t in ("gauge", "counter"), (name, t)
    assert (t == "counter") == name.endswith("_total"), "%s is a %s" % (name, t)
    assert name.startswith("membroker_"), name
    assert name == "membroker_clients" or re.search(r'_(bytes|seconds_total|total)$', name), \
        "no unit suffix: " + name
assert values[("membroker_memory_current_bytes", 'tenant="app/b"')] == str(2 << 20)
assert values[("membroker_memory_max_bytes", 'tenant="app/a"')] == str(1 << 20)
assert values[("membroker_memory_max_bytes", 'tenant="app/b"')] == "+Inf"
assert values[("membroker_clients", 'tenant="app/b"')] == "1"
assert "membroker_throttle_seconds_total" in type_
PY
pass "Prometheus text format with the bus figures"

# The textfile collector reads *.prom files: what it would read of one tenant.
mb_ctl stat --format=prometheus app/b >"$MB_TMP/one.prom"
promtool check metrics <"$MB_TMP/one.prom" || fail "promtool on one tenant"
! grep -q 'tenant="app/a"' "$MB_TMP/one.prom" || fail "stat app/b printed other tenants"
expect_fail "--format=prometheus is only for stat" mb_ctl --format=prometheus tree
