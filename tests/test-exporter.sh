#!/bin/bash
# SPDX-License-Identifier: MIT
# membroker-exporter serves the broker's figures at /metrics in the
# Prometheus text format, read over D-Bus at every scrape: scraped with curl,
# promtool check metrics accepts the answer, the values are the bus's, a
# stopped broker is membroker_up 0 (the scrape itself still succeeds), other
# paths are 404, and it takes a socket from systemd (sd_listen_fds) as
# membroker-exporter.socket passes it.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
# Exact usage after a known allocation is what this checks: no charging
# ahead of need (tests/test-client-refill.sh covers it).
export MEMBROKER_REFILL=0

EXPORTER="$top_builddir/tools/membroker-exporter"
command -v curl >/dev/null || skip "curl is not installed"
command -v promtool >/dev/null || skip "promtool (Debian package prometheus) is not installed"

"$EXPORTER" --version | grep -q '^membroker-exporter [0-9]' || fail "--version"
expect_fail "not \[ADDRESS:\]PORT" "$EXPORTER" --listen=localhost:http --address=unix:path=/nonexistent

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a" "MemoryMax=1M"
mb_write_tenant b "Path=app/b"
bus_run
load_start b app/b 2M
fresh() { [ "$(stat_value app/b pages)" = $((2 << 20)) ]; }
wait_for 20 fresh || fail "stats of app/b never fresh"

# A free port of the loopback (the kernel's choice, then released).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# exporter_start ARGS... : start the exporter, wait until it answers on $PORT
exporter_start() {
        "$@" >>"$MB_TMP/exporter.log" 2>&1 &
        EXPORTER_PID=$!
        wait_for 20 curl -sf -o /dev/null "http://127.0.0.1:$PORT/" || { cat "$MB_TMP/exporter.log"; fail "no answer on $PORT"; }
}
exporter_stop() { kill "$EXPORTER_PID"; wait "$EXPORTER_PID" || fail "the exporter did not exit cleanly"; }

check_scrape() {
        curl -sf -D "$MB_TMP/headers" "http://127.0.0.1:$PORT/metrics" >"$MB_TMP/metrics" || fail "scrape of /metrics"
        grep -qi '^content-type: text/plain; version=0.0.4' "$MB_TMP/headers" || fail "content type: $(cat "$MB_TMP/headers")"
        promtool check metrics <"$MB_TMP/metrics" || fail "promtool check metrics"
        grep -qx 'membroker_up 1' "$MB_TMP/metrics" || fail "membroker_up is not 1"
        grep -qx "membroker_memory_current_bytes{tenant=\"app/b\"} $((2 << 20))" "$MB_TMP/metrics" ||
                fail "app/b's usage: $(grep memory_current "$MB_TMP/metrics")"
        grep -qx "membroker_memory_max_bytes{tenant=\"app/a\"} $((1 << 20))" "$MB_TMP/metrics" || fail "app/a's max"
        grep -qx 'membroker_clients{tenant="app/b"} 1' "$MB_TMP/metrics" || fail "app/b's clients"
        grep -q '^membroker_memory_events_total{tenant="app/a",event="max"} ' "$MB_TMP/metrics" || fail "events"
        pass "scrape on $1: promtool accepts it, the figures are the bus's"
}

PORT=$(free_port)
exporter_start "$EXPORTER" --address="$MB_BUS_ADDRESS" --listen="127.0.0.1:$PORT"
check_scrape "--listen=127.0.0.1:$PORT"
assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/nope")" "an unknown path"
assert_eq 405 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/metrics")" "POST"
# Several scrapes, each on a bus connection of its own.
for i in 1 2 3; do curl -sf "http://127.0.0.1:$PORT/metrics" | grep -qx 'membroker_up 1' || fail "scrape $i"; done
pass "repeated scrapes"

# The broker gone: a valid answer that says so.
load_stop b
mb_stop_daemon
curl -sf "http://127.0.0.1:$PORT/metrics" >"$MB_TMP/down" || fail "scrape with the broker stopped"
promtool check metrics <"$MB_TMP/down" || fail "promtool on the broker-down answer"
grep -qx 'membroker_up 0' "$MB_TMP/down" || fail "membroker_up is not 0: $(cat "$MB_TMP/down")"
pass "a stopped broker is membroker_up 0"
exporter_stop

# Socket activation: the socket comes from systemd's protocol (LISTEN_FDS).
mb_start_daemon
load_start b app/b 2M
wait_for 20 fresh || fail "stats of app/b never fresh after the restart"
command -v systemd-socket-activate >/dev/null || skip "systemd-socket-activate (systemd) is not installed"
PORT=$(free_port)
exporter_start systemd-socket-activate -l "127.0.0.1:$PORT" "$EXPORTER" --address="$MB_BUS_ADDRESS"
check_scrape "a socket from systemd"
grep -q "serving /metrics on the socket systemd passed" "$MB_TMP/exporter.log" || fail "did not use the passed socket"
exporter_stop
