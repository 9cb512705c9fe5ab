#!/bin/bash
# SPDX-License-Identifier: MIT
# No unprivileged user can starve the daemon of connections or descriptors.
#  1. One unprivileged process opens 11,000 idle connections (fewer when the
#     hard RLIMIT_NOFILE does not allow it; the count is printed):
#     MaxConnectionsPerUser=256 keeps at most 256 of its connections, the
#     rest get an EUSERS Error and are closed at once, the refusals are
#     logged at a bounded rate, and an honest client of another tenant and
#     uid still attaches.
#  2. The same with a Hello sent on every connection.
#  3. A daemon whose descriptors run out (a low RLIMIT_NOFILE and no
#     per-user cap) sheds the connections it cannot take instead of spinning
#     on accept() and logging every failure, and serves again once the flood
#     is gone.
# No timed assertion: the time the honest client took is printed.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
command -v prlimit >/dev/null || skip "prlimit (util-linux) is not installed"
[ "$(id -u)" = 0 ] || skip "needs root to run clients under other uids"
getent passwd nobody >/dev/null && getent passwd daemon >/dev/null || skip "no users nobody/daemon"

W="$MB_TMP/w"
mkdir -m 0777 "$W"

want=11000
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=1048576
if [ "$hard" -lt $((want + 64)) ]; then
        # Root may raise its hard limit up to fs.nr_open.
        ulimit -Hn $((want + 64)) 2>/dev/null || want=$((hard - 64))
fi
[ "$want" -ge 512 ] || skip "the hard RLIMIT_NOFILE ($hard) leaves too few descriptors to flood past MaxConnectionsPerUser=256"
echo "the attacker opens $want connections (hard RLIMIT_NOFILE $(ulimit -Hn))"

# Idle connections are closed FrameTimeoutSec= after they were accepted
# (test-attack-half-frame tests that).  Here the flood's connections must
# outlive the test however slow the host, or a late client finds the uid
# under its cap again.
mb_write_broker_conf "Capacity=64M" "FrameTimeoutSec=3600"
mb_write_tenant mob "Path=mob" "AllowUsers=nobody"
mb_write_tenant honest "Path=honest" "AllowUsers=daemon"
mb_start_daemon

# flood_start NAME N STEPS... : an unprivileged process opening N
# connections, then STEPS, then holding them all
flood_start() {
        local name=$1 n=$2; shift 2
        ( ulimit -n $((n + 32)) && exec setpriv --reuid=65534 --regid=65534 --clear-groups \
                "$WIRE_CLIENT" --socket "$MB_SOCK" --name "$name" flood "$n" "$@" hold ) >"$W/$name.out" 2>&1 &
        FLOOD_PID=$!
        MB_CHILDREN+=("$FLOOD_PID")
}

flood_wait() {
        wait_for 300 grep -q '^ready' "$W/$1.out" || { cat "$W/$1.out"; fail "the flood did not finish"; }
        cat "$W/$1.out"
}

flood_stop() {
        kill -TERM "$FLOOD_PID" 2>/dev/null || true
        wait "$FLOOD_PID" || true
}

# honest_attach WHAT : a client of another uid and tenant attaches and charges
honest_attach() {
        local t0 t1 out
        t0=$(date +%s%N)
        out=$(timeout -s KILL 300 setpriv --reuid="$(id -u daemon)" --regid="$(id -g daemon)" --clear-groups \
                "$WIRE_CLIENT" --socket "$MB_SOCK" --name honest hello honest charge 8 expect-ok) ||
                { echo "$out"; fail "the honest client did not attach ($1)"; }
        t1=$(date +%s%N)
        echo "the honest client attached in $(( (t1 - t0) / 1000000 )) ms ($1)"
}

# reads the daemon's log: how much it logs under a flood is the promise (refusals at a bounded rate)
# lines PATTERN : log lines matching PATTERN so far
lines() { grep -c "$1" "$MB_TMP/daemon.log" || true; }

# rate_bound SINCE : how many lines a kind of refusal may log from SINCE
# (date +%s) to now: a burst of 5 per 10 s interval begun (guard.c), one
# interval more for the one already open.  The bound follows the time the
# flood took, which a slow host stretches.
rate_bound() { echo $(( 5 * (($(date +%s) - $1) / 10 + 2) )); }

# ---- 1. idle connections ----
t_idle=$(date +%s)
flood_start idle "$want" flood-count 256
honest_attach "while the flood starts"
flood_wait idle
honest_attach "while the flood holds its connections"
open=$(sed -n 's/^flood open=\([0-9]*\) .*/\1/p' "$W/idle.out")
opened=$(sed -n 's/^flood opened=\([0-9]*\) .*/\1/p' "$W/idle.out")
assert_eq "$want" "$opened" "connections the attacker opened"
# At most the cap (the wire client's own first connection is one of them
# unless it came while the previous flood's were still being closed).
[ "$open" -le 256 ] || fail "the daemon keeps $open connections of one uid"
pass "the daemon keeps $open of $want connections of one uid"
assert_eq 0 "$(lines 'accept() failed')" "accept() failures logged"
refusals=$(lines 'MaxConnectionsPerUser')
echo "refusals logged in $refusals lines"
[ "$refusals" -ge 1 ] || fail "the refusals are not logged"
bound=$(rate_bound "$t_idle")
[ "$refusals" -le "$bound" ] || fail "$refusals log lines for the refusals in $(($(date +%s) - t_idle)) s: not rate-limited"
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$WIRE_CLIENT" --socket "$MB_SOCK" --name late \
        read-error expect-error EUSERS expect-close) || { echo "$out"; fail "no EUSERS Error over the cap"; }
echo "$out"
grep -q 'reason=.*MaxConnectionsPerUser=256' <<<"$out" || fail "the reason does not name the cap"
mb_daemon_alive
flood_stop
# Its connections are gone: the uid may connect again, once the daemon has
# seen them close (their hang-ups and a new connection race in its loops).
again() {
        setpriv --reuid=65534 --regid=65534 --clear-groups "$WIRE_CLIENT" --socket "$MB_SOCK" --name again \
                hello mob charge 1 expect-ok >"$W/again.out" 2>&1
}
wait_for 60 again || { cat "$W/again.out"; fail "the uid cannot connect after its flood"; }
pass "idle flood"

# ---- 2. connections that say Hello ----
flood_start hello "$want" flood-hello mob flood-count 256
honest_attach "while the flood starts"
flood_wait hello
honest_attach "while the flood holds its attached connections"
open=$(sed -n 's/^flood open=\([0-9]*\) .*/\1/p' "$W/hello.out")
[ "$open" -le 256 ] || fail "the daemon keeps $open connections of one uid"
assert_eq 0 "$(lines 'accept() failed')" "accept() failures logged"
mb_daemon_alive
flood_stop
pass "attached flood"

# ---- 3. out of descriptors ----
mb_stop_clean
mb_write_broker_conf "Capacity=64M" "MaxConnectionsPerUser=0"
mb_start_daemon
prlimit --pid "$MB_DAEMON_PID" --nofile=200:200
before=$(wc -l <"$MB_TMP/daemon.log")
t_nofd=$(date +%s)
# 3,000 connections, or what the hard RLIMIT_NOFILE allows: anything well
# past the daemon's 200 runs it out of descriptors.
n_nofd=$(( want < 3000 ? want : 3000 ))
echo "the attacker opens $n_nofd connections to a daemon limited to 200 descriptors"
flood_start nofd "$n_nofd" flood-count "$n_nofd"
flood_wait nofd
# The daemon sheds while the flood holds its descriptors; give it 3 s of
# that, then look at what it logged meanwhile.
sleep 3
tail -n +"$((before + 1))" "$MB_TMP/daemon.log" >"$MB_TMP/nofd.log"
echo "while out of descriptors the daemon logged $(wc -l <"$MB_TMP/nofd.log") lines:"
sort "$MB_TMP/nofd.log" | sed 's/[0-9][0-9]*/N/g' | uniq -c | sort -rn | head
n=$(grep -c 'accept' "$MB_TMP/nofd.log" || true)
bound=$(rate_bound "$t_nofd")
[ "$n" -le "$bound" ] || fail "$n log lines about accept() in $(($(date +%s) - t_nofd)) s: not rate-limited"
grep -q 'out of file descriptors' "$MB_TMP/nofd.log" || fail "the shedding is not logged"
mb_daemon_alive
flood_stop
honest_attach "after the flood that exhausted the descriptors"
mb_daemon_alive
mb_stop_clean
