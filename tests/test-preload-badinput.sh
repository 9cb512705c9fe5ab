#!/bin/bash
# SPDX-License-Identifier: MIT
# membroker-run refuses before running the program: no daemon, an unknown
# tenant, a tenant that is not a leaf, a uid the tenant does not allow, no
# --tenant, no program; each says why on stderr and exits 125, and the
# program (which would create a file) never ran.  The shim loaded without
# MEMBROKER_TENANT leaves malloc to glibc (not in sanitizer builds, whose
# shim cannot be preloaded: the refusals, which run no program, are
# checked there too).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/preload-lib.sh"
[ -f "$MEMBROKER_PRELOAD" ] || fail "no $MEMBROKER_PRELOAD"

# refused WHAT PATTERN ARGS... : membroker-run ARGS must exit 125 with
# PATTERN on stderr and must not run the program
refused() {
        local what=$1 pattern=$2 rc=0; shift 2
        rm -f "$MB_TMP/ran"
        "$@" 2>"$MB_TMP/err" || rc=$?
        cat "$MB_TMP/err"
        [ $rc = 125 ] || fail "$what: exit status $rc, not 125"
        grep -q -- "$pattern" "$MB_TMP/err" || fail "$what: stderr does not say '$pattern'"
        [ ! -e "$MB_TMP/ran" ] || fail "$what: the program ran"
        pass "$what: refused before running the program"
}

refused "no daemon" "cannot attach to tenant t" \
        "$MEMBROKER_RUN" --socket "$MB_TMP/nothing.sock" --tenant t -- touch "$MB_TMP/ran"

preload_broker
mb_write_tenant grp-leaf "Path=grp/leaf"
mb_stop_daemon
mb_start_daemon
refused "unknown tenant" "no/such" mbrun no/such touch "$MB_TMP/ran"
refused "internal tenant" "grp" mbrun grp touch "$MB_TMP/ran"
refused "no --tenant" "--tenant is required" "$MEMBROKER_RUN" --socket "$MB_SOCK" -- touch "$MB_TMP/ran"
refused "no program" "no program given" "$MEMBROKER_RUN" --socket "$MB_SOCK" --tenant t
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
        chmod 0777 "$MB_TMP"
        refused "uid not allowed" "locked" setpriv --reuid=65534 --regid=65534 --clear-groups \
                "$MEMBROKER_RUN" --socket "$MB_SOCK" --tenant locked -- touch "$MB_TMP/ran"
else
        echo "note: the refused-uid case needs root and setpriv; left out"
fi

# A program that cannot be found: 127, an existing file that cannot run: 126.
rc=0; mbrun t "$MB_TMP/no-such-program" 2>/dev/null || rc=$?
assert_eq 127 "$rc" "exit status for a missing program"

# Help and version.
"$MEMBROKER_RUN" --help | grep -q -- '--tenant PATH' || fail "--help"
"$MEMBROKER_RUN" --version | grep -q '^membroker-run ' || fail "--version"

# The shim without MEMBROKER_TENANT: glibc serves, nobody attaches.
[ "${MB_SANITIZED:-no}" != yes ] || exit 0
mb_dump_state
before=$(mb_dump_field connections attached)
out=$(LD_PRELOAD="$MEMBROKER_PRELOAD" MEMBROKER_PRELOAD_DEBUG=1 sh -c 'x=$(echo plain); echo $x' 2>"$MB_TMP/err")
assert_eq plain "$out" "a program with the shim but no tenant"
! grep -q 'attached to' "$MB_TMP/err" || fail "the shim attached without a tenant: $(cat "$MB_TMP/err")"
mb_dump_state
assert_eq "$before" "$(mb_dump_field connections attached)" "attachments without a tenant (the daemon's counter)"
