#!/bin/bash
# SPDX-License-Identifier: MIT
# membroker-load really verifies its pages: another client of the same
# tenant overwrites them through handles (the arena is shared inside a
# tenant), and the run ends with verify=FAILED and exit 2.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup

"$MEMBROKER_LOAD" --tenant app --hold 64K >"$MB_TMP/out" 2>"$MB_TMP/err" &
pid=$!
MB_CHILDREN+=("$pid")
wait_for 20 grep -q "holding 16 pages" "$MB_TMP/err" || fail "membroker-load did not start: $(cat "$MB_TMP/err")"

# The first client of a fresh tenant holds its lowest page indices: 16 pages
# (writing beyond what the tenant's clients hold is an overrun, see
# tests/test-attack-*.sh).
"$CLIENT_TOOL" scribble app 0 16 || fail "scribble failed"
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
assert_eq 2 "$rc" "exit code after corruption"
grep -Eq '^held=65536 cache=0 allocs=16 frees=0 errors=0 verify=FAILED$' "$MB_TMP/out" ||
        fail "line after corruption: $(cat "$MB_TMP/out")"
grep -q "wrong data" "$MB_TMP/err" || fail "no report of the bad page: $(cat "$MB_TMP/err")"
