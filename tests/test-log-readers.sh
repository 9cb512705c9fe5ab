#!/bin/bash
# Tests observe the daemon through its interfaces (the bus, the wire,
# membrokerctl, counters), not through its log: a reworded log line must
# not fail a test, and a behaviour that is only logged must not pass one.
# The log stays readable where it is itself the promise (what the operator
# is told), in at most MAX_READERS test scripts, each saying why in a
# comment "# reads the daemon's log: ...".
#
# A script reads the log when a line that names daemon.log parses it
# (grep, awk, sed, wc, read); showing it on a failure (cat, tail) is not
# reading.  The shared helpers (tests/*-lib.sh) must not read it at all,
# or every test that sources them would.
set -u
: "${top_srcdir:?run through make check}"
cd "$top_srcdir/tests"
MAX_READERS=5

reads() { grep -n 'daemon\.log' "$1" | grep -E '(grep|awk|sed|wc|read)[^|]*daemon\.log|daemon\.log[^|]*\|[[:space:]]*(grep|awk|sed|wc)'; }

status=0
for f in *-lib.sh; do
        if hits=$(reads "$f"); then
                echo "FAIL: $f is sourced by many tests and reads the daemon's log:"
                echo "$hits" | sed 's/^/  /'
                status=1
        fi
done
n=0
for f in test-*.sh; do
        [ "$f" = test-log-readers.sh ] && continue
        reads "$f" >/dev/null || continue
        n=$((n + 1))
        if grep -q "# reads the daemon's log: " "$f"; then
                echo "reader: $f ($(grep -m1 "# reads the daemon's log: " "$f" | sed "s/.*# reads the daemon's log: //"))"
        else
                echo "FAIL: $f reads the daemon's log without saying why the log is the contract:"
                reads "$f" | sed 's/^/  /'
                status=1
        fi
done
echo "$n of $(ls test-*.sh | wc -l) shell tests read the daemon's log (at most $MAX_READERS)"
[ "$n" -le "$MAX_READERS" ] || { echo "FAIL: more than $MAX_READERS readers"; status=1; }
[ $status = 0 ] && echo "ok: the tests observe the daemon through its interfaces"
exit $status
