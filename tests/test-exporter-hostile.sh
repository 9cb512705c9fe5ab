#!/bin/bash
# SPDX-License-Identifier: MIT
# membroker-exporter under hostile HTTP clients:
#  1. 16 connections that send "GET /metrics HTTP/1.1" and then one header
#     line every second, never ending the request (each line would reset an
#     idle timer): each is cut at the deadline of a whole request (10 s),
#     and 20 of 20 honest scrapes are answered with membroker_up 1 -- the
#     newest connection is served before idle ones.
#  2. The same with 2,000 such connections (fewer when the hard
#     RLIMIT_NOFILE does not allow it; the count is printed).
#  3. Any method but GET and HEAD gets 405, with a body or without.
# No timed assertion: the slowest honest scrape of each phase is printed.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

EXPORTER="$top_builddir/tools/membroker-exporter"
TRICKLE="$top_srcdir/tests/http-trickle.py"
command -v curl >/dev/null || skip "curl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=a"
bus_run

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
"$EXPORTER" --address="$MB_BUS_ADDRESS" --listen="127.0.0.1:$PORT" >>"$MB_TMP/exporter.log" 2>&1 &
EXPORTER_PID=$!
MB_CHILDREN+=("$EXPORTER_PID")
wait_for 20 curl -sf -o /dev/null "http://127.0.0.1:$PORT/" || { cat "$MB_TMP/exporter.log"; fail "no answer on $PORT"; }

# honest_scrapes N WHAT : N scrapes, each must say membroker_up 1
honest_scrapes() {
        local n=$1 what=$2 ok=0 worst=0 t0 t1 ms
        for i in $(seq "$n"); do
                t0=$(date +%s%N)
                if curl -s --max-time 60 "http://127.0.0.1:$PORT/metrics" >"$MB_TMP/scrape" &&
                        grep -qx 'membroker_up 1' "$MB_TMP/scrape"; then
                        ok=$((ok + 1))
                else
                        echo "scrape $i: $(head -c 200 "$MB_TMP/scrape")"
                fi
                t1=$(date +%s%N)
                ms=$(( (t1 - t0) / 1000000 ))
                [ "$ms" -gt "$worst" ] && worst=$ms
                sleep 0.2
        done
        echo "$what: $ok of $n honest scrapes answered with membroker_up 1 (slowest $worst ms)"
        [ "$ok" = "$n" ] || tail -20 "$MB_TMP/exporter.log"
        assert_eq "$n" "$ok" "honest scrapes answered ($what)"
}

# trickle_phase N : N trickling connections while 20 honest scrapes run
trickle_phase() {
        local n=$1 pid
        ( ulimit -n $((n + 64)) && exec python3 "$TRICKLE" 127.0.0.1 "$PORT" "$n" 1 ) >"$MB_TMP/trickle.out" 2>&1 &
        pid=$!
        MB_CHILDREN+=("$pid")
        wait_for 300 grep -q '^ready' "$MB_TMP/trickle.out" || { cat "$MB_TMP/trickle.out"; fail "the trickler did not start"; }
        # Past the request deadline (10 s), which a line now and then does
        # not move: by then each trickling connection was cut once.
        sleep 12
        honest_scrapes 20 "$n trickling connections"
        kill -TERM "$pid"
        wait "$pid" || true
        cat "$MB_TMP/trickle.out"
        cut=$(sed -n 's/^trickle cut=//p' "$MB_TMP/trickle.out")
        [ "${cut:-0}" -ge "$n" ] || fail "only ${cut:-0} of $n trickling connections were cut in 12 s"
        kill -0 "$EXPORTER_PID" || fail "the exporter died"
        pass "$n trickling connections: every honest scrape answered"
}

trickle_phase 16

want=2000
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=1048576
[ "$hard" -ge $((want + 128)) ] || want=$((hard - 128))
if [ "$want" -ge 64 ]; then
        trickle_phase "$want"
else
        echo "the hard RLIMIT_NOFILE ($hard) leaves too few descriptors for the large trickle: left out"
fi

# Methods: 405 whatever the body.
for m in POST PUT DELETE PATCH OPTIONS; do
        assert_eq 405 "$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' -X "$m" "http://127.0.0.1:$PORT/metrics")" \
                "$m without a body"
        assert_eq 405 "$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' -X "$m" --data 'a=1&b=2' \
                "http://127.0.0.1:$PORT/metrics")" "$m with a body"
done
assert_eq 405 "$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' -X POST --data-binary @/dev/null \
        -H 'Transfer-Encoding: chunked' "http://127.0.0.1:$PORT/metrics")" "POST with a chunked body"
pass "405 for any method but GET and HEAD, with a body or without"
assert_eq 200 "$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' -I "http://127.0.0.1:$PORT/metrics")" "HEAD"

kill -TERM "$EXPORTER_PID"
wait "$EXPORTER_PID" || fail "the exporter did not exit cleanly"
mb_stop_daemon
