#!/bin/bash
# SPDX-License-Identifier: MIT
# When stderr is the journal itself (JOURNAL_STREAM names stderr's device and
# inode, as systemd sets it), an OOM kill goes to the journal as a structured
# message: MESSAGE_ID=, TENANT=, CLIENT_PID= of the killed client,
# PRIORITY=4, SYSLOG_IDENTIFIER=membrokerd, the message in bytes.  The
# journal is a datagram socket at /run/systemd/journal/socket in a mount
# namespace of the test's own (a tmpfs over /run), read by a small receiver.
. "$top_srcdir/tests/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (a private mount namespace with a tmpfs over /run)"
unshare -m --propagation private true 2>/dev/null || skip "cannot make a mount namespace (unshare -m)"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant k "Path=k" "MemoryMax=4M" "OOMPolicy=kill"

: >"$MB_TMP/stderr"
stream=$(stat -c '%d:%i' "$MB_TMP/stderr")
cat >"$MB_TMP/journal.py" <<'PY'
import os, socket, sys
path, out, ready = sys.argv[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
open(ready, "w").close()
with open(out, "ab", buffering=0) as f:
    while True:
        data = s.recv(1 << 20)
        f.write(data + b"\n--\n")
PY
# The daemon and the receiver share the namespace; the clients connect to
# the daemon's socket under $MB_TMP, which the namespace does not hide.
unshare -m --propagation private sh -c '
        mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal || exit 1
        python3 "$1" /run/systemd/journal/socket "$2" "$3" &
        echo $! >"$4"
        while [ ! -e "$3" ]; do sleep 0.05; done
        exec env JOURNAL_STREAM="$5" "$6" --no-bus --config-dir "$7" --socket "$8" --state-dir "$9" 2>>"${10}"' \
        _ "$MB_TMP/journal.py" "$MB_TMP/journal.out" "$MB_TMP/journal.ready" "$MB_TMP/journal.pid" "$stream" \
        "$MEMBROKERD" "$MB_ETC" "$MB_SOCK" "$MB_STATE" "$MB_TMP/stderr" &
MB_DAEMON_PID=$!
trap 'kill "$(cat "$MB_TMP/journal.pid" 2>/dev/null)" 2>/dev/null; mb_cleanup' EXIT
wait_for 20 test -S "$MB_SOCK" || { cat "$MB_TMP/stderr"; fail "membrokerd did not start"; }

# 768 pages held, 512 more needed of 1024: nothing is reclaimable, the
# biggest client is killed.
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant k --hold 3M >/dev/null 2>"$MB_TMP/big.err" &
big=$!
wait_for 20 grep -q 'holding 768 pages' "$MB_TMP/big.err" || fail "the big client does not hold its pages"
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant k --hold 2M --seconds 0 --quiet >/dev/null ||
        fail "the charge that needed room failed"
rc=0; wait "$big" || rc=$?
assert_eq 137 "$rc" "exit status of the killed client"

wait_for 20 grep -q "MESSAGE_ID=1ca30b2942d447b5813cb231f2a7d69a" "$MB_TMP/journal.out" ||
        { cat "$MB_TMP/stderr"; fail "no OOM kill message in the journal"; }
msg=$(awk -v RS='\n--\n' '/MESSAGE_ID=1ca30b2942d447b5813cb231f2a7d69a/' "$MB_TMP/journal.out")
printf '%s\n' "$msg"
for field in "TENANT=k" "CLIENT_PID=$big" "PRIORITY=4" "SYSLOG_IDENTIFIER=membrokerd"; do
        grep -qx -- "$field" <<<"$msg" || fail "the journal entry lacks $field"
done
grep -q "^MESSAGE=tenant k: out of memory (usage .* MiB (.* pages), MemoryMax=4 MiB (1024 pages)); killed client [0-9]* (membroker-load, pid $big)" <<<"$msg" ||
        fail "the journal entry's MESSAGE"
! grep -q "out of memory" "$MB_TMP/stderr" || fail "the structured message was also written to stderr"
grep -q "^<6>.*listening on" "$MB_TMP/stderr" || fail "ordinary lines no longer go to stderr with <N>"
pass "the OOM kill is a structured journal entry"
