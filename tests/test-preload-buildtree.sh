#!/bin/bash
# SPDX-License-Identifier: MIT
# membroker-run from the build tree finds the shim built next to it, with
# no MEMBROKER_PRELOAD in the environment (as libtool's wrappers find the
# uninstalled libraries): the program gets client/.libs/'s shim in its
# LD_PRELOAD, is a client of the tenant (its 32 MiB reach MemoryPeak, read
# on the bus), and --verbose names the shim.  The same binary copied out of
# the build tree looks for the installed shim instead.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/preload-lib.sh"
preload_check
built=$(readlink -f "$MEMBROKER_PRELOAD")
unset MEMBROKER_PRELOAD

bus_setup "Capacity=256M"
mb_write_tenant t "Path=t" "MemoryMax=128M"
bus_run

out=$(mbrun t sh -c 'echo "$LD_PRELOAD"')
[ "$(readlink -f "${out%% *}")" = "$built" ] || fail "LD_PRELOAD is '$out', not the build tree's $built"
pass "the program's LD_PRELOAD is the build tree's shim"

need_program python3
PY=$(command -v python3)
out=$("$MEMBROKER_RUN" --verbose --socket "$MB_SOCK" --tenant t -- "$PY" -c \
      'b = bytearray(32 << 20); b[-1] = 1; print("ok")' 2>"$MB_TMP/err")
cat "$MB_TMP/err"
assert_eq ok "$out" "python3 ran"
grep -q "^membroker-run: $PY in tenant t, with .*client/.libs/libmembroker-preload.so$" "$MB_TMP/err" ||
        fail "--verbose does not name the build tree's shim"
peak=$(tenant_prop t MemoryPeak)
[ "$peak" -ge $((32 << 20)) ] || fail "MemoryPeak $peak: python3's 32 MiB were not the tenant's"
pass "python3 was a client of t (MemoryPeak $peak)"

# Out of the build tree: the installed shim (or "No such file" for it).
installed=$("$MEMBROKER_RUN" --help | sed -n 's/^build tree, else \(.*\)\.$/\1/p')
[ -n "$installed" ] || fail "--help does not name the installed shim"
real="$top_builddir/tools/.libs/membroker-run"
[ -x "$real" ] || real="$top_builddir/tools/membroker-run"
mkdir -p "$MB_TMP/bin"
cp "$real" "$MB_TMP/bin/membroker-run"
if [ ! -e "$installed" ]; then
        rc=0
        LD_LIBRARY_PATH="$top_builddir/client/.libs" "$MB_TMP/bin/membroker-run" --socket "$MB_SOCK" \
                --tenant t -- true 2>"$MB_TMP/err" || rc=$?
        cat "$MB_TMP/err"
        [ $rc = 125 ] || fail "out of the build tree: exit status $rc, not 125"
        grep -q "^membroker-run: $installed: No such file" "$MB_TMP/err" ||
                fail "out of the build tree it did not look for $installed"
        pass "out of the build tree it looks for the installed $installed"
fi
