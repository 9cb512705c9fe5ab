#!/bin/bash
# Remote frees and remote drains against the slab fast paths on every CPU:
# one worker pinned to each CPU hands objects to the next CPU's worker
# while a drainer visits every CPU and shrinks, drains and reads the stats
# (slab-remote.c).  Objects neither lost nor handed out twice, counts and
# bytes exact.  Run with the restartable sequences and with each fall-back.
. "$top_srcdir/tests/slab-lib.sh"
slab_start_daemon
rounds=${SLAB_REMOTE_ROUNDS:-3000}
remote() {
        local rc=0
        env "$@" "$top_builddir/tests/slab-remote" "$MB_SOCK" app "$rounds" >"$MB_TMP/out" 2>"$MB_TMP/err" || rc=$?
        cat "$MB_TMP/out"
        [ $rc -eq 0 ] || { cat "$MB_TMP/err"; fail "slab-remote $* failed ($rc)"; }
}
remote MEMBROKER_SLAB_RSEQ=1
if grep -q "^rseq=1" "$MB_TMP/out"; then
        echo "the fast paths ran as restartable sequences"
else
        echo "no rseq on this machine: the locked fast paths only"
fi
remote MEMBROKER_SLAB_RSEQ=0
grep -q "^rseq=0" "$MB_TMP/out" || fail "MEMBROKER_SLAB_RSEQ=0 did not take the locked path"
remote MEMBROKER_RSEQ=0
remote MEMBROKER_RSEQ=0 MEMBROKER_SLAB_RSEQ=0
# Under valgrind, which runs no restartable sequence (glibc's rseq
# registration fails there): the fall-back, and no invalid access.
if ! command -v valgrind >/dev/null; then
        echo "valgrind is not installed: the run under valgrind is left out"
elif [ "${MB_SANITIZED:-no}" = yes ] ||
        "$top_builddir/libtool" --mode=execute ldd "$top_builddir/tests/slab-remote" | grep -q libasan; then
        echo "a sanitizer build: the run under valgrind is left out"
else
        rc=0
        "$top_builddir/libtool" --mode=execute valgrind -q --error-exitcode=3 \
                "$top_builddir/tests/slab-remote" "$MB_SOCK" app 20 20 >"$MB_TMP/out" 2>"$MB_TMP/err" || rc=$?
        cat "$MB_TMP/out"
        [ $rc -eq 0 ] || { cat "$MB_TMP/err"; fail "slab-remote under valgrind failed ($rc)"; }
fi
pass "remote frees and drains against the fast paths on every CPU"
