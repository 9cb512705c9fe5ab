#!/bin/bash
# HugePages=thp: each tenant's tmpfs instance is mounted huge=always, so a
# client that touches its 2 MiB pages maps them with PMDs (smaps shows
# FilePmdMapped/ShmemPmdMapped), returned pages are freed and handed out
# again zero; HugePages=thp with another PageSize= is a configuration
# error, and a kernel that cannot give tmpfs huge pages (shmem_enabled set
# to deny: as root the test sets it for a moment and puts it back) stops
# start-up with a clear error (never 4 KiB pages instead).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/attack-lib.sh"

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
grep -q "membroker.conf:4: HugePages= must be no, thp or hugetlbfs, not 'nope'" "$MB_TMP/bad.err" || { cat "$MB_TMP/bad.err"; fail "bad value"; }
pass "HugePages=nope is refused"

# 2. shmem_enabled set to "deny" (root only; put back on exit): no tmpfs
#    huge pages, so a clear error and no start.
thp=/sys/kernel/mm/transparent_hugepage/shmem_enabled
[ -r "$thp" ] || skip "the kernel has no shmem transparent huge pages ($thp missing)"
orig_thp=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$thp")
mb_write_broker_conf "Capacity=64M" "HugePages=thp" "PageSize=2M"
start_fails() {
        local rc=0
        timeout -s KILL 30 "$MEMBROKERD" --no-bus --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" \
                2>"$MB_TMP/thp.err" || rc=$?
        cat "$MB_TMP/thp.err"
        assert_eq 1 "$rc" "exit code without shmem huge pages"
        grep -q "HugePages=thp: $thp is 'deny'" "$MB_TMP/thp.err" || fail "no clear error without shmem huge pages"
        [ ! -e "$MB_SOCK" ] || fail "a socket was created although start-up failed"
        pass "shmem_enabled is deny: start-up fails with a clear error"
}
if [ "$orig_thp" = deny ]; then
        start_fails
        skip "the kernel gives no tmpfs huge pages ($thp: deny)"
elif [ "$(id -u)" = 0 ] && [ -w "$thp" ] && grep -qw deny "$thp"; then
        thp_exit() {
                local rc=$?
                set +e
                echo "$orig_thp" >"$thp"
                (exit $rc)
                mb_cleanup
        }
        trap thp_exit EXIT
        echo deny >"$thp"
        start_fails
        echo "$orig_thp" >"$thp"
        trap mb_cleanup EXIT
else
        echo "not root, or no deny setting: the error without tmpfs huge pages is not checked"
fi

# 3. The real thing: tmpfs huge=always gives huge pages whatever
#    shmem_enabled says but deny (it is "$orig_thp" here).
mb_start_daemon
mb_dump_state
assert_eq tmpfs-huge "$(mb_dump_field config backing)" "the arenas' backing"

wire_bg "$MB_TMP/a.out" hello a charge 4 expect-ok write-pages 0x33 check-pages 0x33 touch "$MB_TMP/a.ready" \
        wait-file "$MB_TMP/a.go" uncharge-all expect-ok touch "$MB_TMP/a.returned" hold
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

# 4. Returned: punched, the arena backs nothing; handed out again: zero.
touch "$MB_TMP/a.go"
wait_for 30 test -e "$MB_TMP/a.returned" || { cat "$MB_TMP/a.out"; fail "the client did not return its pages"; }
wait_for 30 eval '[ "$(mb_now a arena_backed)" = 0 ]' || fail "the returned huge pages still back $(mb_state a arena_backed) bytes"
pass "the 4 returned huge pages are freed"
out=$(wire hello a charge 4 expect-ok check-pages 0 print-backed) || { echo "$out"; fail "huge pages handed out again are not zero"; }
grep -q '^grant pages=4 extents=1 first=0$' <<<"$out" || { echo "$out"; fail "b did not get the pages a returned"; }
pass "huge pages handed out again are zero"

kill -TERM "$a"; wait "$a" 2>/dev/null || true
wait_for 30 eval '[ "$(mb_dump_state; mb_state a usage)" = 0 ]' || fail "a's pages were not returned"
mb_daemon_alive
mb_stop_clean
