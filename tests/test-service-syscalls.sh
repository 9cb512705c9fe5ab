#!/bin/bash
# SPDX-License-Identifier: MIT
# The sandbox of membroker.service is what the daemon really needs: run the
# real daemon under strace -f, as the unit would (notify socket, fd store,
# a restart through the store, the bus), through a workload (clients that
# hold and churn pages, raw frames with bad input, D-Bus reads and changes,
# CreateTenant/RemoveTenant, Reload and SIGHUP, SIGUSR1), and check that
#   - every system call it made is allowed by the unit's SystemCallFilter=
#     (@system-service, minus @privileged), and
#   - every socket it opened is AF_UNIX (RestrictAddressFamilies=AF_UNIX).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/service-lib.sh"
command -v strace >/dev/null || skip "strace is not installed"
command -v systemd-analyze >/dev/null || skip "systemd-analyze is not installed"
command -v "$BUSCTL" >/dev/null || skip "busctl is not installed"
strace -D -f -qq -o /dev/null true 2>/dev/null || skip "strace cannot trace here (ptrace refused)"

# The filter of the installed unit, expanded by systemd itself.
unit="$top_srcdir/systemd/membroker.service.in"
allow=$(sed -n 's/^SystemCallFilter=\(@.*\)/\1/p' "$unit" | head -1)
# Single calls allowed on top (a later allow line adds to the list).
extra=$(sed -n 's/^SystemCallFilter=\([a-z][a-z0-9_ ]*\)$/\1/p' "$unit")
deny=$(sed -n 's/^SystemCallFilter=~\(.*\)/\1/p' "$unit")
[ "$allow" = "@system-service" ] || fail "the unit's SystemCallFilter= changed ($allow): update this test"
# expand_set @GROUP... : the system call names of the groups, recursively
expand_set() {
        local item
        for g in "$@"; do
                systemd-analyze syscall-filter "$g" 2>/dev/null | sed -n 's/^ \{4\}\([@a-z0-9_-]\+\)$/\1/p' |
                while read -r item; do
                        case "$item" in @*) expand_set "$item" ;; *) echo "$item" ;; esac
                done
        done
}
# shellcheck disable=SC2086
expand_set $allow | sort -u >"$MB_TMP/allowed.all"
# shellcheck disable=SC2086
expand_set $deny | sort -u >"$MB_TMP/denied"
{ comm -23 "$MB_TMP/allowed.all" "$MB_TMP/denied"; printf '%s\n' $extra; } | sort -u >"$MB_TMP/allowed"
[ "$(wc -l <"$MB_TMP/allowed")" -gt 100 ] || fail "cannot expand @system-service with systemd-analyze"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant a "Path=a" "MemoryMax=16M"
mb_write_tenant b "Path=b" "MemoryMax=16M" "MemoryHigh=8M" "MemoryLow=1M"
mb_start_bus

"$FAKE_SYSTEMD" --dir "$MB_TMP" --log "$MB_SD_LOG" --pidfile "$MB_SD_PIDFILE" --restart 1 --notify-access-all -- \
        sh -c 'exec strace -D -f -qq -o "$0.$$" "$@"' "$MB_TMP/strace" \
        "$MEMBROKERD" --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" \
        --address "$MB_BUS_ADDRESS" >>"$MB_TMP/daemon.log" 2>&1 &
MB_DAEMON_PID=$!
mb_sd_wait_ready 1
wait_for 20 mb_busctl status org.membroker1 || fail "membrokerd is not on the bus"

daemon_pid() { mb_sd_main_pid; }

workload() {
        local out
        mb_load_bg "load-a-$1" --tenant a --hold 2M --churn 2000 --seconds 2
        local la=$MB_BG_PID
        mb_load_bg "load-b-$1" --tenant b --hold 4M --seconds 2
        local lb=$MB_BG_PID
        out=$(wire hello a charge 64 expect-ok uncharge-all expect-ok) || fail "raw client: $out"
        wire hello a charge 99999 >/dev/null 2>&1 || true
        wire send-garbage 100 expect-close >/dev/null 2>&1 || true
        mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager GetStatText s a >/dev/null
        mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager DumpStats >/dev/null
        mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager SetTenantLimits "sa{sv}b" \
                a 1 MemoryHigh t $((12 << 20)) false
        mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager SetTenantLimits "sa{sv}b" \
                b 1 MemoryHigh t $((6 << 20)) true
        mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager CreateTenant "sa{sv}" \
                "x$1" 1 MemoryMax t $((1 << 20)) >/dev/null
        mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager RemoveTenant s "x$1"
        mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager Reload
        # (may fail with EAGAIN when the stocks hold nothing: memory.reclaim)
        mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager Reclaim st b 4096 >/dev/null 2>&1 ||
                true
        kill -HUP "$(daemon_pid)"
        kill -USR1 "$(daemon_pid)"
        wait "$la" || fail "client of a failed: $(cat "$MB_TMP/load-a-$1.out")"
        wait "$lb" || fail "client of b failed: $(cat "$MB_TMP/load-b-$1.out")"
}
workload 1

# A client that holds pages across a restart through the fd store.
mb_load_bg held --tenant a --hold 1M
held=$MB_BG_PID
wait_for 20 mb_has_clients a || fail "the client of a did not attach"
sleep 1
kill -TERM "$(daemon_pid)"
# The restarted daemon's own READY=1: the log holds two already (the start's
# and the one that ended the SIGHUP reload of workload 1).
mb_sd_wait_started 2
workload 2
kill -TERM "$held"
wait "$held" || true
mb_sd_stop

ls "$MB_TMP"/strace.* >/dev/null 2>&1 || fail "strace wrote nothing"
# "PID name(args) = ..." and "PID <... name resumed>": the names.
cat "$MB_TMP"/strace.* | sed -n -E 's/^[0-9]+ +(<\.\.\. )?([a-z0-9_]+)(\(| resumed>).*/\2/p' | sort -u \
        >"$MB_TMP/used"
[ "$(wc -l <"$MB_TMP/used")" -gt 20 ] || fail "too few system calls traced"
echo "system calls made: $(tr '\n' ' ' <"$MB_TMP/used")"
bad=$(comm -23 "$MB_TMP/used" "$MB_TMP/allowed" | tr '\n' ' ')
[ -z "$bad" ] || fail "system calls outside SystemCallFilter=$allow ~$deny: $bad"
pass "every system call is in @system-service and none in $deny"

families=$(cat "$MB_TMP"/strace.* | sed -n -E 's/^[0-9]+ +socket(pair)?\(([A-Z_0-9]+),.*/\2/p' | sort -u | tr '\n' ' ')
[ -n "$families" ] || fail "no socket() traced"
[ "$families" = "AF_UNIX " ] || fail "socket families other than AF_UNIX: $families"
pass "every socket is AF_UNIX"
