#!/bin/bash
# SPDX-License-Identifier: MIT
# membrokerctl events: memory.events of a tenant, its subtree and local
# counts side by side; --json gives the daemon's keys.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a" "MemoryMax=1M"
bus_run
rc=0
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant app/a --hold 2M --seconds 1 >/dev/null 2>&1 || rc=$?
assert_eq 1 "$rc" "a client over MemoryMax"
max=$(events_value app/a max)
oom=$(events_value app/a oom)

out=$(mb_ctl events app)
printf '%s\n' "$out"
assert_eq "EVENT SUBTREE LOCAL" "$(printf '%s\n' "$out" | head -1 | tr -s ' ')" "header"
assert_eq "$(printf '%s\n' low high max oom oom_kill overrun oom_group_kill)" "$(printf '%s\n' "$out" | awk 'NR > 1 { print $1 }')" "event rows"
set -- $(printf '%s\n' "$out" | grep '^max ')
assert_eq "max $max 0" "$*" "max row of app (subtree $max, local 0)"
set -- $(mb_ctl events app/a | grep '^oom ')
assert_eq "oom $oom $oom" "$*" "oom row of app/a"

json=$(mb_ctl --json events app/a)
python3 - "$json" "$max" <<'PY' || fail "events --json: $json"
import json, sys
e = json.loads(sys.argv[1])["app/a"]
assert e["max"] == int(sys.argv[2]) and e["max.local"] == int(sys.argv[2]), e
assert set(e) == {"low", "high", "max", "oom", "oom_kill", "overrun", "oom_group_kill", "low.local", "high.local",
                  "max.local", "oom.local", "oom_kill.local", "overrun.local", "oom_group_kill.local"}, e
PY
pass "events --json"
expect_fail "No tenant 'nope'" mb_ctl events nope
