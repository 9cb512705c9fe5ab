#!/bin/bash
# HugePages=hugetlbfs: each tenant's arena is a memfd of 2 MiB hugetlb pages.
# A client's pages are real hugetlb pages (its smaps counts them as
# Shared_Hugetlb, in 2 MiB kernel pages) taken from the pool when granted
# (free_hugepages drops by what is charged), zero when handed out (also
# after their former holder wrote them, and after a client wrote into free
# pages), and back in the pool once returned.  A charge the pool cannot
# supply fails with ENOMEM (no SIGBUS at the first touch).  A client cannot
# reserve pool pages past its tenant's limit + 2 x ChargeBatch (each arena
# is the file of a hugetlbfs instance of that size).  With no 2 MiB
# page in the pool, start-up fails with a clear error.
# Needs root: it reserves 16 pages (vm.nr_hugepages) for its run and puts
# the pool back as it was on exit.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/attack-lib.sh"

pool=/sys/kernel/mm/hugepages/hugepages-2048kB
[ -d "$pool" ] || skip "the kernel has no 2 MiB hugetlb pages ($pool missing)"
[ "$(id -u)" = 0 ] && [ -w "$pool/nr_hugepages" ] || skip "not root: cannot reserve hugetlb pages ($pool/nr_hugepages)"
orig_nr=$(cat "$pool/nr_hugepages")
orig_over=$(cat "$pool/nr_overcommit_hugepages")
hugetlb_exit() {
        local rc=$?
        set +e
        [ -n "$MB_DAEMON_PID" ] && kill -TERM "$MB_DAEMON_PID" 2>/dev/null && wait "$MB_DAEMON_PID" 2>/dev/null
        MB_DAEMON_PID=
        echo "$orig_over" >"$pool/nr_overcommit_hugepages"
        echo "$orig_nr" >"$pool/nr_hugepages"
        (exit $rc)
        mb_cleanup
}
trap hugetlb_exit EXIT
free_pages() { cat "$pool/free_hugepages"; }
start_fails() {
        local rc=0
        timeout -s KILL 30 "$MEMBROKERD" --no-bus --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" \
                2>"$MB_TMP/start.err" || rc=$?
        cat "$MB_TMP/start.err"
        assert_eq 1 "$rc" "exit code: $1"
        [ ! -e "$MB_SOCK" ] || fail "a socket was created although start-up failed"
}

mb_write_broker_conf "Capacity=64M" "PageSize=2M" "HugePages=hugetlbfs" "ChargeBatch=1"
mb_write_tenant a "Path=a"
mb_write_tenant lim "Path=lim" "MemoryMax=8M"

# 1. No page in the pool: a clear error, no start (only where the pool is
#    empty anyway: pages others reserved are left alone).
if [ "$orig_nr" = 0 ] && [ "$orig_over" = 0 ]; then
        start_fails "no hugetlb pages"
        grep -q 'HugePages=hugetlbfs: no 2 MiB pages reserved (vm.nr_hugepages=0' "$MB_TMP/start.err" ||
                fail "no clear error without reserved pages"
        pass "no 2 MiB page reserved: start-up fails and says so"
else
        echo "the pool holds $orig_nr pages (overcommit $orig_over): the empty-pool error is not checked"
fi

# 2. 16 pages reserved (32 MiB) for a broker of 64 MiB.
echo $((orig_nr + 16)) >"$pool/nr_hugepages"
free0=$(free_pages)
[ "$free0" -ge 16 ] || skip "the kernel could reserve only $free0 free 2 MiB pages (memory fragmented)"
mb_start_daemon
mb_dump_state
assert_eq hugetlbfs "$(mb_dump_field config backing)" "the arenas' backing"

wire_bg "$MB_TMP/a.out" hello a charge 4 expect-ok write-pages 0x5a check-pages 0x5a touch "$MB_TMP/a.ready" \
        wait-file "$MB_TMP/a.go" uncharge-all expect-ok touch "$MB_TMP/a.returned" hold
a=$MB_BG_PID
wait_for 30 test -e "$MB_TMP/a.ready" || { cat "$MB_TMP/a.out"; fail "the client did not write its pages"; }
grep -q ' page_size=2097152 ' "$MB_TMP/a.out" || fail "the pages are not 2 MiB"
assert_eq $((free0 - 4)) "$(free_pages)" "free 2 MiB pages while 4 are charged"
read -r kps hug < <(awk '/membroker-arena:a/ { in_arena = 1; next }
           /^[0-9a-f]+-[0-9a-f]+ / { in_arena = 0 }
           in_arena && /^KernelPageSize:/ { kps = $2 }
           in_arena && /^(Shared|Private)_Hugetlb:/ { n += $2 }
           END { print kps + 0, n + 0 }' "/proc/$a/smaps")
assert_eq 2048 "$kps" "KernelPageSize (kB) of the client's arena mapping"
assert_eq $((4 * 2048)) "$hug" "hugetlb kB the client maps for its 4 pages"
pass "the 4 pages written are hugetlb pages of 2 MiB"

touch "$MB_TMP/a.go"
wait_for 30 test -e "$MB_TMP/a.returned" || { cat "$MB_TMP/a.out"; fail "the client did not return its pages"; }
wait_for 30 eval '[ "$(free_pages)" = '"$free0"' ]' || fail "the returned pages did not go back to the pool ($(free_pages) free, not $free0)"
pass "the 4 returned pages are back in the pool"

# 3. Zero when handed out: the pages a wrote, and free pages a client wrote
#    into (it backs them from the pool until the grant or the audit punches them).
out=$(wire hello a charge 4 expect-ok check-pages 0 write-arena 8 4 0x66) || { echo "$out"; fail "pages handed out again are not zero"; }
grep -q '^grant pages=4 extents=1 first=0$' <<<"$out" || { echo "$out"; fail "b did not get the pages a returned"; }
out=$(wire hello a charge 12 expect-ok check-pages 0) || { echo "$out"; fail "pages written while free are not zero when handed out"; }
pass "pages handed out are zero: after their holder wrote them, and after a write while free"
wait_for 30 eval '[ "$(free_pages)" = '"$free0"' ]' || fail "pages written while free were not given back ($(free_pages) free, not $free0)"
pass "pages written while free are back in the pool"

# 4. More than the pool: ENOMEM for the charge, nothing taken from the pool.
out=$(wire hello a charge 20 expect-error ENOMEM) || { echo "$out"; fail "a charge beyond the pool did not fail with ENOMEM"; }
assert_eq "$free0" "$(free_pages)" "free 2 MiB pages after a charge the pool could not supply"
out=$(wire hello a charge 16 expect-ok write-pages 0x11 check-pages 0x11 uncharge-all expect-ok) ||
        { echo "$out"; fail "the whole pool could not be charged and written after that"; }
pass "a charge beyond the pool fails with ENOMEM; the whole pool is charged and written after it"

# 5. A client that maps its arena without MAP_NORESERVE makes the kernel
#    reserve hugetlb pages for the whole mapping (32 here), which would stay
#    reserved, kept from every other tenant, after it went.  The arena's own
#    hugetlbfs instance is sized to the tenant's limit + 2 x ChargeBatch (6
#    pages for "lim"): the kernel refuses that reservation.
echo $((orig_nr + 40)) >"$pool/nr_hugepages"
free1=$(free_pages)
[ "$free1" -ge 40 ] || skip "the kernel could reserve only $free1 free 2 MiB pages (memory fragmented)"
rc=0
out=$(WIRE_MAP_RESERVE=1 wire hello lim charge 1 expect-ok write-pages 0x11 2>&1) || rc=$?
echo "$out" | tail -2
resv=$(cat "$pool/resv_hugepages")
[ "$resv" -le 6 ] || fail "a client reserved $resv hugetlb pages for tenant lim, past its limit + 2 x ChargeBatch (6)"
[ "$rc" -ne 0 ] || fail "mapping the whole arena with reservations succeeded"
pass "a mapping that reserves the whole arena is refused ($resv pages reserved)"
out=$(wire hello lim charge 4 expect-ok write-pages 0x11 check-pages 0x11 uncharge-all expect-ok) ||
        { echo "$out"; fail "tenant lim cannot use its 4 pages"; }
wait_for 30 eval '[ "$(free_pages)" = '"$free1"' ]' || fail "lim's pages did not go back to the pool"
pass "tenant lim charges, writes and returns its 4 pages"
echo $((orig_nr + 16)) >"$pool/nr_hugepages"

kill -TERM "$a"; wait "$a" 2>/dev/null || true
wait_for 30 eval '[ "$(free_pages)" = '"$free0"' ] && [ "$(mb_dump_state; mb_state a usage)" = 0 ]' ||
        fail "left: $(free_pages) free pages (not $free0), usage $(mb_state a usage)"
pass "nothing charged, every page back in the pool"
mb_daemon_alive
mb_stop_clean
