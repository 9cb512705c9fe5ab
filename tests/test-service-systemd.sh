#!/bin/bash
# SPDX-License-Identifier: MIT
# The installed units under a real systemd as PID 1 (tests/systemd-pid1.sh:
# the machine's own systemd in private namespaces over an overlay of /, with
# `make install DESTDIR=` on top), in one boot:
#   - the system users from sysusers.d, the bus policy from the installed file;
#   - start: active once READY=1 (Type=notify), status, membrokerd's uid not
#     0 and its effective capabilities without CAP_SYS_ADMIN (none at all),
#     its arenas still on tmpfs instances (made in a user namespace);
#   - a client (a transient unit) admitted by Cgroup= (where memory is on
#     cgroup2), 16M held;
#   - reload (same PID, a new tenant), restart with the client's memory kept
#     (the fd store), the watchdog's restart of a stopped daemon (a drop-in
#     with a 3 s WatchdogSec=, to keep the test short) with the memory kept;
#   - the socket-activated exporter scraped
#     (membroker_up 1 and the tenants' figures), membrokerctl pressure as
#     uid 65534, D-Bus activation of the stopped daemon (a stop, unlike a
#     restart, drops the fd store: the client is gone by then),
#     systemd-analyze security at most 1.0;
#   - no SIGSYS and no EPERM in the journal (the log is the contract here:
#     a sandbox refusal shows nowhere else).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/systemd-pid1.sh"

trap 'rc=$?; pid1_poweroff; (exit $rc); mb_cleanup' EXIT
command -v systemd-analyze >/dev/null || skip "systemd-analyze is not installed"

# The installed tree, with this build's own prefix.
dest=$MB_TMP/dest
make -s -C "$top_builddir" install DESTDIR="$dest" >"$MB_TMP/install.log" 2>&1 ||
        { tail -20 "$MB_TMP/install.log"; fail "make install DESTDIR= failed"; }
unit=$(find "$dest" -path '*/systemd/system/membroker.service' | head -1)
[ -n "$unit" ] || fail "no membroker.service in the installed tree"
confdir=$(sed -n 's/^ExecStart=.*--config-dir=\([^ ]*\).*/\1/p' "$unit")
sysusers=$(find "$dest" -path '*/sysusers.d/membroker.conf' | head -1)
policy=$(find "$dest" -path '*/dbus-1/system.d/org.membroker1.conf' | head -1)
[ -n "$confdir" ] && [ -n "$sysusers" ] && [ -n "$policy" ] || fail "the installed tree lacks a piece"
sysusers=${sysusers#"$dest"}
policy=${policy#"$dest"}

pid1_boot "$dest" "$MB_TMP/pid1"
pass "systemd booted as PID 1 (host pid $PID1_PID)"

# What a package's scripts do: the users, a bus that knows the policy (the
# system bus reads /usr/share and /etc only: a /usr/local policy is linked
# into /etc, as an admin would), the libraries' cache.
pid1 systemd-sysusers "$sysusers" || fail "systemd-sysusers $sysusers"
pid1 getent passwd membroker >/dev/null || fail "no user membroker after systemd-sysusers"
case $policy in
/usr/share/dbus-1/system.d/*) ;;
*) pid1 mkdir -p /etc/dbus-1/system.d && pid1 ln -sf "$policy" /etc/dbus-1/system.d/org.membroker1.conf ;;
esac
pid1 busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus ReloadConfig ||
        fail "the system bus did not reload its configuration"
pid1 ldconfig
# A sanitized build (CI's ASan builds): LeakSanitizer stops the world with
# ptrace(), which the units' SystemCallFilter= refuses, and then fails the
# exit.  Leaks are checked by the tests that run the daemon outside the
# sandbox; here they are not looked for.
if grep -qa __asan_init "$dest$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")"; then
        for u in membroker membroker-exporter; do
                pid1 mkdir -p "/etc/systemd/system/$u.service.d"
                printf '[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0\n' |
                        pid1 tee "/etc/systemd/system/$u.service.d/asan.conf" >/dev/null
        done
        pid1 systemctl daemon-reload
        echo "a sanitized build: LeakSanitizer is off for the units (it needs ptrace, which they refuse)"
fi
pid1 mkdir -p "$confdir/tenants.d"
# Admission by Cgroup= where the memory controller is on the unified
# hierarchy; on a hybrid host its cgroup v1 line (which admission follows,
# as memcg charges by it) is the namespace's root for every process inside,
# since this systemd manages cgroup2 only: admission by user there.
if [ "$(pid1 sh -c 'grep -c . /proc/self/cgroup')" = 1 ]; then
        admit="Cgroup=/system.slice/mbclient.service" tenant=auto
else
        admit="AllowUsers=nobody" tenant=web
        echo "the memory controller is on cgroup v1 here: the client is admitted by AllowUsers=, not Cgroup="
fi
printf '[Tenant]\nPath=web\n%s\n' "$admit" | pid1 tee "$confdir/tenants.d/web.conf" >/dev/null

# journal_check : no SIGSYS, no EPERM from membroker's units
journal_check() {
        local j
        j=$(pid1 journalctl --no-pager -o cat -u membroker.service -u membroker-exporter.service \
                -u dbus-org.membroker1.service 2>&1)
        if grep -E 'SIGSYS|status=31/SYS|Bad system call|Operation not permitted|EPERM' <<<"$j"; then
                fail "the journal shows a sandbox refusal (above)"
        fi
}
main_pid() { pid1 systemctl show -p MainPID --value membroker.service; }
tenant_current() {
        local obj
        obj=$(pid1 busctl call org.membroker1 /org/membroker1 org.membroker1.Manager GetTenant s "$1" |
                sed 's/^o "\(.*\)"$/\1/')
        pid1 busctl get-property org.membroker1 "$obj" org.membroker1.Tenant MemoryCurrent | sed 's/^t //'
}
# wait_current TENANT BYTES [exact] : MemoryCurrent of TENANT reaches at least
# BYTES (exactly BYTES with "exact") within 30 s; the value in $CUR
wait_current() {
        local i
        for i in $(seq 300); do
                CUR=$(tenant_current "$1" 2>/dev/null) || CUR=
                if [ -n "$CUR" ]; then
                        [ "${3:-}" = exact ] && [ "$CUR" = "$2" ] && return 0
                        [ "${3:-}" != exact ] && [ "$CUR" -ge "$2" ] && return 0
                fi
                sleep 0.1
        done
        pid1 journalctl --no-pager -n 20 -u mbclient.service -u membroker.service
        fail "MemoryCurrent of $1 is '$CUR', not ${3:+exactly }$2"
}

# ---- start, status, privileges ----
pid1 systemctl start membroker.service || { pid1 journalctl --no-pager -u membroker -n 30; fail "start"; }
assert_eq active "$(pid1 systemctl is-active membroker.service)" "membroker.service"
case $(pid1 systemctl show -p StatusText --value membroker.service) in
Serving*) ;; *) fail "no STATUS= from the daemon" ;; esac
pid1 systemctl status --no-pager membroker.service >"$MB_TMP/status" || fail "systemctl status: $(cat "$MB_TMP/status")"
pid=$(main_pid)
status=$(pid1 cat "/proc/$pid/status")
uid=$(awk '$1 == "Uid:" { print $3 }' <<<"$status")
capeff=$(awk '$1 == "CapEff:" { print $2 }' <<<"$status")
[ -n "$uid" ] && [ "$uid" != 0 ] || fail "membrokerd runs as uid '$uid'"
assert_eq "$(pid1 id -u membroker)" "$uid" "membrokerd's uid"
# CAP_SYS_ADMIN is bit 21.
(( (16#$capeff >> 21) & 1 )) && fail "membrokerd has CAP_SYS_ADMIN (CapEff $capeff)"
pass "started: active, STATUS= given, uid $uid (membroker), CapEff $capeff"

# ---- a client, admitted by its cgroup ----
pid1 systemd-run -q -u mbclient -p User=nobody "$(pid1 sh -c 'command -v membroker-load')" --tenant "$tenant" \
        --hold 16M --quiet || fail "cannot start the client"
wait_current web $((16 << 20))
# The client's stocks are still filling when the 16M are first seen: what
# the restart must keep is the figure once it stands still for a second.
for i in $(seq 30); do
        held=$CUR
        sleep 1
        CUR=$(tenant_current web)
        [ "$CUR" = "$held" ] && break
done
[ "$CUR" = "$held" ] || fail "MemoryCurrent of web never settled (last $held, then $CUR)"
pass "a client of uid 65534 admitted by ${admit%%=*}= holds 16M: MemoryCurrent $held"

# ---- reload ----
printf '[Tenant]\nPath=batch\nMemoryMax=64M\n' | pid1 tee "$confdir/tenants.d/batch.conf" >/dev/null
pid1 systemctl reload membroker.service || fail "reload"
assert_eq "$pid" "$(main_pid)" "MainPID after reload"
pid1 busctl call org.membroker1 /org/membroker1 org.membroker1.Manager GetTenant s batch >/dev/null ||
        fail "the reload did not add tenant batch"
pass "reload: same PID $pid, tenant batch added"

# ---- restart: the memory stays ----
pid1 systemctl restart membroker.service || fail "restart"
npid=$(main_pid)
[ "$npid" != "$pid" ] || fail "the restart kept PID $pid"
wait_current web "$held" exact
assert_eq active "$(pid1 systemctl is-active mbclient.service)" "the client after the restart"
pass "restart: PID $pid -> $npid, MemoryCurrent $held kept"

# ---- the watchdog restarts a stopped daemon ----
pid1 mkdir -p /run/systemd/system/membroker.service.d
printf '[Service]\nWatchdogSec=3s\n' | pid1 tee /run/systemd/system/membroker.service.d/watchdog.conf >/dev/null
pid1 systemctl daemon-reload
pid1 systemctl restart membroker.service || fail "restart with WatchdogSec=3s"
pid=$(main_pid)
wait_current web "$held" exact
pid1 kill -STOP "$pid"
for i in $(seq 300); do
        npid=$(main_pid)
        [ -n "$npid" ] && [ "$npid" != 0 ] && [ "$npid" != "$pid" ] && break
        sleep 0.1
done
[ "$npid" != "$pid" ] || fail "the watchdog did not restart the stopped daemon within 30 s"
pid1 systemctl show -p Result --value membroker.service >"$MB_TMP/result"
wait_current web "$held" exact
pid1 rm -f /run/systemd/system/membroker.service.d/watchdog.conf
pid1 systemctl daemon-reload
pass "watchdog: stopped PID $pid replaced by $npid, the client's 16M kept"

# ---- the exporter, socket-activated ----
pid1 systemctl start membroker-exporter.socket || fail "start membroker-exporter.socket"
port=$(pid1 systemctl show -p Listen --value membroker-exporter.socket | sed -n 's/.*:\([0-9]*\) (Stream).*/\1/p')
[ -n "$port" ] || port=9877
pid1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3 &&
        timeout 20 cat <&3" >"$MB_TMP/scrape" || fail "cannot scrape 127.0.0.1:$port"
grep -qx 'membroker_up 1' "$MB_TMP/scrape" || { head -20 "$MB_TMP/scrape"; fail "the scrape does not say membroker_up 1"; }
grep -E '^membroker_[a-z_]*\{[^}]*tenant="web"[^}]*\} 16777216$' "$MB_TMP/scrape" >"$MB_TMP/web.lines" ||
        { grep web "$MB_TMP/scrape" | head; fail "the scrape has no 16M figure of tenant web"; }
pass "exporter: membroker_up 1, $(head -1 "$MB_TMP/web.lines")"

# ---- pressure as uid 65534 ----
out=$(pid1 setpriv --reuid=65534 --regid=65534 --clear-groups membrokerctl pressure / 2>&1) ||
        fail "membrokerctl pressure / as uid 65534: $out"
grep -q '^some avg10=' <<<"$out" || fail "membrokerctl pressure / printed: $out"
pass "membrokerctl pressure / as uid 65534: $(head -1 <<<"$out")"

# ---- the client saw nothing wrong ----
pid1 systemctl stop mbclient.service
pid1 journalctl --no-pager -o cat -u mbclient.service >"$MB_TMP/client.log"
grep -q 'verify=ok' "$MB_TMP/client.log" || { cat "$MB_TMP/client.log"; fail "the client's pages did not verify"; }
grep -q 'errors=0' "$MB_TMP/client.log" || { cat "$MB_TMP/client.log"; fail "the client saw errors"; }
pass "the client's pages verified after two restarts and the watchdog's"

# ---- D-Bus activation ----
pid1 systemctl stop membroker.service
[ "$(pid1 systemctl is-active membroker.service)" = inactive ] ||
        pid1 journalctl --no-pager -o cat -n 30 -u membroker.service
assert_eq inactive "$(pid1 systemctl is-active membroker.service)" "membroker.service after stop"
pid1 busctl call org.membroker1 /org/membroker1 org.membroker1.Manager ListTenants >/dev/null ||
        fail "a call to org.membroker1 did not activate the daemon"
assert_eq active "$(pid1 systemctl is-active membroker.service)" "membroker.service after a bus call"
pass "D-Bus activation: a call started the stopped membroker.service"

# ---- exposure ----
pid1 systemd-analyze security --no-pager membroker.service >"$MB_TMP/security" 2>&1 || true
grep 'Overall exposure level' "$MB_TMP/security"
pid1 systemd-analyze security --no-pager membroker-exporter.service 2>&1 | grep 'Overall exposure level'
pid1 systemd-analyze security --threshold=10 membroker.service >/dev/null 2>&1 ||
        { grep -F '✗' "$MB_TMP/security"; fail "systemd-analyze security membroker.service says more than 1.0"; }
pass "systemd-analyze security membroker.service: at most 1.0"

journal_check
pass "no SIGSYS and no EPERM in the journal"
