#!/bin/bash
# SPDX-License-Identifier: MIT
# An entry of the state directory that is not a regular file is never read,
# followed or waited for: a FIFO, a symbolic link to /dev/zero, a device, a
# directory or a file past the size cap in place of limits.conf.  Each time
# the daemon starts (its socket appears and a client is served), on
# defaults, and its log says which file it refused and why; a Reload() with
# such an entry does not hang either.  No timed assertion: the time each
# start took is printed.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
# reads the daemon's log: the refusal names the file for the operator, who has no other way to learn it

mb_write_broker_conf "Capacity=64M"
mb_write_tenant a "Path=a"
mkdir -p "$MB_STATE"
F="$MB_STATE/limits.conf"

# start_with WHAT WORDS : start with $F as it is now, check that the daemon
# serves a client and logged that it refused $F as WORDS, then stop it
start_with() {
        local what=$1 words=$2 t0 t1 out
        : >"$MB_TMP/daemon.log"
        t0=$(date +%s%N)
        mb_start_daemon
        out=$(wire --name probe hello a charge 4 expect-ok) || { echo "$out"; fail "$what: no client served"; }
        t1=$(date +%s%N)
        echo "$what: up and serving in $(( (t1 - t0) / 1000000 )) ms"
        grep -F "$F: $words" "$MB_TMP/daemon.log" || { cat "$MB_TMP/daemon.log"; fail "$what: the refusal does not name $F"; }
        mb_daemon_alive
        mb_stop_clean
        pass "$what in place of limits.conf: refused by name, started on defaults"
}

mkfifo "$F"
start_with "a FIFO" "is a FIFO"
rm -f "$F"

ln -s /dev/zero "$F"
start_with "a symbolic link to /dev/zero" "is a symbolic link"
rm -f "$F"

# A link to a good file is refused too: nothing in the state directory is
# followed.
printf '[Tenant]\nPath=a\nMemoryMax=8M\n' >"$MB_TMP/elsewhere.conf"
ln -s "$MB_TMP/elsewhere.conf" "$F"
start_with "a symbolic link to a good file" "is a symbolic link"
rm -f "$F"

if [ "$(id -u)" = 0 ] && mknod "$F" c 1 5 2>/dev/null; then
        start_with "a character device (zero)" "is a device"
        rm -f "$F"
else
        echo "no device node made (needs root and mknod): that case is left out"
fi

mkdir "$F"
start_with "a directory" "is a directory"
rmdir "$F"

truncate -s 1G "$F"
start_with "a sparse 1 GiB file" "1073741824 bytes, larger than"
rm -f "$F"

# Reload with a FIFO there: answered, the daemon goes on.
mb_start_bus
mb_start_daemon
mkfifo "$F"
out=$(timeout -s KILL 60 "$BUSCTL" --address="$MB_BUS_ADDRESS" call org.membroker1 /org/membroker1 \
        org.membroker1.Manager Reload 2>&1) || { echo "$out"; fail "Reload with a FIFO in place of limits.conf failed"; }
grep -F "$F: is a FIFO" "$MB_TMP/daemon.log" >/dev/null || fail "the reload does not name the refused file"
out=$(wire --name probe hello a charge 4 expect-ok) || { echo "$out"; fail "no client served after the reload"; }
pass "Reload with a FIFO in place of limits.conf: refused by name, the daemon goes on"
rm -f "$F"

# A good file still works, and a persisted change replaces what was odd.
mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager SetTenantLimits 'sa{sv}b' a 1 MemoryMax t $((8 << 20)) false ||
        fail "SetTenantLimits failed"
grep -qx "MemoryMax=$((8 << 20))" "$F" || fail "limits.conf: $(cat "$F")"
mb_stop_clean
pass "a regular limits.conf is written and read as before"
