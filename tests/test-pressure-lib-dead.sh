#!/bin/bash
# SPDX-License-Identifier: MIT
# The helpers of the pressure and SQLite tests (tests/pressure-lib.sh) with
# a client that died: pc must fail at once, saying that the client exited
# and how, instead of waiting forever.  A client reads its commands from a
# FIFO; a write-only open of a FIFO nobody has open for reading any more
# blocks in open(2) until a reader comes, and no reader ever comes: a test
# whose client died (a crash, an OOM kill) hung there, past every bound of
# the helpers, until the suite's own time limit killed it without saying
# which client was gone.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant a "Path=a"
mb_start_daemon

pc_start a a
out=$(pc a report)
case "$out" in report*) pass "a answers: $out" ;; *) fail "a: report -> '$out'" ;; esac

# The client dies at once, as a crash ends it (SIGKILL: the sanitizers
# turn a SIGSEGV into exit(1)).
kill -KILL "${PC_PID[a]}"
rc=0; mb_wait "${PC_PID[a]}" 20 || rc=$?
[ $rc = $((128 + 9)) ] || fail "the pressure-client ended with $rc, not by SIGKILL"

# pc in the background, bounded here: stuck, it is killed and counts as
# hung.  (A subshell, as pc mostly runs in $(...): the client's exit status
# is its parent's to learn.)
(pc a report) >"$MB_TMP/pc.out" 2>"$MB_TMP/pc.err" &
p=$!
rc=0; mb_wait "$p" 30 2>/dev/null || rc=$?
cat "$MB_TMP/pc.err"
[ $rc != 124 ] || fail "pc waited for a client that died (still blocked after 30 s)"
[ $rc != 0 ] || fail "pc succeeded with a client that died: $(cat "$MB_TMP/pc.out")"
grep -q "pressure-client a (pid ${PC_PID[a]}) exited before it answered 'report'" "$MB_TMP/pc.err" ||
        fail "pc did not say that the client exited: $(cat "$MB_TMP/pc.err")"
pass "pc fails at once with a client that died, and says so"

# A client that is alive and does not answer still gets the helpers' own
# bound (not exercised here: 60 s); a new one under the same name works.
pc_start a a
out=$(pc a report)
case "$out" in report*) pass "a new client a answers: $out" ;; *) fail "new a: report -> '$out'" ;; esac
pc_quit a
mb_stop_clean
