#!/bin/bash
# SPDX-License-Identifier: MIT
# A real Prometheus scrapes membroker-exporter: prometheus runs on the
# loopback with a temporary configuration that scrapes the exporter every
# second, and its HTTP API answers a query for membroker_memory_current_bytes
# with the tenant's usage as the bus reports it (and the target is up).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

EXPORTER="$top_builddir/tools/membroker-exporter"
command -v prometheus >/dev/null || skip "prometheus (Debian package prometheus) is not installed"
command -v curl >/dev/null || skip "curl is not installed"

bus_setup "Capacity=64M"
mb_write_tenant b "Path=app/b"
bus_run
load_start b app/b 2M
fresh() { [ "$(stat_value app/b pages)" = $((2 << 20)) ]; }
wait_for 20 fresh || fail "stats of app/b never fresh"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
EPORT=$(free_port)
"$EXPORTER" --address="$MB_BUS_ADDRESS" --listen="127.0.0.1:$EPORT" >"$MB_TMP/exporter.log" 2>&1 &
exporter_pid=$!
wait_for 20 curl -sf -o /dev/null "http://127.0.0.1:$EPORT/metrics" || fail "the exporter does not answer"

PPORT=$(free_port)
cat >"$MB_TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: membroker
    static_configs:
      - targets: ['127.0.0.1:$EPORT']
YML
promtool check config "$MB_TMP/prometheus.yml" >/dev/null || fail "promtool check config"
prometheus --config.file="$MB_TMP/prometheus.yml" --storage.tsdb.path="$MB_TMP/tsdb" \
        --web.listen-address="127.0.0.1:$PPORT" >"$MB_TMP/prometheus.log" 2>&1 &
prom_pid=$!
trap 'kill $prom_pid $exporter_pid 2>/dev/null; mb_cleanup' EXIT

# query PROMQL : the first result's value, or nothing
query() {
        curl -sf -G "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1" |
                python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}
scraped() { [ -n "$(query 'membroker_memory_current_bytes{tenant="app/b"}' 2>/dev/null)" ]; }
wait_for 120 scraped || { tail -20 "$MB_TMP/prometheus.log"; fail "Prometheus never had membroker_memory_current_bytes"; }
assert_eq $((2 << 20)) "$(query 'membroker_memory_current_bytes{tenant="app/b"}')" \
        "membroker_memory_current_bytes of app/b in Prometheus"
assert_eq 1 "$(query 'up{job="membroker"}')" "the target is up"
assert_eq 1 "$(query 'membroker_up')" "membroker_up in Prometheus"
