#!/bin/bash
# SPDX-License-Identifier: MIT
# PressureReclaim=yes with the real PSI file: the daemon arms a trigger on
# /proc/pressure/memory (or its cgroup's memory.pressure) and, where the
# test can make the kernel stall on memory (root, a memory cgroup with a
# small limit, a writer filling the page cache through it), reacts to the
# kernel's event.  Skips, with the kernel's reason, where triggers are
# refused (CAP_SYS_RESOURCE missing, PSI disabled, emulated /proc).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

[ -r /proc/pressure/memory ] || skip "no /proc/pressure/memory: the kernel has no PSI"
pr_setup "PressureReclaim=yes"
mb_write_tenant a "Path=a"
# The shortest window an unprivileged trigger may use.
mb_start_daemon --pressure-trigger "some 1000 2000000"
if grep -q "cannot arm the memory pressure trigger" "$MB_TMP/daemon.log"; then
        skip "the kernel refuses PSI triggers here: $(sed -n 's/.*cannot arm the memory pressure trigger //p' "$MB_TMP/daemon.log" | head -1)"
fi
grep -Eq 'watching memory pressure: .*(/proc/pressure/memory|memory\.pressure), trigger "some 1000 2000000"' \
        "$MB_TMP/daemon.log" || fail "no pressure trigger armed: $(tail -3 "$MB_TMP/daemon.log")"
pass "trigger armed: $(sed -n 's/.*watching memory pressure: //p' "$MB_TMP/daemon.log")"
# The default trigger, too.
mb_stop_daemon
: >"$MB_TMP/daemon.log"
mb_start_daemon
grep -Eq 'watching memory pressure: .*, trigger "some 150000 2000000"' "$MB_TMP/daemon.log" ||
        fail "the default trigger was not armed: $(tail -3 "$MB_TMP/daemon.log")"
pass "the default trigger is armed"
mb_stop_daemon
: >"$MB_TMP/daemon.log"
mb_start_daemon --pressure-trigger "some 1000 2000000"

# Make the kernel stall: a writer in a memory cgroup of 16M fills the page
# cache with 256M, so that it keeps reclaiming (memory stall time).
[ "$(id -u)" = 0 ] || skip "making real memory pressure needs root (a memory cgroup)"
CG=
if [ -w /sys/fs/cgroup/memory ]; then
        CG=/sys/fs/cgroup/memory/mbtest-psi-$$
        mkdir "$CG" && echo $((16 << 20)) >"$CG/memory.limit_in_bytes" || CG=
elif [ -w /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
        CG=/sys/fs/cgroup/mbtest-psi-$$
        mkdir "$CG" && echo $((16 << 20)) >"$CG/memory.max" || CG=
fi
[ -n "$CG" ] || skip "no memory cgroup to make pressure in"
cleanup_cg() { [ -n "$CG" ] && rmdir "$CG" 2>/dev/null; rm -f "$MB_TMP/big"; }
trap 'cleanup_cg; mb_cleanup' EXIT

pc_start a a
assert_eq "cache ok 256" "$(pc a cache 256)" "a caches"
for round in 1 2 3; do
        sh -c 'echo $$ >"$1/cgroup.procs" && exec dd if=/dev/zero of="$2" bs=1M count=256 conv=fsync status=none' \
                sh "$CG" "$MB_TMP/big" || true
        rm -f "$MB_TMP/big"
        if wait_for 5 grep -q "memory pressure reported by" "$MB_TMP/daemon.log"; then
                break
        fi
done
grep -q "memory pressure reported by" "$MB_TMP/daemon.log" ||
        skip "the kernel reported no memory stall from the writer in $CG"
wait_for 20 eval '[ "$(pc_field a cache)" -lt 256 ]' || fail "no reclaim after the kernel's pressure event"
pass "the kernel's pressure event made a give back $((256 - $(pc_field a cache))) pages"
pc_quit a
