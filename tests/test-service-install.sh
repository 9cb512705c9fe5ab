#!/bin/bash
# SPDX-License-Identifier: MIT
# `make install DESTDIR=...` puts every part in its conventional place (the
# directories configure chose: unit and policy directories from pkg-config
# where available), the installed membroker.pc compiles and links a real
# client against the installed header and library, and `systemd-analyze
# verify` passes on the installed unit (its ExecStart= relocated into
# DESTDIR, which is all that differs from a real installation).
. "$top_srcdir/tests/lib.sh"

D="$MB_TMP/dest"
# A make of its own (not the jobserver of the make running the tests).
submake() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make "$@"; }
submake -s -C "$top_builddir" install DESTDIR="$D" >"$MB_TMP/install.log" 2>&1 ||
        { cat "$MB_TMP/install.log"; fail "make install DESTDIR=... failed"; }

# The directories and tools of this build, as make sees them.
vars=(prefix sbindir bindir libdir includedir sysconfdir mandir datadir systemdsystemunitdir dbussystemconfdir
      dbussystemservicedir pkgconfigdir CC MB_CFLAGS MB_LDFLAGS)
eval "$(
        { printf 'mb-print-vars:\n'
          for v in "${vars[@]}"; do printf "\t@printf '%%s=%%q\\\\n' %s \"\$(%s)\"\n" "$v" "$v"; done
        } | submake -s --no-print-directory -C "$top_builddir" -f Makefile -f - mb-print-vars |
            grep -E '^[A-Za-z_]+=' | sed 's/^/mk_/'
)" || fail "cannot read the installation directories from the Makefile"
[ -n "$mk_sbindir" ] || fail "no sbindir from the Makefile"

check_file() {
        [ -f "$D$1" ] || fail "$1 is not installed"
        pass "installed: $1"
}
check_file "$mk_sbindir/membrokerd"
[ -x "$D$mk_sbindir/membrokerd" ] || fail "membrokerd is not executable"
check_file "$mk_bindir/membrokerctl"
check_file "$mk_bindir/membroker-load"
check_file "$mk_bindir/membroker-exporter"
check_file "$mk_libdir/libmembroker.so.0"
check_file "$mk_includedir/membroker.h"
check_file "$mk_pkgconfigdir/membroker.pc"
check_file "$mk_systemdsystemunitdir/membroker.service"
check_file "$mk_systemdsystemunitdir/membroker-exporter.service"
check_file "$mk_systemdsystemunitdir/membroker-exporter.socket"
check_file "$mk_dbussystemconfdir/org.membroker1.conf"
check_file "$mk_dbussystemservicedir/org.membroker1.service"
check_file "$mk_sysconfdir/membroker/membroker.conf"
check_file "$mk_sysconfdir/membroker/tenants.d/example.conf.example"
check_file "$mk_mandir/man8/membrokerd.8"
check_file "$mk_mandir/man1/membrokerctl.1"
check_file "$mk_mandir/man1/membroker-exporter.1"
check_file "$mk_mandir/man1/membroker-load.1"
check_file "$mk_mandir/man3/libmembroker.3"
check_file "$mk_mandir/man5/membroker.conf.5"
check_file "$mk_mandir/man5/org.membroker1.5"
check_file "$mk_datadir/dbus-1/interfaces/org.membroker1.Manager.xml"
check_file "$mk_datadir/dbus-1/interfaces/org.membroker1.Tenant.xml"

# The installed files name the installed paths.
unit="$D$mk_systemdsystemunitdir/membroker.service"
grep -qx "ExecStart=$mk_sbindir/membrokerd --system --config-dir=$mk_sysconfdir/membroker --state-dir=/var/lib/membroker" \
        "$unit" || fail "ExecStart= of the installed unit: $(grep ExecStart= "$unit")"
grep -qx "SystemdService=membroker.service" "$D$mk_dbussystemservicedir/org.membroker1.service" ||
        fail "the activation file does not name membroker.service"
pass "the unit and the activation file name the installed daemon"

# A client built against the installation, with the installed .pc file.
cat >"$MB_TMP/client.c" <<'EOF'
#include <errno.h>
#include <stdio.h>
#include <membroker.h>
int main(int argc, char **argv) {
        mb_client *c;
        int r = mb_connect(argv[1], "auto", &c);
        printf("connect=%d %s\n", r, r < 0 ? mb_last_error() : "");
        return r == -ECONNREFUSED || r == -ENOENT ? 0 : 1;
}
EOF
export PKG_CONFIG_PATH="$D$mk_pkgconfigdir" PKG_CONFIG_SYSROOT_DIR="$D"
flags=$(pkg-config --cflags --libs membroker) || fail "pkg-config cannot read the installed membroker.pc"
pass "pkg-config membroker: $flags"
# shellcheck disable=SC2086
$mk_CC $mk_MB_CFLAGS "$MB_TMP/client.c" -o "$MB_TMP/client" $flags $mk_MB_LDFLAGS ||
        fail "cannot build a client against the installed header and library"
LD_LIBRARY_PATH="$D$mk_libdir" "$MB_TMP/client" "$MB_TMP/no-such.sock" || fail "the installed library does not work"
pass "a client builds and runs against the installation"

# systemd-analyze verify on the installed unit.
command -v systemd-analyze >/dev/null || skip "systemd-analyze is not installed"
sed "s|^ExecStart=$mk_sbindir/|ExecStart=$D$mk_sbindir/|" "$unit" >"$MB_TMP/membroker.service"
rc=0
out=$(MANPATH="$D$mk_mandir" systemd-analyze verify "$MB_TMP/membroker.service" 2>&1) || rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] || fail "systemd-analyze verify (rc $rc): $out"
pass "systemd-analyze verify: no complaint"
eunit="$D$mk_systemdsystemunitdir/membroker-exporter.service"
grep -qx "ExecStart=$mk_bindir/membroker-exporter --system" "$eunit" || fail "ExecStart= of the exporter: $(grep ExecStart= "$eunit")"
sed "s|^ExecStart=$mk_bindir/|ExecStart=$D$mk_bindir/|" "$eunit" >"$MB_TMP/membroker-exporter.service"
cp "$D$mk_systemdsystemunitdir/membroker-exporter.socket" "$MB_TMP/"
rc=0
out=$(MANPATH="$D$mk_mandir" systemd-analyze verify "$MB_TMP/membroker-exporter.socket" \
        "$MB_TMP/membroker-exporter.service" 2>&1) || rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] || fail "systemd-analyze verify of the exporter's units (rc $rc): $out"
pass "systemd-analyze verify of the exporter's socket and service: no complaint"
out=$(systemd-analyze security --offline=yes "$MB_TMP/membroker.service" 2>&1 | tail -1) || true
echo "$out"
