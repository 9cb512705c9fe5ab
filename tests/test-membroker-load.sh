#!/bin/bash
# SPDX-License-Identifier: MIT
# membroker-load: options, the result line and exit codes (docs/design.md).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup

LINE_RE='^held=[0-9]+ cache=[0-9]+ allocs=[0-9]+ frees=[0-9]+ errors=[0-9]+ verify=(ok|FAILED)$'
field() { sed -n "s/.*\<$1=\([0-9a-zA-Z]*\).*/\1/p" <<<"$2"; }

out=$("$MEMBROKER_LOAD" --help) || fail "--help exits non-zero"
for opt in --socket --tenant --hold --cache --churn --threads --seconds --quiet --help --version; do
        grep -q -- "$opt" <<<"$out" || fail "--help does not mention $opt"
done
pass "--help lists every option"

"$MEMBROKER_LOAD" --version | grep -q '^membroker-load [0-9]' || fail "--version"
# More than the machine has: a clear refusal before anything starts.
rc=0; "$MEMBROKER_LOAD" --tenant app --hold 4096T --seconds 0 2>"$MB_TMP/err" || rc=$?
assert_eq 2 "$rc" "exit code of --hold 4096T"
grep -q "membroker-load: --hold asks for 4 PiB, more than this machine's memory and swap (" "$MB_TMP/err" ||
        fail "no clear error for --hold 4096T: $(cat "$MB_TMP/err")"
pass "--hold 4096T: $(cat "$MB_TMP/err")"

for bad in "--hold 12X" "--hold -1" "--threads 0" "--churn fast" "--seconds" "--bogus" "extra"; do
        rc=0; "$MEMBROKER_LOAD" $bad >/dev/null 2>&1 || rc=$?
        assert_eq 2 "$rc" "exit code of membroker-load $bad"
done

rc=0; out=$("$MEMBROKER_LOAD" --tenant app --hold 1M --seconds 0 --quiet 2>"$MB_TMP/err") || rc=$?
assert_eq 0 "$rc" "exit code of --hold 1M --seconds 0"
assert_eq "held=1048576 cache=0 allocs=256 frees=0 errors=0 verify=ok" "$out" "result line"
assert_eq "" "$(cat "$MB_TMP/err")" "stderr with --quiet"

out=$("$MEMBROKER_LOAD" --tenant app --hold 10000 --seconds 0 2>"$MB_TMP/err")
assert_eq "held=12288 cache=0 allocs=3 frees=0 errors=0 verify=ok" "$out" "--hold rounds up to pages"
grep -q "tenant app" "$MB_TMP/err" || fail "no progress message without --quiet"

out=$(env -u MEMBROKER_SOCKET "$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant app --hold 64K --cache 1M --seconds 0 --quiet)
assert_eq "held=65536 cache=1048576 allocs=272 frees=0 errors=0 verify=ok" "$out" "--socket, K and M suffixes, --cache"

rc=0; out=$("$MEMBROKER_LOAD" --tenant app --hold 1M --cache 256K --threads 3 --churn 2000 --seconds 1 --quiet) || rc=$?
assert_eq 0 "$rc" "exit code with threads and churn"
grep -Eq "$LINE_RE" <<<"$out" || fail "malformed line: $out"
assert_eq 1048576 "$(field held "$out")" "held with churn"
assert_eq 262144 "$(field cache "$out")" "cache with churn"
assert_eq 0 "$(field errors "$out")" "errors with churn"
assert_eq ok "$(field verify "$out")" "verify with churn"
frees=$(field frees "$out")
[ "$frees" -gt 0 ] || fail "churn freed nothing: $out"
assert_eq $((256 + 64 + frees)) "$(field allocs "$out")" "allocs = held + cache + reallocations"

rc=0; "$MEMBROKER_LOAD" --tenant nosuch --hold 1M --seconds 0 >"$MB_TMP/out" 2>"$MB_TMP/err" || rc=$?
assert_eq 2 "$rc" "exit code for an unknown tenant"
grep -q "no tenant nosuch" "$MB_TMP/err" || fail "no reason for the refusal: $(cat "$MB_TMP/err")"
