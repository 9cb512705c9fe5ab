#!/bin/bash
# SPDX-License-Identifier: MIT
# Hostile peers all at once, for MB_SOAK_SEC seconds (20 in make check;
# "make soak" runs it longer), with honest clients throughout:
#  - 240 sessions of uid 65534 (under its MaxConnectionsPerUser=256) that
#    send Charge and empty Uncharge requests and never read a reply, each
#    one the daemon cuts opened again at once;
#  - a flood of half-open connections of the same uid (its cap refuses
#    them at accept());
#  - 16 connections trickling a request line by line to membroker-exporter.
# The honest side, of another uid and tenant: a client that attaches and
# charges, a GetTenant() on the bus, a scrape of the exporter, again and
# again.  Checked: the daemon's RSS grows by at most 64 MiB over its start,
# and is back within 16 MiB of it once the peers are gone (the time that
# took is printed); its descriptors stay under half its RLIMIT_NOFILE; the
# never-reading sessions are cut (the daemon's unread output per session
# and in total is bounded, guard.h); every honest attach, bus call and
# scrape succeeds, every scrape says membroker_up 1.  No timed assertion:
# the honest side's slowest figures are printed (bench-hostile measures
# them on a quiet host).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/attack-lib.sh"

mb_attack_prereqs
getent passwd daemon >/dev/null || skip "no user daemon"
command -v curl >/dev/null || skip "curl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
command -v prlimit >/dev/null || skip "prlimit (util-linux) is not installed"

SEC=${MB_SOAK_SEC:-20}
FLOOD=${MB_SOAK_FLOOD:-20000}
NOFILE=4096
EXPORTER="$top_builddir/tools/membroker-exporter"
TRICKLE="$top_srcdir/tests/http-trickle.py"
W="$MB_TMP/w"
mkdir -m 0777 "$W"
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=1048576
# The flood from as many processes as the hard RLIMIT_NOFILE needs.
per=$((hard - 64))
nproc=$(( (FLOOD + per - 1) / per ))
echo "soak: $SEC s, 240 never-reading sessions, $FLOOD half-open connections ($nproc processes), 16 trickling scrapers"

bus_setup "Capacity=256M"
mb_write_tenant mob "Path=mob" "AllowUsers=nobody" "MemoryMax=64M"
mb_write_tenant honest "Path=honest" "AllowUsers=daemon"
bus_run
prlimit --pid "$MB_DAEMON_PID" --nofile=$NOFILE:$NOFILE

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
"$EXPORTER" --address="$MB_BUS_ADDRESS" --listen="127.0.0.1:$PORT" >>"$MB_TMP/exporter.log" 2>&1 &
EXPORTER_PID=$!
MB_CHILDREN+=("$EXPORTER_PID")
wait_for 20 curl -sf -o /dev/null "http://127.0.0.1:$PORT/" || { cat "$MB_TMP/exporter.log"; fail "no exporter on $PORT"; }

rss_kib() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$MB_DAEMON_PID/status"; }
# Warm up the honest paths once, then take the start figure.
as_daemon() { setpriv --reuid="$(id -u daemon)" --regid="$(id -g daemon)" --clear-groups "$@"; }
as_daemon "$WIRE_CLIENT" --socket "$MB_SOCK" --name warm hello honest charge 8 expect-ok >/dev/null ||
        fail "the honest client cannot attach"
sleep 1
rss0=$(rss_kib)
echo "the daemon's RSS at the start: $((rss0 / 1024)) MiB"

# The daemon's RSS and descriptors, sampled every 50 ms until $W/stop.
( maxr=0 maxf=0
  while [ ! -e "$W/stop" ]; do
          r=$(rss_kib) f=$(ls "/proc/$MB_DAEMON_PID/fd" 2>/dev/null | wc -l)
          [ "${r:-0}" -gt "$maxr" ] && maxr=$r
          [ "$f" -gt "$maxf" ] && maxf=$f
          echo "$maxr $maxf" >"$W/sample"
          sleep 0.05
  done ) &
MB_CHILDREN+=($!)

# honest_loop NAME CMD... : CMD again and again until $W/stop; the slowest
# run (ms) and the count in $W/NAME.max, failures in $W/NAME.fail
honest_loop() {
        local name=$1; shift
        ( worst=0 n=0
          while [ ! -e "$W/stop" ]; do
                  t0=$(date +%s%N)
                  "$@" >"$W/$name.out" 2>&1 || { echo "run $n:"; cat "$W/$name.out"; } >>"$W/$name.fail"
                  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
                  n=$((n + 1))
                  [ "$ms" -gt "$worst" ] && worst=$ms
                  echo "$worst $n" >"$W/$name.max"
                  sleep 0.1
          done ) &
        MB_CHILDREN+=($!)
        HONEST+=($!)
}
scrape() { curl -s --max-time 60 "http://127.0.0.1:$PORT/metrics" | grep -qx 'membroker_up 1'; }
HONEST=()
honest_loop attach timeout -s KILL 120 setpriv --reuid="$(id -u daemon)" --regid="$(id -g daemon)" --clear-groups \
        "$WIRE_CLIENT" --socket "$MB_SOCK" --name honest hello honest charge 8 expect-ok
honest_loop bus timeout -s KILL 120 setpriv --reuid="$(id -u daemon)" --regid="$(id -g daemon)" --clear-groups \
        "$BUSCTL" --address="$MB_BUS_ADDRESS" call org.membroker1 /org/membroker1 org.membroker1.Manager GetTenant s honest
honest_loop scrape scrape

# The hostile peers.
as_nobody_bg "$W/noread.out" noread 240 mob "$SEC"
noread=$MB_BG_PID
# Its sessions first: the flood of the same uid then gets what its cap
# leaves (16 connections at most).
wait_for 60 grep -q '^noread opened=240$' "$W/noread.out" || { cat "$W/noread.out"; fail "the never-reading sessions did not open"; }
floods=()
left=$FLOOD
for ((k = 0; k < nproc; k++)); do
        n=$(( left < per ? left : per ))
        left=$((left - n))
        ( ulimit -n $((n + 64)) && exec setpriv --reuid=65534 --regid=65534 --clear-groups \
                "$WIRE_CLIENT" --socket "$MB_SOCK" --name flood flood "$n" flood-partial sleep $((SEC * 1000)) ) \
                >"$W/flood.$k.out" 2>&1 &
        floods+=($!)
        MB_CHILDREN+=($!)
done
python3 "$TRICKLE" 127.0.0.1 "$PORT" 16 1 >"$W/trickle.out" 2>&1 &
trickle=$!
MB_CHILDREN+=("$trickle")

wait "$noread" || { cat "$W/noread.out"; fail "the never-reading client failed"; }
kill -TERM "$trickle" "${floods[@]}" 2>/dev/null || true
wait "$trickle" "${floods[@]}" || true
touch "$W/stop"
for p in "${HONEST[@]}"; do wait "$p" || true; done
read -r maxr maxf <"$W/sample"
cat "$W/noread.out" "$W"/flood.*.out "$W/trickle.out"
mb_dump_state
echo "the daemon's connection counters: $(grep '^state: connections' "$MB_TMP/state.dump")"

# Back to where it started once the peers are gone.
t_end=$(date +%s%N)
back() { [ $(( $(rss_kib) - rss0 )) -le $((16 * 1024)) ]; }
[ "${MB_SANITIZED:-no}" = yes ] || wait_for 60 back || true
rss1=$(rss_kib)
echo "the daemon's RSS: $((rss0 / 1024)) MiB at the start, at most $((maxr / 1024)) MiB (+$(( (maxr - rss0) / 1024 )) MiB)" \
        "under the peers, $((rss1 / 1024)) MiB $(( ($(date +%s%N) - t_end) / 1000000 )) ms after they ended"
echo "the daemon's descriptors: at most $maxf of $NOFILE"
for name in attach bus scrape; do
        read -r worst n <"$W/$name.max"
        echo "honest $name: $n runs, the slowest $worst ms"
done
cut=$(sed -n 's/^noread .*closed=\([0-9]*\)$/\1/p' "$W/noread.out")
for name in attach bus scrape; do
        [ ! -s "$W/$name.fail" ] || { head -40 "$W/$name.fail"; fail "an honest $name failed"; }
done
if [ "${MB_SANITIZED:-no}" = yes ]; then
        # ASan keeps freed memory in its quarantine and never gives its
        # heap back: the RSS says nothing about the daemon's own bounds.
        echo "RSS bounds not checked: a sanitizer build (AddressSanitizer's allocator keeps what was freed)"
else
        [ $((maxr - rss0)) -le $((64 * 1024)) ] || fail "the daemon's RSS grew by $(( (maxr - rss0) / 1024 )) MiB under the peers"
        back || fail "the daemon's RSS stays $(( (rss1 - rss0) / 1024 )) MiB over its start after the peers are gone"
fi
[ "$maxf" -lt $((NOFILE / 2)) ] || fail "the daemon held $maxf descriptors, not under half its $NOFILE"
[ "${cut:-0}" -ge 1 ] || fail "no never-reading session was cut"
pass "soak of $SEC s: bounded RSS and descriptors, never-reading sessions cut ($cut), every honest request served"

mb_daemon_alive
kill -TERM "$EXPORTER_PID"
wait "$EXPORTER_PID" || fail "the exporter did not exit cleanly"
mb_stop_daemon
