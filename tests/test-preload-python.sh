#!/bin/bash
# SPDX-License-Identifier: MIT
# python3 under membroker-run: bytearray(50 MiB) raises the tenant's peak
# past 50 MiB and gives it back at exit; under MemoryMax=20M the same
# program gets MemoryError (malloc() returned NULL with ENOMEM) and the
# daemon counts max and oom; an allocation-heavy script computes the right
# result; os.fork() gives the child a private heap (the parent's objects
# are unchanged after the child overwrote its copies) and subprocess works.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/preload-lib.sh"
preload_check
need_program python3
PY=$(command -v python3)
preload_broker

mbrun t "$PY" -c 'b = bytearray(50 << 20); b[-1] = 1; print("ok", len(b))' | tee "$MB_TMP/out"
grep -q '^ok 52428800$' "$MB_TMP/out" || fail "python3 did not run"
mb_dump_state
peak=$(mb_state t peak)
echo "peak of t: $peak pages"
[ "$peak" -ge $((50 << 20 >> 12)) ] || fail "peak $peak pages is below 50 MiB"
pass "the tenant's peak passed 50 MiB ($peak pages)"
usage_back_to_zero t
pass "returned at exit"

# The same with the library's thread in the program.
out=$(MEMBROKER_PRELOAD_THREAD=1 mbrun t "$PY" -c 'import threading; b = bytearray(50 << 20); print("ok", threading.active_count())')
assert_eq "ok 1" "$out" "python3 with MEMBROKER_PRELOAD_THREAD=1 (the library's thread is not Python's)"
usage_back_to_zero t

rc=0
mbrun small "$PY" -c 'b = bytearray(50 << 20)' 2>"$MB_TMP/err" || rc=$?
cat "$MB_TMP/err"
[ $rc = 1 ] || fail "python3 exited with $rc, not 1"
grep -q MemoryError "$MB_TMP/err" || fail "no MemoryError"
mb_dump_state
max=$(mb_event small max); oom=$(mb_event small oom)
echo "small: max=$max oom=$oom"
[ "$max" -ge 1 ] && [ "$oom" -ge 1 ] || fail "max=$max oom=$oom not counted"
pass "MemoryError at MemoryMax=20M, max=$max oom=$oom counted"
usage_back_to_zero small

mbrun t "$PY" - <<'PYEOF' | tee "$MB_TMP/out"
import os, subprocess
d = {}
for i in range(200000):
    d[str(i)] = [i] * (i % 7)
s = sum(len(v) for v in d.values())
assert s == sum(i % 7 for i in range(200000)), s
a = [str(i) * 3 for i in range(100000)]
pid = os.fork()
if pid == 0:
    for i in range(len(a)):
        a[i] = 'child'
    junk = [bytes(1000) for _ in range(2000)]
    os._exit(0 if a[7] == 'child' else 3)
_, st = os.waitpid(pid, 0)
assert os.WEXITSTATUS(st) == 0, st
assert a[500] == '500500500' and a[99999] == '999999999999999', (a[500], a[99999])
out = subprocess.run(['sh', '-c', 'x=$(echo sub); echo $x'], capture_output=True, text=True).stdout
assert out == 'sub\n', out
print('ok', s)
PYEOF
grep -q '^ok ' "$MB_TMP/out" || fail "the script failed"
pass "dicts and lists, fork() with a private heap, subprocess"
usage_back_to_zero t
