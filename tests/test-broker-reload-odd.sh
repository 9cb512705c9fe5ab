#!/bin/bash
# SPDX-License-Identifier: MIT
# Odd entries in tenants.d: a symbolic link loop, a dangling link, a FIFO, a
# socket, a device (through a link to /dev/null) and a directory named
# "*.conf" are each skipped (counted in the state dump; the warning that
# names the file is for the admin), at start-up and on reload; the FIFO is never opened in blocking mode (the daemon would
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
nkinds=$(wc -w <<<"$kinds")
mb_dump_state
assert_eq "$nkinds" "$(mb_dump_field config skipped_files)" "entries skipped at the start ($kinds)"

for t in good linked zlast; do
        out=$(wire hello "$t" charge 1 expect-ok) || { echo "$out"; fail "no tenant $t"; }
done
pass "good, linked (through a symbolic link) and zlast load"

# Reload with the same entries (and a new tenant): skipped again, no hang.
mb_write_tenant more "Path=more"
kill -HUP "$MB_DAEMON_PID"
wait_for 30 mb_dumped_ge config reloads 1 || fail "the reload did not finish"
assert_eq 0 "$(mb_dump_field config reload_failures)" "failed reloads"
assert_eq "$nkinds" "$(mb_dump_field config skipped_files)" "entries skipped at the reload"
out=$(wire hello more charge 1 expect-ok) || { echo "$out"; fail "no tenant more after the reload"; }
pass "the reload skipped the odd entries and added more"
mb_daemon_alive
mb_stop_clean
