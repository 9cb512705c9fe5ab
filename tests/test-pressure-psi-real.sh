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
# pressure_line : the state dump's line on the host pressure source
pressure_line() { mb_dump_state; grep '^state: pressure ' "$MB_TMP/state.dump"; }
line=$(pressure_line)
case "$line" in
*"watching=no error="*) skip "the kernel refuses PSI triggers here: ${line##*error=}" ;;
esac
grep -Eq 'watching=yes kind=psi source=[^ ]*(/proc/pressure/memory|memory\.pressure) trigger="some 1000 2000000"$' <<<"$line" ||
        fail "no pressure trigger armed: $line"
pass "trigger armed: $line"
# The default trigger, too.
mb_stop_daemon
mb_start_daemon
line=$(pressure_line)
grep -q 'watching=yes kind=psi .* trigger="some 150000 2000000"$' <<<"$line" ||
        fail "the default trigger was not armed: $line"
pass "the default trigger is armed"
mb_stop_daemon
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
        if wait_for 5 mb_dumped_ge reclaim pressure_events 1; then
                break
        fi
done
mb_dumped_ge reclaim pressure_events 1 ||
        skip "the kernel reported no memory stall from the writer in $CG"
wait_for 20 eval '[ "$(pc_field a cache)" -lt 256 ]' || fail "no reclaim after the kernel's pressure event"
pass "the kernel's pressure event made a give back $((256 - $(pc_field a cache))) pages"
pc_quit a
