#!/bin/bash
# Admission by kernel cgroup (read with libcgroup): "auto" picks the tenant
# whose Cgroup= is the longest prefix of the client's cgroup at a '/'
# boundary; Cgroup= admits a non-root client inside it; a client outside it
# is refused with a reason naming both cgroups.  Uses the cgroup v1 memory
# hierarchy when it is mounted, else the v2 unified hierarchy.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root to create cgroups"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"

if [ -f /sys/fs/cgroup/memory/cgroup.procs ]; then
        base=/sys/fs/cgroup/memory
elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        base=/sys/fs/cgroup
else
        skip "no cgroup v1 memory or v2 unified hierarchy mounted"
fi
name="mbtest.$$"
top="$base/$name"
mkdir "$top" 2>/dev/null || skip "cannot create a cgroup under $base (read-only hierarchy)"
mkdir -p "$top/svc/inner" "$top/other" "$base/$name-x"

cg_cleanup() {
        local rc=$?
        for p in "${MB_CHILDREN[@]}"; do kill -9 "$p" 2>/dev/null; done
        sleep 0.2
        rmdir "$top/svc/inner" "$top/svc" "$top/other" "$top" "$base/$name-x" 2>/dev/null
        (exit $rc)
        mb_cleanup
}
trap cg_cleanup EXIT

# in_cgroup DIR CMD... : run CMD (as root) inside the cgroup DIR
in_cgroup() {
        local dir=$1; shift
        sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$dir" "$@"
}

# The client's cgroup path, as the kernel shows it in /proc/PID/cgroup.
probe=$(in_cgroup "$top/svc/inner" cat /proc/self/cgroup)
if [ "$base" = /sys/fs/cgroup/memory ]; then
        inner=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' <<<"$probe")
else
        inner=$(awk -F: '$1 == 0 { print $3 }' <<<"$probe")
fi
prefix=${inner%/svc/inner}
[ -n "$inner" ] && [ "$prefix" != "$inner" ] || fail "cannot find the test cgroup in /proc/self/cgroup"
echo "test cgroups under $prefix ($base)"

mb_write_broker_conf "Capacity=64M"
mb_write_tenant outer "Path=outer" "Cgroup=$prefix"
mb_write_tenant inner "Path=services/inner" "Cgroup=$prefix/svc"
mb_write_tenant decoy "Path=decoy" "Cgroup=$prefix/sv"
mb_start_daemon

out=$(in_cgroup "$top/svc/inner" "$WIRE_CLIENT" --socket "$MB_SOCK" hello auto charge 1 expect-ok) ||
        { echo "$out"; fail "auto in $prefix/svc/inner failed"; }
echo "$out"
grep -q '^welcome tenant=services/inner ' <<<"$out" || fail "auto did not pick the longest prefix"
pass "auto in svc/inner picks services/inner (Cgroup=$prefix/svc), not outer or decoy"

out=$(in_cgroup "$top/other" "$WIRE_CLIENT" --socket "$MB_SOCK" hello auto) || { echo "$out"; fail "auto failed"; }
grep -q '^welcome tenant=outer ' <<<"$out" || { echo "$out"; fail "auto in other did not pick outer"; }
pass "auto in other picks outer"

out=$(in_cgroup "$base/$name-x" "$WIRE_CLIENT" --socket "$MB_SOCK" hello auto expect-error ENOENT expect-close) ||
        { echo "$out"; fail "auto matched a cgroup that only shares a string prefix"; }
echo "$out"
pass "auto matches at '/' boundaries only"

# Cgroup= admits a non-root client inside it, refuses one outside it.
nobody=(setpriv --reuid=65534 --regid="$(id -g nobody)" --clear-groups)
out=$(in_cgroup "$top/svc/inner" "${nobody[@]}" "$WIRE_CLIENT" --socket "$MB_SOCK" hello services/inner \
        charge 1 expect-ok) || { echo "$out"; fail "nobody inside Cgroup= was refused"; }
pass "Cgroup= admits uid 65534 inside it"

out=$(in_cgroup "$top/other" "${nobody[@]}" "$WIRE_CLIENT" --socket "$MB_SOCK" hello services/inner \
        expect-error EACCES expect-close) || { echo "$out"; fail "nobody outside Cgroup= was admitted"; }
echo "$out"
grep -q "reason=uid 65534 (nobody) is not allowed in tenant services/inner: Cgroup=$prefix/svc does not contain the client's cgroup $prefix/other" \
        <<<"$out" || fail "the reason does not name the cgroups"
pass "Cgroup= refuses uid 65534 outside it, with the reason"
mb_daemon_alive
mb_stop_clean
