#!/bin/bash
# SPDX-License-Identifier: MIT
# membroker-load runs until SIGTERM/SIGINT by default and then ends cleanly
# (verify, line, exit 0); SIGUSR1 prints the line without stopping.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup

for sig in TERM INT; do
        # Files of this round's own: the last round's "holding" must not
        # pass for this one's before it has its handlers.
        rm -f "$MB_TMP/out" "$MB_TMP/err"
        "$MEMBROKER_LOAD" --tenant app --hold 256K --threads 2 --churn 500 >"$MB_TMP/out" 2>"$MB_TMP/err" &
        pid=$!
        MB_CHILDREN+=("$pid")
        wait_for 20 grep -q "holding" "$MB_TMP/err" || fail "membroker-load did not start: $(cat "$MB_TMP/err")"

        kill -USR1 "$pid"
        wait_for 10 grep -q "^held=" "$MB_TMP/out" || fail "no line on SIGUSR1"
        kill -0 "$pid" 2>/dev/null || fail "SIGUSR1 ended the run"
        grep -Eq '^held=262144 cache=0 allocs=[0-9]+ frees=[0-9]+ errors=0 verify=ok$' "$MB_TMP/out" ||
                fail "line on SIGUSR1: $(cat "$MB_TMP/out")"
        pass "SIGUSR1 prints the line and the run goes on"

        kill -"$sig" "$pid"
        rc=0; wait "$pid" || rc=$?
        assert_eq 0 "$rc" "exit code after SIG$sig"
        assert_eq 2 "$(wc -l <"$MB_TMP/out")" "lines printed after SIG$sig"
        tail -1 "$MB_TMP/out" | grep -Eq '^held=262144 cache=0 allocs=[0-9]+ frees=[0-9]+ errors=0 verify=ok$' ||
                fail "final line after SIG$sig: $(tail -1 "$MB_TMP/out")"
done
