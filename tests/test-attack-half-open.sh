#!/bin/bash
# SPDX-License-Identifier: MIT
# 100,000 half-open connections of one unprivileged user (uid 65534), from
# as many processes as its hard RLIMIT_NOFILE needs: each connection sends
# half a frame and holds.  Connections that have not finished
# their Hello count in MaxConnectionsPerUser= from their accept(), on the
# main thread, before a worker sees them, so the daemon never holds more
# than the cap of that user's sockets: its descriptors, sampled throughout,
# stay under half its RLIMIT_NOFILE (4096 here).  An honest client of
# another uid and tenant attaches and charges again and again meanwhile.
# Then the global bound on connections before their Hello (a quarter of
# RLIMIT_NOFILE at most): EAGAIN over it, uid 0 exempt.
# No timed assertion: the honest client's slowest attach is printed (the
# figure on a quiet host is bench-hostile's).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/attack-lib.sh"

mb_attack_prereqs
getent passwd daemon >/dev/null || skip "no user daemon"
W="$MB_TMP/w"
mkdir -m 0777 "$W"

want=${MB_HALF_OPEN:-100000}
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=1048576
if [ "$hard" -lt $((want + 64)) ]; then
        ulimit -Hn $((want + 64)) 2>/dev/null || hard=$(ulimit -Hn)
fi
# As many attacking processes as the hard RLIMIT_NOFILE needs (one is
# enough where it may be raised), all of uid 65534.
per=$((hard - 64))
[ "$per" -ge 1024 ] || skip "the hard RLIMIT_NOFILE ($hard) leaves too few descriptors for the flood"
nproc=$(( (want + per - 1) / per ))
echo "the attacker opens $want half-open connections from $nproc processes (hard RLIMIT_NOFILE $hard)"

NOFILE=4096
mb_write_broker_conf "Capacity=64M" "FrameTimeoutSec=3600"
mb_write_tenant mob "Path=mob" "AllowUsers=nobody"
mb_write_tenant honest "Path=honest" "AllowUsers=daemon"
# The daemon runs with 4096 descriptors.
command -v prlimit >/dev/null || skip "prlimit (util-linux) is not installed"
mb_start_daemon
prlimit --pid "$MB_DAEMON_PID" --nofile=$NOFILE:$NOFILE
grep -Eq "^Max open files +$NOFILE " "/proc/$MB_DAEMON_PID/limits" || fail "the daemon's RLIMIT_NOFILE is not $NOFILE"

# The daemon's descriptors, sampled every 20 ms: the most seen so far in
# $W/fds.max.
( max=0
  while [ ! -e "$W/stop" ]; do
          n=$(ls "/proc/$MB_DAEMON_PID/fd" 2>/dev/null | wc -l)
          [ "$n" -gt "$max" ] && { max=$n; echo "$max" >"$W/fds.max"; }
          sleep 0.02
  done ) &
MB_CHILDREN+=($!)

# The honest client, attaching again and again until told to stop: the
# slowest attach in $W/honest.max (ms), failures in $W/honest.fail.
( worst=0 n=0
  while [ ! -e "$W/stop" ]; do
          t0=$(date +%s%N)
          if ! timeout -s KILL 120 setpriv --reuid="$(id -u daemon)" --regid="$(id -g daemon)" --clear-groups \
                  "$WIRE_CLIENT" --socket "$MB_SOCK" --name honest hello honest charge 8 expect-ok >"$W/honest.out" 2>&1; then
                  cat "$W/honest.out" >>"$W/honest.fail"
          fi
          ms=$(( ($(date +%s%N) - t0) / 1000000 ))
          n=$((n + 1))
          [ "$ms" -gt "$worst" ] && worst=$ms
          echo "$worst $n" >"$W/honest.max"
          sleep 0.05
  done ) &
honest=$!
MB_CHILDREN+=("$honest")

floods=()
left=$want
for ((k = 0; k < nproc; k++)); do
        n=$(( left < per ? left : per ))
        left=$((left - n))
        ( ulimit -n $((n + 64)) && exec setpriv --reuid=65534 --regid=65534 --clear-groups \
                "$WIRE_CLIENT" --socket "$MB_SOCK" --name flood flood "$n" flood-partial flood-count 256 hold ) \
                >"$W/flood.$k.out" 2>&1 &
        floods+=($!)
        MB_CHILDREN+=($!)
done
for ((k = 0; k < nproc; k++)); do
        wait_for 900 grep -q '^ready' "$W/flood.$k.out" || { cat "$W/flood.$k.out"; fail "flood $k did not finish"; }
done
cat "$W"/flood.*.out
sleep 1
touch "$W/stop"
wait "$honest" || true

sum() { sed -n "s/^flood $1=\([0-9]*\) .*/\1/p" "$W"/flood.*.out | awk '{ s += $1 } END { print s + 0 }'; }
opened=$(sum opened)
open=$(sum open)
assert_eq "$want" "$opened" "connections the attacker opened"
[ "$open" -le 256 ] || fail "the daemon keeps $open half-open connections of one uid"
maxfd=$(cat "$W/fds.max")
read -r worst attaches <"$W/honest.max"
echo "the daemon held at most $maxfd descriptors of its $NOFILE during $want half-open connections"
echo "the honest client attached $attaches times, the slowest in $worst ms"
[ "$maxfd" -lt $((NOFILE / 2)) ] || fail "the daemon held $maxfd descriptors, not under half its $NOFILE"
[ ! -s "$W/honest.fail" ] || { cat "$W/honest.fail"; fail "the honest client failed to attach"; }
pass "$want half-open connections: at most $maxfd of $NOFILE descriptors, the honest client served throughout"

mb_daemon_alive
kill -TERM "${floods[@]}"
wait "${floods[@]}" || true
mb_stop_clean

# The global bound on connections before their Hello, whatever their users:
# without a per-user cap and with 128 descriptors, a quarter of them (32,
# taken at the reload that follows the new limit).  Over it, EAGAIN; uid 0
# is exempt.
mb_write_broker_conf "Capacity=64M" "FrameTimeoutSec=3600" "MaxConnectionsPerUser=0"
mb_start_daemon
prlimit --pid "$MB_DAEMON_PID" --nofile=128:128
kill -HUP "$MB_DAEMON_PID"
wait_for 20 mb_dumped_ge config reloads 1 || fail "the reload did not finish"
as_nobody_bg "$W/incomplete.out" flood 100 flood-count 32 hold
wait_for 120 grep -q '^ready' "$W/incomplete.out" || { cat "$W/incomplete.out"; fail "the idle flood did not finish"; }
cat "$W/incomplete.out"
open=$(sed -n 's/^flood open=\([0-9]*\) .*/\1/p' "$W/incomplete.out")
# The wire client's own first connection is one of the 32.
[ "$open" -le 32 ] || fail "the daemon keeps $open connections before their Hello, over the bound of 32"
out=$(as_nobody read-error expect-error EAGAIN expect-close) || { echo "$out"; fail "no EAGAIN over the bound"; }
echo "$out"
grep -q 'reason=32 connections have not finished their Hello' <<<"$out" || fail "the reason does not name the bound"
out=$(wire --name root hello honest charge 1 expect-ok) || { echo "$out"; fail "uid 0 was refused"; }
pass "connections before their Hello: at most 32 with 128 descriptors, EAGAIN over it, uid 0 exempt"
kill -TERM "$MB_BG_PID"
wait "$MB_BG_PID" || true
mb_stop_clean
