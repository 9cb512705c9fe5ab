#!/bin/bash
# SPDX-License-Identifier: MIT
# A reload of 30,000 tenant files while the broker is busy: membrokerd runs
# under the emulated systemd with a watchdog, a real client (membroker-load)
# allocates and frees pages of its tenant, busctl keeps reading properties,
# and Reload() is called over the bus.  The reload succeeds and applies a
# changed limit, the client sees no error, every bus read is answered, and
# the watchdog keeps being fed (the daemon is not aborted).  The durations
# are printed; speed itself is measured by the benchmark (bench/), not here.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/service-lib.sh"
command -v "$BUSCTL" >/dev/null || skip "busctl is not installed"
[ -x "$MEMBROKER_LOAD" ] || skip "membroker-load was not built"

N=30000
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# gen_tenants MAXBYTES_OF_FIRST : tenants.d/s00001.conf ... (one [Tenant] each)
gen_tenants() {
        awk -v dir="$MB_ETC/tenants.d" -v n="$N" -v first="$1" 'BEGIN {
                for (i = 1; i <= n; i++) {
                        f = sprintf("%s/s%05d.conf", dir, i)
                        printf "[Tenant]\nPath=scale/t%05d\nMemoryMax=%s\nMemoryLow=64K\n", i, i == 1 ? first : "4M" > f
                        close(f)
                }
        }'
}

mb_write_broker_conf "Capacity=1G"
mb_write_tenant app "Path=app"
gen_tenants 4M
mb_start_bus

t0=$(now_ms)
# WatchdogSec=3s: pings are due every 1.5 s; a main loop blocked for longer
# than 3 s trips it (fake-systemd then logs watchdog-timeout and aborts the
# daemon, as systemd would).
mb_sd_start --watchdog-usec 3000000
echo "start-up of $N tenants to READY=1: $(( $(now_ms) - t0 )) ms (with the test harness)"
assert_eq $((N + 3)) "$(mb_busctl get-property org.membroker1 /org/membroker1 org.membroker1.Manager NTenants |
        sed 's/^u //')" "tenants after start (with the root and scale/)"

mb_load_bg load --tenant app --hold 2M --churn 20000
load=$MB_BG_PID
mb_wait_holding load

# busctl reads properties in a loop until told to stop; every answer and
# every error is logged with its time.
reader() {
        local ok=0 err=0
        while [ ! -e "$MB_TMP/reader.stop" ]; do
                if mb_busctl get-property org.membroker1 /org/membroker1 org.membroker1.Manager NClients \
                        >/dev/null 2>>"$MB_TMP/reader.err"; then
                        echo "ok $(now_ms)" >>"$MB_TMP/reader.log"
                else
                        echo "error $(now_ms)" >>"$MB_TMP/reader.log"
                fi
        done
}
reader &
rpid=$!
MB_CHILDREN+=("$rpid")
wait_for 20 test -s "$MB_TMP/reader.log" || fail "busctl does not get answers"

# Change one limit and add nothing else: the whole set is parsed again.
gen_tenants 8M
r0=$(now_ms)
out=$(mb_busctl --timeout=300 call org.membroker1 /org/membroker1 org.membroker1.Manager Reload 2>&1) ||
        { echo "$out"; fail "Reload() of $N tenants failed"; }
r1=$(now_ms)
echo "Reload() of $N tenants: $((r1 - r0)) ms (busctl round trip)"
sleep 1
touch "$MB_TMP/reader.stop"
wait "$rpid" || true

during=$(awk -v a="$r0" -v b="$r1" '$1 == "ok" && $2 >= a && $2 <= b' "$MB_TMP/reader.log" | wc -l)
total=$(grep -c '^ok ' "$MB_TMP/reader.log" || true)
echo "bus reads answered: $total in all, $during while Reload() was in flight"
! grep -q '^error ' "$MB_TMP/reader.log" || { cat "$MB_TMP/reader.err"; fail "a bus read failed"; }
pass "every bus read was answered ($total)"

obj=$(mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager GetTenant s scale/t00001 |
      sed -e 's/^o "//' -e 's/"$//')
assert_eq $((8 << 20)) "$(mb_busctl get-property org.membroker1 "$obj" org.membroker1.Tenant MemoryMax |
        sed 's/^t //')" "MemoryMax of scale/t00001 after the reload"

mb_finish_load load "$load"
grep -q 'errors=0 ' "$MB_TMP/load.out" || { cat "$MB_TMP/load.out"; fail "the client saw errors"; }
pass "the client saw errors=0"

! grep -q 'watchdog-timeout' "$MB_SD_LOG" || fail "the watchdog fired"
kill -0 "$(mb_sd_main_pid)" 2>/dev/null || fail "membrokerd died"
assert_eq 1 "$(mb_sd_count '^start ')" "starts of the daemon"
pass "the watchdog was fed throughout"
mb_sd_stop
