#!/bin/bash
# SPDX-License-Identifier: MIT
# membrokerctl stat: memory.stat of one tenant, several, or all; human sizes
# for byte keys and plain counts otherwise; --bytes is the daemon's
# GetStatText; --json maps tenant -> key -> value.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a"
mb_write_tenant b "Path=app/b"
bus_run
load_start a app/a 2M
fresh() { [ "$(stat_value app/a pages)" = $((2 << 20)) ]; }
wait_for 20 fresh || fail "stats of app/a never fresh"

out=$(mb_ctl stat app/a)
printf '%s\n' "$out"
set -- $(printf '%s\n' "$out" | grep '^pages ')
assert_eq "pages 2.0M" "$*" "pages line (human)"
set -- $(printf '%s\n' "$out" | grep '^pgalloc ')
assert_eq "pgalloc 512" "$*" "pgalloc line (a count)"
assert_eq "$(stat_text app/a | cut -d' ' -f1)" "$(printf '%s\n' "$out" | awk '$1 != "pressure" { print $1 }')" \
        "keys in daemon order"
# Then memory.pressure, the kernel's two lines.
assert_eq "some full" "$(printf '%s\n' "$out" | awk '$1 == "pressure" { printf "%s%s", sep, $2; sep = " " }')" \
        "pressure lines after the stat"
printf '%s\n' "$out" | grep -Eq '^pressure some avg10=[0-9]+\.[0-9]{2} avg60=[0-9]+\.[0-9]{2} avg300=[0-9]+\.[0-9]{2} total=[0-9]+$' ||
        fail "the pressure line is not in the kernel's layout"

assert_eq "$(stat_text app/a)" "$(mb_ctl --bytes stat app/a | grep -v '^pressure ')" "stat --bytes = GetStatText"


multi=$(mb_ctl stat app/a /app/b/)
printf '%s\n' "$multi" | grep -qx "app/a:" || fail "no app/a header"
printf '%s\n' "$multi" | grep -qx "app/b:" || fail "no app/b header (the path is normalised)"
all=$(mb_ctl stat)
for t in / app app/a app/b; do printf '%s\n' "$all" | grep -qx "$t:" || fail "stat without a path lacks $t"; done
pass "stat of several tenants and of all"

json=$(mb_ctl --json stat app/a app)
python3 - "$json" "$(stat_text app/a)" <<'PY' || fail "stat --json: $json"
import json, sys
s = json.loads(sys.argv[1])
assert sorted(s) == ["app", "app/a"], s
want = dict(l.split() for l in sys.argv[2].splitlines())
assert {k: str(v) for k, v in s["app/a"].items()} == want, s["app/a"]
assert list(s["app/a"]) == [l.split()[0] for l in sys.argv[2].splitlines()], "order"
assert s["app"]["pages"] == 2 << 20 and s["app"]["pages_local"] == 0, s["app"]
PY
pass "stat --json"

expect_fail "No tenant 'nope'" mb_ctl stat nope
expect_fail "Invalid tenant path" mb_ctl stat 'a//b'
