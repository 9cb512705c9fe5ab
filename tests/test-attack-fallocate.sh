#!/bin/bash
# fallocate(fd, 0, 0, size) on the received arena fd: on the tenant's own
# tmpfs instance it fails with ENOSPC beyond what is charged plus the slack,
# and two tenants attacked at once cannot push the broker's real memory past
# Capacity=.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/attack-lib.sh"

mb_attack_prereqs
mb_write_broker_conf "Capacity=64M" "ChargeBatch=64"
mb_write_tenant a "Path=a" "AllowUsers=nobody"
mb_write_tenant b "Path=b" "AllowUsers=nobody"
mb_start_daemon
mb_need_tmpfs_backing
page=4096
capacity=$(( 64 * 1024 * 1024 ))
slack=$(( 2 * 64 * page ))

out=$(as_nobody hello a charge 1 expect-ok fallocate-arena print-backed) || { echo "$out"; fail "attacker a"; }
echo "$out"
grep -q '^fallocate error=ENOSPC$' <<<"$out" || fail "fallocate beyond the charge did not fail with ENOSPC"
backed=$(mb_field "$out" backed)
[ "$backed" -le $(( page + slack )) ] || fail "a's arena is backed by $backed bytes after the fallocate"
pass "fallocate fails with ENOSPC, backing $backed"

# Both tenants at once, each holding on to whatever it got.
as_nobody_bg "$MB_TMP/a.out" hello a charge 1 expect-ok fallocate-arena print-backed hold
pa=$MB_BG_PID
as_nobody_bg "$MB_TMP/b.out" hello b charge 1 expect-ok fallocate-arena print-backed hold
pb=$MB_BG_PID
wait_for 60 grep -q '^ready$' "$MB_TMP/a.out" || { cat "$MB_TMP/a.out"; fail "attacker a"; }
wait_for 60 grep -q '^ready$' "$MB_TMP/b.out" || { cat "$MB_TMP/b.out"; fail "attacker b"; }
cat "$MB_TMP/a.out" "$MB_TMP/b.out"
ba=$(mb_field "$(cat "$MB_TMP/a.out")" backed)
bb=$(mb_field "$(cat "$MB_TMP/b.out")" backed)
[ $(( ba + bb )) -le $(( capacity + 2 * slack )) ] ||
        fail "two tenants back $(( ba + bb )) bytes, more than Capacity= ($capacity) + slack"
[ $(( ba + bb )) -le $(( 2 * (page + slack) )) ] || fail "the two arenas are backed by $(( ba + bb )) bytes"
pass "two attacked tenants back $(( ba + bb )) bytes with Capacity=$capacity"
kill -TERM "$pa" "$pb"
wait "$pa" || true
wait "$pb" || true
mb_daemon_alive
mb_stop_clean
