#!/bin/bash
# SPDX-License-Identifier: MIT
# A session lives as long as the process that opened it.  An unprivileged
# client charges 6 MiB of its tenant's 8, hands its socket to a second
# process and exits: the session ends with the opener (everything it held is
# uncharged, the tenant's usage goes back to 0) although the second process
# still holds the socket, which the daemon closes.  With OOMPolicy=kill a
# later OOM in that tenant kills the live client that really holds the
# pages (through its pidfd), and nobody else: neither the process holding
# the handed-off socket nor an unrelated bystander of the same uid.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
[ "$(id -u)" = 0 ] || skip "needs root to run clients under another uid"
getent passwd nobody >/dev/null || skip "no user nobody"

mb_write_broker_conf "Capacity=64M" "ChargeBatch=16" "ReclaimTimeoutMSec=100"
mb_write_tenant shared "Path=shared" "MemoryMax=8M" "OOMPolicy=kill" "AllowUsers=nobody"   # 2048 pages
mb_start_daemon

# (setpriv itself in the background, so that $! is the process)
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
# Files the unprivileged processes write.
W="$MB_TMP/w"
mkdir -m 0777 "$W"

# The attacker: 1536 pages (6 MiB), then its socket goes to a child and the
# opener exits.  The child reports when the daemon closed its socket.
as_nobody "$WIRE_CLIENT" --socket "$MB_SOCK" --name attacker hello shared charge 1536 expect-ok \
        handoff "$W/holder.pid" touch "$W/handed" \
        read-error expect-error ESRCH expect-close touch "$W/closed" hold \
        >"$MB_TMP/attacker.out" 2>&1 || { cat "$MB_TMP/attacker.out"; fail "the attacker did not charge"; }
wait_for 20 test -s "$W/holder.pid" || fail "no socket holder"
holder=$(cat "$W/holder.pid")
MB_CHILDREN+=("$holder")
wait_for 20 test -e "$W/handed" || { cat "$MB_TMP/attacker.out"; fail "the hand-off did not happen"; }
pass "the opener exited, pid $holder holds its socket"

usage_is_zero() { mb_dump_state; [ "$(mb_state shared usage)" = 0 ]; }
wait_for 30 usage_is_zero || fail "the session outlived its opener: tenant usage $(mb_state shared usage) pages"
pass "the session ended with its opener: tenant usage 0"
wait_for 30 test -e "$W/closed" || { cat "$MB_TMP/attacker.out"; fail "the handed-off socket stays open"; }
kill -0 "$holder" || fail "the socket holder died"
pass "the daemon closed the socket the second process holds; that process lives on"

# An unrelated process of the same uid, and a live client holding 4 MiB.
setpriv --reuid=65534 --regid=65534 --clear-groups sleep 600 &
bystander=$!
MB_CHILDREN+=("$bystander")
setpriv --reuid=65534 --regid=65534 --clear-groups "$WIRE_CLIENT" --socket "$MB_SOCK" --name victim hello shared charge 1024 expect-ok hold \
        >"$MB_TMP/victim.out" 2>&1 &
victim=$!
MB_CHILDREN+=("$victim")
wait_for 20 grep -q '^ready' "$MB_TMP/victim.out" || { cat "$MB_TMP/victim.out"; fail "the victim did not charge"; }

# 1024 + 1200 > 2048 with nothing reclaimable from raw clients: OOM kill.
out=$(timeout -s KILL 120 setpriv --reuid=65534 --regid=65534 --clear-groups \
        "$WIRE_CLIENT" --socket "$MB_SOCK" --name newcomer hello shared charge 1200 expect-ok) ||
        { echo "$out"; fail "the charge that needed room failed"; }
rc=0
wait "$victim" || rc=$?
assert_eq 137 "$rc" "exit status of the client holding the pages (SIGKILL)"
mb_dump_state
assert_eq 1 "$(mb_event_local shared oom_kill)" "OOM kills counted in shared"
kill -0 "$bystander" || fail "the bystander was killed"
kill -0 "$holder" || fail "the holder of the handed-off socket was killed"
pass "only the live client holding the pages was killed"

mb_dump_state
assert_eq 0 "$(mb_state shared usage)" "usage once every client left"

# One trust domain: the first client of a second uid in the tenant is
# logged, once.
# reads the daemon's log: the notice to the operator that two uids share a tenant is the promise
assert_eq 0 "$(grep -c 'tenant shared has clients of uid' "$MB_TMP/daemon.log" || true)" "trust notices with one uid"
wire --name root1 hello shared charge 1 expect-ok >/dev/null || fail "root cannot attach"
wire --name root2 hello shared charge 1 expect-ok >/dev/null || fail "root cannot attach"
grep 'tenant shared has clients of uid' "$MB_TMP/daemon.log"
assert_eq 1 "$(grep -c 'tenant shared has clients of uid 65534 and uid 0: .* one trust domain' "$MB_TMP/daemon.log" || true)" \
        "trust notices once a second uid attached"
mb_daemon_alive
mb_stop_clean
