#!/bin/bash
# HugePages=thp: each tenant's tmpfs instance is mounted huge=always, so a
# client that touches its 2 MiB pages maps them with PMDs (smaps shows
# FilePmdMapped/ShmemPmdMapped); HugePages=thp with another PageSize= is a
# configuration error, and a kernel that cannot give tmpfs huge pages stops
# start-up with a clear error (never 4 KiB pages instead).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

# 1. PageSize= other than 2M: file:line and the reason.
mb_write_broker_conf "Capacity=64M" "HugePages=thp" "PageSize=64K"
mb_write_tenant a "Path=a"
rc=0
timeout -s KILL 30 "$MEMBROKERD" --no-bus --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" \
        2>"$MB_TMP/page.err" || rc=$?
cat "$MB_TMP/page.err"
assert_eq 1 "$rc" "exit code with HugePages=thp and PageSize=64K"
grep -q 'membroker.conf:4: HugePages=thp needs PageSize=2M' "$MB_TMP/page.err" ||
        fail "the error does not say that HugePages=thp needs PageSize=2M"
pass "HugePages=thp with PageSize=64K is refused at membroker.conf:4"

mb_write_broker_conf "Capacity=64M" "HugePages=nope"
rc=0
timeout -s KILL 30 "$MEMBROKERD" --no-bus --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" \
        2>"$MB_TMP/bad.err" || rc=$?
assert_eq 1 "$rc" "exit code with HugePages=nope"
grep -q "membroker.conf:4: HugePages= must be no or thp, not 'nope'" "$MB_TMP/bad.err" || { cat "$MB_TMP/bad.err"; fail "bad value"; }
pass "HugePages=nope is refused"

# 2. The real thing, where the kernel can.
thp=/sys/kernel/mm/transparent_hugepage/shmem_enabled
mb_write_broker_conf "Capacity=64M" "HugePages=thp" "PageSize=2M"
if [ ! -r "$thp" ] || grep -q '\[deny\]' "$thp"; then
        rc=0
        timeout -s KILL 30 "$MEMBROKERD" --no-bus --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" \
                2>"$MB_TMP/thp.err" || rc=$?
        cat "$MB_TMP/thp.err"
        assert_eq 1 "$rc" "exit code without shmem huge pages"
        grep -q 'HugePages=thp, but' "$MB_TMP/thp.err" || fail "no clear error without shmem huge pages"
        [ ! -e "$MB_SOCK" ] || fail "a socket was created although start-up failed"
        pass "no shmem huge pages: start-up fails with a clear error"
        skip "the kernel has no shmem transparent huge pages ($thp: $(cat "$thp" 2>/dev/null || echo missing))"
fi
mb_start_daemon
grep -q 'huge=always' "$MB_TMP/daemon.log" || { cat "$MB_TMP/daemon.log"; fail "the daemon does not say its arenas are huge"; }

wire_bg "$MB_TMP/a.out" hello a charge 4 expect-ok write-pages 0x33 check-pages 0x33 touch "$MB_TMP/a.ready" hold
a=$MB_BG_PID
wait_for 30 test -e "$MB_TMP/a.ready" || { cat "$MB_TMP/a.out"; fail "the client did not write its pages"; }
cat "$MB_TMP/a.out"
grep -q ' page_size=2097152 ' "$MB_TMP/a.out" || fail "the pages are not 2 MiB"
# The arena mapping's entry in smaps: PMD-mapped kilobytes.
pmd=$(awk '/membroker-arena:a/ { in_arena = 1; next }
           /^[0-9a-f]+-[0-9a-f]+ / { in_arena = 0 }
           in_arena && /^(FilePmdMapped|ShmemPmdMapped):/ { n += $2 }
           END { print n + 0 }' "/proc/$a/smaps")
grep -A25 'membroker-arena:a' "/proc/$a/smaps" | grep -E 'Rss|PmdMapped' || true
[ "$pmd" -gt 0 ] || fail "the arena is not mapped with huge pages (FilePmdMapped/ShmemPmdMapped = 0 kB)"
pass "the client maps its arena pages with PMDs ($pmd kB)"
[ "$pmd" -ge $((4 * 2048)) ] || fail "only $pmd kB of the 4 pages written are PMD-mapped"
pass "all 4 pages of 2 MiB written are huge pages"

kill -TERM "$a"; wait "$a" 2>/dev/null || true
wait_for 30 eval '[ "$(mb_dump_state; mb_state a usage)" = 0 ]' || fail "a's pages were not returned"
mb_daemon_alive
mb_stop_clean
