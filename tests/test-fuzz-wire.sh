#!/bin/bash
# SPDX-License-Identifier: MIT
# The libFuzzer target for the frame decoder (tests/fuzz-wire.c), run for a
# fixed number of inputs from a seed corpus of one valid frame per message
# type plus a whole session.  Fails on any crash, sanitizer report or
# assertion (a decoded frame that does not re-pack byte for byte).  Built
# and registered only with ./configure --enable-fuzz CC=clang, which
# scripts/run-tests does in its third build.
. "$top_srcdir/tests/lib.sh"

FUZZ="$top_builddir/tests/fuzz-wire"
SEEDS="$top_builddir/tests/fuzz-wire-seeds"
RUNS=${MB_FUZZ_RUNS:-300000}

mkdir -p "$MB_TMP/seeds" "$MB_TMP/corpus"
"$SEEDS" "$MB_TMP/seeds"
n=$(ls "$MB_TMP/seeds" | wc -l)
[ "$n" -eq 14 ] || fail "expected 14 seed files (13 message types + a session), got $n"

# every seed must decode as it is: the fuzzer's assertions run on them first
"$FUZZ" -runs=0 "$MB_TMP/seeds" >"$MB_TMP/seeds.log" 2>&1 ||
        { cat "$MB_TMP/seeds.log"; fail "a seed frame does not round-trip"; }

# -seed fixes the mutation sequence, so a failure here reproduces
if ! "$FUZZ" -seed=1 -runs="$RUNS" -max_len=4096 -timeout=20 -rss_limit_mb=1024 \
        -artifact_prefix="$MB_TMP/" "$MB_TMP/corpus" "$MB_TMP/seeds" >"$MB_TMP/fuzz.log" 2>&1; then
        tail -40 "$MB_TMP/fuzz.log"
        for a in "$MB_TMP"/crash-* "$MB_TMP"/leak-* "$MB_TMP"/timeout-*; do
                [ -f "$a" ] && { echo "artifact $(basename "$a"):"; od -A d -t x1 "$a" | head -20; }
        done
        fail "fuzz-wire found a failing input"
fi
grep -q "^Done $RUNS runs" "$MB_TMP/fuzz.log" || { tail -20 "$MB_TMP/fuzz.log"; fail "fuzz-wire did not complete $RUNS runs"; }
grep -E '^Done|#[0-9]+ *DONE' "$MB_TMP/fuzz.log" | tail -2
echo "ok: $RUNS inputs through the frame decoder, no failure"
