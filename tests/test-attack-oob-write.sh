#!/bin/bash
# A client that holds one page writes 200 MiB of pages it does not hold
# through its mapping of the arena.  The tenant's arena lives on its own
# tmpfs instance sized to what is charged plus a slack, so the kernel stops
# the writer (SIGBUS) at that bound; the audit counts an overrun (local and
# hierarchical) and punches the pages nobody holds; once the writer is gone
# the tenant's arena is backed by nothing and its usage is 0.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/attack-lib.sh"

mb_attack_prereqs
mb_write_broker_conf "Capacity=1G" "ChargeBatch=64"
mb_write_tenant g "Path=g"
mb_write_tenant a "Path=g/a" "MemoryMax=16M" "AllowUsers=nobody"
mb_start_daemon
mb_need_tmpfs_backing
page=4096
pages_200m=$(( 200 * 1024 * 1024 / page ))
# charged (1 page) + at most 2 x ChargeBatch of slack
bound=$(( (1 + 2 * 64) * page ))

rc=0
as_nobody hello g/a charge 1 expect-ok write-arena 1000 "$pages_200m" 0x42 print-backed >"$MB_TMP/w1" 2>&1 || rc=$?
cat "$MB_TMP/w1"
assert_eq 135 "$rc" "exit status of the writer (128 + SIGBUS)"

out=$(as_nobody hello g/a charge 1 expect-ok probe-write 1000 "$pages_200m" 0x42) || { echo "$out"; fail "probe"; }
echo "$out"
assert_eq 1 "$(mb_field "$out" sigbus)" "the kernel stopped the second writer"
backed=$(mb_field "$out" backed)
[ "$backed" -le "$bound" ] || fail "the arena was backed by $backed bytes, more than charged + slack ($bound)"
pass "backing $backed <= charged + slack ($bound)"

wait_for 30 eval '[ "$(mb_now g/a arena_backed)" = 0 ]' ||
        fail "the arena is still backed by $(mb_now g/a arena_backed) bytes after the writers exited"
pass "the arena is backed by nothing after the writers exited"
assert_eq 0 "$(mb_now g/a usage)" "usage of g/a"
wait_for 10 eval '[ "$(mb_now g/a unaccounted)" = 0 ]' || fail "unaccounted of g/a is not 0"
mb_dump_state
[ "$(mb_event_local g/a overrun)" -ge 1 ] || fail "no overrun event counted on g/a"
[ "$(mb_event g/a overrun)" -ge 1 ] || fail "no hierarchical overrun event on g/a"
[ "$(mb_event g overrun)" -ge 1 ] || fail "the overrun does not show in g's hierarchical events"
assert_eq 0 "$(mb_event_local g overrun)" "g's local overrun events"
pass "overrun counted: $(mb_event_local g/a overrun) on g/a"

# The tenant still works for honest clients.
out=$(as_nobody hello g/a charge 100 expect-ok write-pages 0x11 check-pages 0x11) || { echo "$out"; fail "honest client"; }
pass "an honest client of g/a still gets and uses pages"
mb_daemon_alive
mb_stop_clean
