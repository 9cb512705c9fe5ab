#!/bin/bash
# SPDX-License-Identifier: MIT
# Restart without losing memory with HugePages=hugetlbfs: the arenas are
# memfds of hugetlb pages in the fd store; after a SIGKILL the next daemon
# takes them back as hugetlb arenas (pages granted after the restart are
# allocated from the pool, returned ones go back to it), the client
# reconnects by itself, usage is what it was and every byte reads back.
# Needs root: it reserves 16 pages (vm.nr_hugepages) and puts the pool back.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/service-lib.sh"

pool=/sys/kernel/mm/hugepages/hugepages-2048kB
[ -d "$pool" ] || skip "the kernel has no 2 MiB hugetlb pages ($pool missing)"
[ "$(id -u)" = 0 ] && [ -w "$pool/nr_hugepages" ] || skip "not root: cannot reserve hugetlb pages ($pool/nr_hugepages)"
command -v "$BUSCTL" >/dev/null || skip "busctl is not installed"
orig_nr=$(cat "$pool/nr_hugepages")
hugetlb_exit() {
        local rc=$?
        set +e
        [ -n "$MB_DAEMON_PID" ] && kill -TERM "$MB_DAEMON_PID" 2>/dev/null && wait "$MB_DAEMON_PID" 2>/dev/null
        for p in "${MB_CHILDREN[@]}"; do kill -9 "$p" 2>/dev/null; done
        echo "$orig_nr" >"$pool/nr_hugepages"
        (exit $rc)
        mb_cleanup
}
trap hugetlb_exit EXIT
free_pages() { cat "$pool/free_hugepages"; }

echo $((orig_nr + 16)) >"$pool/nr_hugepages"
free0=$(free_pages)
[ "$free0" -ge 16 ] || skip "the kernel could reserve only $free0 free 2 MiB pages (memory fragmented)"

mb_write_broker_conf "Capacity=32M" "PageSize=2M" "HugePages=hugetlbfs" "ChargeBatch=2"
mb_write_tenant a "Path=a" "MemoryMax=24M"
mb_start_bus
mb_sd_start --restart 1 -- --address "$MB_BUS_ADDRESS"
mb_load_bg hold-a --tenant a --hold 8M
la=$MB_BG_PID
mb_wait_holding hold-a
before=$(mb_usage a)
[ "$before" -ge $((8 << 20)) ] || fail "usage of a before the restart: $before"
used=$((free0 - $(free_pages)))
[ $((used * 2097152)) -ge "$before" ] || fail "$used hugetlb pages in use for $before bytes charged"
pass "a holds $before bytes in $used hugetlb pages"

pid=$(mb_sd_main_pid)
kill -KILL "$pid"
mb_sd_wait_ready 2
[ "$(mb_sd_main_pid)" != "$pid" ] || fail "the harness did not restart membrokerd"
wait_for 30 mb_has_clients a || { tail -20 "$MB_TMP/daemon.log"; fail "the client of a did not reconnect"; }
assert_eq "$before" "$(mb_usage a)" "usage of a after the restart"
assert_eq $((free0 - used)) "$(free_pages)" "free hugetlb pages after the restart"

# A new client: its pages come from the pool (the restored arena is a
# hugetlb one) and go back to it.
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant a --hold 4M --seconds 0 >"$MB_TMP/new.out" 2>&1 ||
        { cat "$MB_TMP/new.out"; fail "a new client cannot allocate after the restart"; }
pass "a new client allocates after the restart: $(grep verify= "$MB_TMP/new.out")"
wait_for 30 eval '[ "$(free_pages)" = $((free0 - used)) ]' || fail "the new client's pages did not go back to the pool"
# Taken for a shmem arena, the restored one would find data everywhere
# (hugetlbfs has no SEEK_DATA) and report the new pages as an overrun.
sleep 0.5 # the audit runs ten times a second
overruns=$(mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager GetEvents s a | tr ' ' '\n' |
        awk 'prev == "\"overrun\"" { print } { prev = $0 }')
assert_eq 0 "$overruns" "overrun events of a"
pass "the restored arena grants its pages as hugetlb pages (no overrun)"

mb_finish_load hold-a "$la"
wait_for 20 mb_usage_is / 0 || fail "pages left after every client went: $(mb_usage /)"
wait_for 30 eval '[ "$(free_pages)" = '"$free0"' ]' || fail "$(free_pages) free hugetlb pages at the end, not $free0"
pass "everything returned at the end, every hugetlb page back in the pool"
