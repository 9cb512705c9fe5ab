#!/bin/bash
# Start-up and shutdown of membrokerd: options, a bad configuration file stops
# start-up with "file:line: reason" and exit 1, the socket is created 0666
# (with its directory), a stale socket is replaced, a live one is not stolen,
# every descriptor is close-on-exec, SIGTERM stops cleanly and removes the
# socket.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

"$MEMBROKERD" --version | grep -q '^membrokerd [0-9]' || fail "--version"
"$MEMBROKERD" --help | grep -q -- '--config-dir DIR' || fail "--help"
rc=0; "$MEMBROKERD" --no-such-option 2>/dev/null || rc=$?
assert_eq 2 "$rc" "exit code of an unknown option"

# A configuration directory that does not exist (a typo) stops start-up
# with a message that names it; an empty one is the defaults.
rc=0
timeout -s KILL 30 "$MEMBROKERD" --no-bus --config-dir "$MB_TMP/no-such-dir" --socket "$MB_SOCK" --state-dir "$MB_STATE" \
        2>"$MB_TMP/nodir.err" || rc=$?
cat "$MB_TMP/nodir.err"
assert_eq 1 "$rc" "exit code with a missing configuration directory"
grep -q "no-such-dir: cannot use the configuration directory: No such file or directory" "$MB_TMP/nodir.err" ||
        fail "the error does not name the missing directory"
[ ! -e "$MB_SOCK" ] || fail "a socket was created although the configuration directory is missing"
pass "a missing --config-dir is an error"

# A bad file: exit 1 with file:line and the reason, on stderr.
mb_write_broker_conf "Capacity=64M"
mb_write_tenant bad "Path=bad" "MemoryMax=lots"
rc=0
"$MEMBROKERD" --no-bus --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" 2>"$MB_TMP/bad.err" || rc=$?
cat "$MB_TMP/bad.err"
assert_eq 1 "$rc" "exit code with a bad tenant file"
grep -q 'tenants.d/bad.conf:3: ' "$MB_TMP/bad.err" || fail "the error does not name bad.conf:3"
[ ! -e "$MB_SOCK" ] || fail "a socket was created although start-up failed"

# Under systemd (JOURNAL_STREAM set) lines carry a <priority> prefix.
JOURNAL_STREAM=1:1 "$MEMBROKERD" --no-bus --config-dir "$MB_ETC" --socket "$MB_SOCK" 2>"$MB_TMP/journal.err" || true
grep -q '^<3>.*bad.conf:3: ' "$MB_TMP/journal.err" || { cat "$MB_TMP/journal.err"; fail "no <3> prefix"; }
pass "journal priority prefix"
rm "$MB_ETC/tenants.d/bad.conf"
mb_write_tenant app "Path=app"

# The socket's directory is created, the socket is world-connectable.
MB_SOCK="$MB_TMP/run/deeper/membroker.sock"
mb_start_daemon
assert_eq 666 "$(stat -c %a "$MB_SOCK")" "socket mode"
wire_bg "$MB_TMP/c.out" hello app charge 1 expect-ok touch "$MB_TMP/held" hold
c=$MB_BG_PID
wait_for 20 test -e "$MB_TMP/held" || fail "client did not attach"

# Every descriptor the daemon opened (sockets, memfds, eventfds, epoll) is
# close-on-exec (pipes are skipped: the test harness may pass some down).
n=0
for fdinfo in /proc/"$MB_DAEMON_PID"/fdinfo/*; do
        fd=${fdinfo##*/}
        [ "$fd" -le 2 ] && continue
        target=$(readlink "/proc/$MB_DAEMON_PID/fd/$fd" 2>/dev/null) || continue
        case "$target" in socket:*|/memfd:*|anon_inode:*) ;; *) continue ;; esac
        flags=$(sed -n 's/^flags:\s*//p' "$fdinfo")
        (( (8#$flags & 8#2000000) != 0 )) || fail "fd $fd ($target) is not close-on-exec (flags $flags)"
        n=$((n + 1))
done
[ $n -ge 3 ] || fail "found only $n daemon descriptors"
pass "all $n daemon descriptors are close-on-exec"

# A second daemon does not steal a live socket.
rc=0
"$MEMBROKERD" --no-bus --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" 2>"$MB_TMP/second.err" || rc=$?
assert_eq 1 "$rc" "exit code of a second daemon on the same socket"
grep -q 'another broker is listening' "$MB_TMP/second.err" || { cat "$MB_TMP/second.err"; fail "no reason given"; }
test -S "$MB_SOCK" || fail "the second daemon removed the live socket"
kill -TERM "$c"; wait "$c" || true

# SIGTERM: exit 0, socket removed.
kill -TERM "$MB_DAEMON_PID"
rc=0; wait "$MB_DAEMON_PID" || rc=$?
MB_DAEMON_PID=
assert_eq 0 "$rc" "exit code after SIGTERM"
[ ! -e "$MB_SOCK" ] || fail "the socket was left behind"

# A stale socket (the daemon was killed) is replaced.
mb_start_daemon
kill -9 "$MB_DAEMON_PID"; wait "$MB_DAEMON_PID" 2>/dev/null || true
MB_DAEMON_PID=
test -S "$MB_SOCK" || fail "no stale socket left by kill -9"
"$MEMBROKERD" --no-bus --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" >>"$MB_TMP/daemon.log" 2>&1 &
MB_DAEMON_PID=$!
wait_for 20 wire hello app charge 1 expect-ok || fail "the daemon did not replace the stale socket"
pass "stale socket replaced"
mb_stop_daemon

# Something that is not a socket is not removed.
echo keep >"$MB_TMP/not-a-socket"
rc=0
"$MEMBROKERD" --no-bus --config-dir "$MB_ETC" --socket "$MB_TMP/not-a-socket" 2>"$MB_TMP/notsock.err" || rc=$?
assert_eq 1 "$rc" "exit code when the socket path is a file"
assert_eq keep "$(cat "$MB_TMP/not-a-socket")" "the file is left alone"
