#!/bin/bash
# Tenants are isolated: a client of tenant x never receives y's arena (another
# file, no fd of it in the process, none of x's data), while the
# clients of one tenant share one arena.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant x "Path=x"
mb_write_tenant y "Path=y"
mb_start_daemon

wire_bg "$MB_TMP/x1.out" hello x charge 4 write-pages 0xaa touch "$MB_TMP/x1.ready" hold
x1=$MB_BG_PID
wait_for 20 test -e "$MB_TMP/x1.ready" || fail "client x1 did not write its pages"

wire_bg "$MB_TMP/y1.out" hello y charge 4 check-pages 0 touch "$MB_TMP/y1.ready" hold
y1=$MB_BG_PID
wait_for 20 test -e "$MB_TMP/y1.ready" || { cat "$MB_TMP/y1.out"; fail "client y1 did not read zeroes"; }

cat "$MB_TMP/x1.out" "$MB_TMP/y1.out"
# The file: inode and device (each arena may be on a tmpfs instance of its own)
ino_x=$(sed -n 's/.* arena_ino=\([0-9]*\) arena_dev=\([0-9]*\).*/\2:\1/p' "$MB_TMP/x1.out")
ino_y=$(sed -n 's/.* arena_ino=\([0-9]*\) arena_dev=\([0-9]*\).*/\2:\1/p' "$MB_TMP/y1.out")
[ -n "$ino_x" ] && [ -n "$ino_y" ] || fail "no arena inode reported"
[ "$ino_x" != "$ino_y" ] || fail "x and y got the same arena (device:inode $ino_x)"
pass "x and y have different arenas ($ino_x, $ino_y)"
grep -q '^grant pages=4 extents=1 first=0$' "$MB_TMP/y1.out" || fail "y's pages are not pages 0..3 of its arena"
grep -q '^pages ok$' "$MB_TMP/y1.out" || fail "y's pages are not zero"
pass "y's pages 0..3 hold none of x's pages 0..3"

# What the processes really hold, seen from /proc.
ls -l "/proc/$y1/fd" | grep -q 'membroker-arena:y' || fail "y1 holds no arena of y"
! ls -l "/proc/$y1/fd" | grep -q 'membroker-arena:x' || fail "y1 holds an fd of x's arena"
! ls -l "/proc/$x1/fd" | grep -q 'membroker-arena:y' || fail "x1 holds an fd of y's arena"
pass "/proc/PID/fd: each client holds its own tenant's arena only"

# A second client of x shares x's arena and sees x1's data there.
out=$(wire hello x check-arena 0 4 0xaa)
echo "$out"
grep -q " arena_ino=${ino_x#*:} arena_dev=${ino_x%%:*} " <<<"$out" || fail "x2 did not get x's arena"
grep -q '^arena ok$' <<<"$out" || fail "x2 does not see x1's data"
pass "clients of one tenant share its arena"

kill -TERM "$x1" "$y1"
wait "$x1" "$y1" || true
mb_stop_clean
