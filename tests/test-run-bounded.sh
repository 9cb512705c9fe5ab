#!/bin/bash
# SPDX-License-Identifier: MIT
# tests/run-bounded, the bound every test runs under, tells a hang from a
# test that finished.  Its watchdog sleeps out the bound in a child sleep(1);
# when the test ends first, run-bounded kills that sleep, then the
# watchdog.  A watchdog that went on once its sleep ended early (killed,
# not run out) printed "TIMEOUT" and the stacks of a session that had
# ended, and killed what was left of it, in the log of a test that never
# hung: on a loaded host, where the watchdog ran before its own kill came,
# the log of a failed test read as if it had hung.  Here the test itself
# kills the watchdog's sleep and goes on: it must finish with its own
# status and no TIMEOUT.
set -u
: "${top_srcdir:?run through make check}"
command -v pkill >/dev/null || { echo "SKIP: pkill (procps) is not installed"; exit 77; }

out=$(MB_TEST_TIMEOUT=977 bash "$top_srcdir/tests/run-bounded" \
        bash -c 'pkill -x -f "sleep 977" || exit 3; sleep 2; echo finished; exit 5' 2>&1)
rc=$?
echo "$out"
[ $rc != 3 ] || { echo "FAIL: the watchdog's sleep was not found"; exit 1; }
case "$out" in *TIMEOUT*) echo "FAIL: TIMEOUT reported for a test that did not hang"; exit 1 ;; esac
[ $rc = 5 ] || { echo "FAIL: exit status $rc, not the test's own 5"; exit 1; }
case "$out" in *finished*) ;; *) echo "FAIL: the test was killed before it finished"; exit 1 ;; esac
echo "ok: a watchdog whose sleep ended early leaves the test alone (status 5, no TIMEOUT)"

# The bound itself still works: a test that outlives it is stopped, with
# status 124 and the diagnosis.
out=$(MB_TEST_TIMEOUT=1 bash "$top_srcdir/tests/run-bounded" bash -c 'sleep 30' 2>&1)
rc=$?
[ $rc = 124 ] || { echo "$out"; echo "FAIL: a test past its bound ended with $rc, not 124"; exit 1; }
case "$out" in *"TIMEOUT: bash -c sleep 30 did not finish within 1 s"*) ;; *)
        echo "$out"; echo "FAIL: no TIMEOUT diagnosis for a test past its bound"; exit 1 ;; esac
echo "ok: a test past its bound is stopped with status 124 and the diagnosis"
