#!/bin/bash
# SPDX-License-Identifier: MIT
# Every benchmark table (bench/mb-bench.sh all) runs once in quick mode and
# prints its table: a "## Table N: ..." heading followed by a Markdown table
# with at least one data row.  Speed is not checked (benchmarks, not tests).
. "$top_srcdir/tests/lib.sh"

out="$MB_TMP/bench.md"
# The benchmark programs keep their fixtures until exit; leaks are the
# business of the unit tests, not of a benchmark smoke test.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export MB_BENCH_QUICK=1 MB_BENCH_DIR="$top_builddir/bench"
rc=0
bash "$top_srcdir/bench/mb-bench.sh" --output "$out" all >"$MB_TMP/stdout" 2>"$MB_TMP/stderr" || rc=$?
if [ $rc -ne 0 ]; then
        tail -40 "$MB_TMP/stderr"
        grep -n 'benchmark failed' "$out" || true
        fail "mb-bench.sh all exited $rc"
fi
pass "mb-bench.sh all exited 0"

# table_rows N: data rows of the table under "## Table N:" (up to the next
# "## " heading); sub-tables 6a/6b/... count for 6
table_rows() {
        awk -v n="$1" '
                /^## / { inside = ($0 ~ ("^## Table " n "[a-z]?: ")); next }
                inside && /^\| --- / { sep = 1; next }
                inside && sep && /^\| / { rows++ }
                inside && !/^\| / { sep = 0 }
                END { print rows + 0 }
        ' "$out"
}

for n in 1 2 3 4 5 6 7 8 9 10 11 13 14 15 16 17; do
        grep -q "^## Table $n[a-z]\{0,1\}: " "$out" || fail "table $n is missing from the output"
        # table 17 is not built under the sanitizers (the shim preloaded)
        if [ "$n" = 17 ] && [ ! -x "$top_builddir/bench/bench-programs" ]; then
                sed -n "/^## Table 17: /,/^## /p" "$out" | grep -q "^skipped: bench-programs not built" ||
                        fail "table 17 neither ran nor said why"
                pass "table 17 skipped: bench-programs not built here"
                continue
        fi
        # table 13 is not built under the sanitizers (tcmalloc preloaded)
        if [ "$n" = 13 ] && [ ! -x "$top_builddir/bench/bench-latency" ]; then
                sed -n "/^## Table 13: /,/^## /p" "$out" | grep -q "^skipped: bench-latency not built" ||
                        fail "table 13 neither ran nor said why"
                pass "table 13 skipped: bench-latency not built here"
                continue
        fi
        rows=$(table_rows "$n")
        [ "$rows" -ge 1 ] || { sed -n "/^## Table $n[a-z]\{0,1\}: /,/^## /p" "$out" | head -20; fail "table $n printed no table"; }
        pass "table $n printed $rows rows"
done

grep -q '^## Table 13b: huge pages' "$out" || [ ! -x "$top_builddir/bench/bench-latency" ] || fail "table 13b is missing"
grep -q '^## Targets' "$out" || fail "no targets summary"
pass "targets summary present"

# The charts: with gnuplot, a PNG per table with a median column beside the
# results (the hot path's and the scaling tables' among them), each listed;
# without it, the bench says it skipped them.
dir=$(dirname "$out")
if command -v gnuplot >/dev/null; then
        for n in 1 3 7 7b 11; do
                png="$dir/table-$n.png"
                [ -s "$png" ] || fail "no chart $png: $(grep -i chart "$MB_TMP/stderr" "$out" | head -3)"
                [ "$(head -c 8 "$png" | od -An -c | tr -d ' ')" = '211PNG\r\n032\n' ] || fail "$png is not a PNG"
                grep -q "^Charts (PNG, beside this file):.* table-$n\.png" "$out" || fail "table-$n.png is not listed"
        done
        pass "PNG charts drawn and listed"
else
        grep -q "^Charts: skipped: gnuplot is not installed" "$out" || fail "no word about the skipped charts"
        pass "no gnuplot: the charts are said to be skipped"
fi
