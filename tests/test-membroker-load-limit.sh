#!/bin/bash
# SPDX-License-Identifier: MIT
# membroker-load exits 1 when an allocation fails for a limit, after
# printing what it held and why, in bytes (tenant small: MemoryMax=240K, 60
# pages).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup

rc=0; out=$("$MEMBROKER_LOAD" --tenant small --hold 1M --seconds 0 2>"$MB_TMP/err") || rc=$?
assert_eq 1 "$rc" "exit code past the limit"
assert_eq "held=245760 cache=0 allocs=60 frees=0 errors=1 verify=ok" "$out" "result line at the limit"
grep -q "charge of 4 KiB (1 page) to small failed: small at max: usage 240 KiB (60 pages), MemoryMax=240 KiB (60 pages)" "$MB_TMP/err" ||
        fail "no reason in bytes on stderr: $(cat "$MB_TMP/err")"
pass "the reason gives bytes, pages in parentheses: $(cat "$MB_TMP/err")"

rc=0; out=$("$MEMBROKER_LOAD" --tenant small --hold 1M --threads 4 --seconds 0 --quiet) || rc=$?
assert_eq 1 "$rc" "exit code past the limit with 4 threads"
held=$(sed -n 's/^held=\([0-9]*\) .*/\1/p' <<<"$out")
[ -n "$held" ] && [ "$held" -le 245760 ] || fail "4 threads: $out"
grep -q "verify=ok" <<<"$out" || fail "4 threads: $out"
pass "4 threads stop at the limit with $held bytes held"

# Within the limit: exit 0.
rc=0; "$MEMBROKER_LOAD" --tenant small --hold 240K --seconds 0 --quiet >/dev/null || rc=$?
assert_eq 0 "$rc" "exit code at exactly the limit"
