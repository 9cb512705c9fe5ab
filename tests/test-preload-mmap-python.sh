#!/bin/bash
# SPDX-License-Identifier: MIT
# python3's own heap under membroker-run: pymalloc maps its arenas with
# mmap() itself, and they are the tenant's.  A workload of dicts of lists
# and tuples, a sort, small dicts and a set of tuples (about 430 MiB under
# glibc):
#   - in a tenant without limits it prints exactly what it prints without
#     the shim, and the tenant's MemoryPeak is its anonymous memory under
#     glibc within 10%;
#   - under MemoryMax=64M it does not run to the end: MemoryError, max and
#     oom counted, MemoryPeak within the limit, its RSS never above the
#     limit plus 32 MiB, and one line on stderr says which limit refused;
#   - under MemoryMax=64M with OOMPolicy=kill it is killed (oom_kill).
# All figures are read on the bus.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/preload-lib.sh"
preload_check
need_program python3
need_program /usr/bin/time
PY=$(command -v python3)
M=1048576

bus_setup "Capacity=1G"
mb_write_tenant big "Path=big"
mb_write_tenant lim "Path=lim" "MemoryMax=64M"
mb_write_tenant kill "Path=kill" "MemoryMax=64M" "OOMPolicy=kill"
bus_run

cat >"$MB_TMP/work.py" <<'PYEOF'
import sys
n = int(sys.argv[1])
d = {}
for i in range(n):
    d['k%d' % i] = [i, str(i), (i, i * 2)]
keys = sorted(d, key=lambda k: (len(d[k][1]), k))
small = [{'a': i, 'b': str(i)} for i in range(n // 20)]
s = set((i, str(i)) for i in range(n // 2))
print(len(d), keys[0], keys[-1], len(small), len(s), sum(len(v[1]) for v in d.values()))
st = dict(l.split(':', 1) for l in open('/proc/self/status'))
print('status', *(int(st[k].split()[0]) for k in ('VmHWM', 'RssFile')), file=sys.stderr)
PYEOF
N=850000

# Without the shim: the output to match, and the anonymous memory at the
# peak (VmHWM less the file pages, KiB).
expected=$("$PY" "$MB_TMP/work.py" $N 2>"$MB_TMP/glibc.err")
read -r _ hwm file < <(grep '^status ' "$MB_TMP/glibc.err")
anon=$(((hwm - file) * 1024))
echo "glibc: $expected; anonymous memory at the peak $((anon / M)) MiB"
[ "$anon" -gt $((400 * M)) ] || fail "the workload needs only $((anon / M)) MiB under glibc"

out=$(mbrun big "$PY" "$MB_TMP/work.py" $N 2>"$MB_TMP/big.err")
cat "$MB_TMP/big.err"
assert_eq "$expected" "$out" "the output in a tenant without limits"
peak=$(tenant_prop big MemoryPeak)
echo "MemoryPeak of big: $((peak / M)) MiB"
[ "$peak" -ge $((anon * 9 / 10)) ] && [ "$peak" -le $((anon * 11 / 10)) ] ||
        fail "MemoryPeak $peak is not within 10% of the anonymous memory under glibc ($anon)"
pass "MemoryPeak $((peak / M)) MiB within 10% of glibc's $((anon / M)) MiB: pymalloc's arenas are counted"
wait_for 20 eval '[ "$(tenant_prop big MemoryCurrent)" = 0 ]' || fail "big keeps memory after the exit"

rc=0
out=$(mbrun lim /usr/bin/time -f 'maxrss %M' "$PY" "$MB_TMP/work.py" $N 2>"$MB_TMP/lim.err") || rc=$?
tail -5 "$MB_TMP/lim.err"
[ -z "$out" ] || fail "the workload ran to the end under MemoryMax=64M: $out"
grep -q '^MemoryError' "$MB_TMP/lim.err" || fail "no MemoryError"
grep -q "^membroker-run: tenant lim refused .*MemoryMax=64 MiB" "$MB_TMP/lim.err" ||
        fail "no line on stderr says which limit refused"
rss=$(sed -n 's/^maxrss //p' "$MB_TMP/lim.err")
[ -n "$rss" ] && [ $((rss * 1024)) -le $((96 * M)) ] || fail "the RSS reached $rss KiB, above MemoryMax= + 32 MiB"
peak=$(tenant_prop lim MemoryPeak)
[ "$peak" -le $((64 * M)) ] || fail "MemoryPeak $peak above MemoryMax=64M"
max=$(events_value lim max); oom=$(events_value lim oom)
[ "$max" -ge 1 ] && [ "$oom" -ge 1 ] || fail "max=$max oom=$oom not counted"
pass "MemoryError under MemoryMax=64M (exit $rc, RSS $((rss / 1024)) MiB, MemoryPeak $((peak / M)) MiB, max=$max oom=$oom)"
wait_for 20 eval '[ "$(tenant_prop lim MemoryCurrent)" = 0 ]' || fail "lim keeps memory after the exit"

rc=0
mbrun kill "$PY" "$MB_TMP/work.py" $N >/dev/null 2>&1 || rc=$?
[ $rc = $((128 + 9)) ] || fail "under OOMPolicy=kill python3 ended with $rc, not SIGKILL"
kills=$(events_value kill oom_kill)
[ "$kills" -ge 1 ] || fail "oom_kill=$kills"
pass "OOMPolicy=kill killed python3 (oom_kill=$kills)"
