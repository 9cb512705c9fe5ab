#!/bin/bash
# SPDX-License-Identifier: MIT
# Odd entries in tenants.d: a symbolic link loop, a dangling link, a FIFO, a
# socket, a device (through a link to /dev/null) and a directory named
# "*.conf" each get a warning naming the file and are skipped, at start-up
# and on reload; the FIFO is never opened in blocking mode (the daemon would
# hang).  A link to a regular file is read as the file, and the other
# tenants load.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

D="$MB_ETC/tenants.d"
mb_write_broker_conf "Capacity=64M"
mb_write_tenant good "Path=good"
mkdir -p "$MB_TMP/real"
printf '[Tenant]\nPath=linked\n' >"$MB_TMP/real/target"
ln -s "$MB_TMP/real/target" "$D/linked.conf"
ln -s loop.conf "$D/loop.conf"
ln -s "$MB_TMP/nowhere" "$D/dangling.conf"
mkfifo "$D/fifo.conf"
ln -s /dev/null "$D/dev.conf"
mkdir "$D/dir.conf"
kinds="loop dangling fifo dev dir"
if command -v python3 >/dev/null; then
        python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$D/sock.conf"
        kinds="$kinds sock"
else
        echo "python3 is not installed: no socket entry"
fi
mb_write_tenant zlast "Path=zlast"

mb_start_daemon
check_warnings() {
        local k n
        for k in $kinds; do
                n=$(grep -c "warning.*tenants.d/$k.conf: .*skipped\|tenants.d/$k.conf: .*skipped" "$MB_TMP/daemon.log" || true)
                [ "$n" -ge "$1" ] || { grep tenants.d "$MB_TMP/daemon.log"; fail "no warning #$1 for $k.conf"; }
        done
        pass "a warning for each odd entry ($kinds), #$1"
}
check_warnings 1
grep 'tenants.d/.*skipped' "$MB_TMP/daemon.log"

for t in good linked zlast; do
        out=$(wire hello "$t" charge 1 expect-ok) || { echo "$out"; fail "no tenant $t"; }
done
pass "good, linked (through a symbolic link) and zlast load"

# Reload with the same entries (and a new tenant): same warnings, no hang.
mb_write_tenant more "Path=more"
kill -HUP "$MB_DAEMON_PID"
wait_for 30 grep -q 'configuration reloaded' "$MB_TMP/daemon.log" ||
        { tail -20 "$MB_TMP/daemon.log"; fail "the reload did not finish"; }
check_warnings 2
out=$(wire hello more charge 1 expect-ok) || { echo "$out"; fail "no tenant more after the reload"; }
pass "the reload skipped the odd entries and added more"
mb_daemon_alive
mb_stop_clean
