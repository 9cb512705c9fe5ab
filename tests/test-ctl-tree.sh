#!/bin/bash
# SPDX-License-Identifier: MIT
# membrokerctl tree: the hierarchy drawn like systemd-cgls with usage, peak,
# limits and clients; a subtree; exact bytes; JSON.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
# Exact usage after a known allocation is what this checks: no charging
# ahead of need (tests/test-client-refill.sh covers it).
export MEMBROKER_REFILL=0
export LC_ALL=C # ASCII tree glyphs

bus_setup "Capacity=64M"
mb_write_tenant cache "Path=db/cache" "MemoryMax=16M" "MemoryLow=2M"
mb_write_tenant log "Path=db/log" "MemoryHigh=8M"
mb_write_tenant web "Path=web" "MemoryMax=4M"
bus_run
load_start c db/cache 1M

out=$(mb_ctl tree)
printf '%s\n' "$out"
names=$(printf '%s\n' "$out" | awk 'NR > 1 { NF -= 7; print }')
assert_eq "$(printf '%s\n' / '|-db' '| |-cache' '| `-log' '`-web')" "$names" "tree shape"
line() { printf '%s\n' "$out" | grep -- "$1"; }
set -- $(line "|-cache")
assert_eq "| |-cache 1.0M 1.0M 0B 2.0M max 16.0M 1" "$*" "db/cache line"
set -- $(line '`-log')
assert_eq '| `-log 0B 0B 0B 0B 8.0M max 0' "$*" "db/log line"
set -- $(line '`-web')
assert_eq '`-web 0B 0B 0B 0B max 4.0M 0' "$*" "web line"
set -- $(printf '%s\n' "$out" | sed -n 2p)
assert_eq "/ 1.0M 1.0M 0B 0B max 64.0M 0" "$*" "root line"

# --no-legend: the same lines without the heading (for scripts); --no-pager
# changes nothing.
assert_eq "$(printf '%s\n' "$out" | tail -n +2)" "$(mb_ctl --no-legend --no-pager tree)" "tree --no-legend"
mb_ctl --no-legend events db/cache | grep -q '^EVENT' && fail "events --no-legend printed its heading"
[ "$(mb_ctl --no-legend events db/cache | wc -l)" -ge 6 ] || fail "events --no-legend lost lines"
mb_ctl --no-legend top -n 1 | grep -q 'TENANT\|^Capacity' && fail "top --no-legend printed its heading"
pass "--no-legend"

sub=$(mb_ctl tree db)
assert_eq "$(printf '%s\n' db '|-cache' '`-log')" "$(printf '%s\n' "$sub" | awk 'NR > 1 { NF -= 7; print }')" "tree db"

set -- $(mb_ctl --bytes tree | grep -- '-cache')
assert_eq "| |-cache 1048576 1048576 0 2097152 max 16777216 1" "$*" "db/cache line with --bytes"

json=$(mb_ctl --json tree)
python3 - "$json" <<'PY' || fail "tree --json: $json"
import json, sys
t = {x["Path"]: x for x in json.loads(sys.argv[1])}
assert list(t) == ["/", "db", "db/cache", "db/log", "web"], list(t)
assert t["db/cache"]["MemoryCurrent"] == 1 << 20 and t["db/cache"]["NClients"] == 1, t["db/cache"]
assert t["db/cache"]["MemoryMax"] == 16 << 20 and t["web"]["MemoryMax"] == 4 << 20, t
assert t["db"]["MemoryMax"] == "max" and t["db"]["MemoryHigh"] == "max", t["db"]  # no limit
assert t["db"]["MemoryLow"] == 0, t["db"]
PY
pass "tree --json"

expect_fail "no tenant 'nope'" mb_ctl tree nope
