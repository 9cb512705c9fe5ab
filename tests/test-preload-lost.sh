#!/bin/bash
# SPDX-License-Identifier: MIT
# The daemon is killed (SIGKILL) while a program runs under the shim, with
# reconnecting off (MEMBROKER_RECONNECT_TIMEOUT_SEC=0): the program goes on
# (its blocks stay mapped, what the stocks hold is served, then glibc) and
# computes the right result.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/preload-lib.sh"
preload_check
need_program python3
PY=$(command -v python3)
preload_broker

cat >"$MB_TMP/prog.py" <<'PYEOF'
import os, sys, time
keep = [bytes([i % 256]) * (100 + i % 5000) for i in range(20000)]
open(sys.argv[1], 'w').close()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
more = [bytearray(i % 9000 + 1) for i in range(20000)]
big = bytearray(8 << 20)
ok = all(k == bytes([i % 256]) * (100 + i % 5000) for i, k in enumerate(keep))
print('ok' if ok and len(more) == 20000 and len(big) == 8 << 20 else 'bad')
PYEOF

MEMBROKER_RECONNECT_TIMEOUT_SEC=0 mbrun t "$PY" "$MB_TMP/prog.py" "$MB_TMP/ready" "$MB_TMP/go" \
        >"$MB_TMP/out" 2>&1 &
prog=$!
MB_CHILDREN+=("$prog")
wait_for 30 test -e "$MB_TMP/ready" || fail "the program did not start"
kill -KILL "$MB_DAEMON_PID"
wait "$MB_DAEMON_PID" 2>/dev/null || true
MB_DAEMON_PID=
touch "$MB_TMP/go"
rc=0; wait "$prog" || rc=$?
cat "$MB_TMP/out"
[ $rc = 0 ] || fail "the program exited with $rc after the daemon died"
grep -q '^ok$' "$MB_TMP/out" || fail "wrong result after the daemon died"
pass "daemon killed: the program went on from glibc with the right result"
