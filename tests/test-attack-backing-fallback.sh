#!/bin/bash
# membrokerd without privileges (uid 65534, no capabilities) still gives
# each tenant a tmpfs instance of its own, made in a user namespace of its
# own, which bounds what a client backs as it does for root.  Where no
# user namespace can be made either (here: /proc read-only for the daemon,
# so that it cannot write a uid_map), ArenaBacking=auto falls back to sealed
# memfds and says so once, and the broker works; ArenaBacking=tmpfs refuses
# to start.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/attack-lib.sh"

mb_attack_prereqs
command -v unshare >/dev/null || skip "unshare(1) is not installed"
chown -R 65534:65534 "$MB_STATE"
chmod 0777 "$MB_TMP"

# mb_start_unprivileged [no-userns] : membrokerd as uid 65534 without
# capabilities; with no-userns, in a mount namespace whose /proc is
# read-only (no uid_map can be written: no user namespace of its own)
mb_start_unprivileged() {
        local pre=()
        rm -f "$MB_SOCK"
        [ "${1:-}" != no-userns ] || pre=(unshare --mount --propagation private sh -c \
                'mount -o remount,bind,ro /proc && exec "$@"' sh)
        "${pre[@]}" setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
                "$MEMBROKERD" --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" --no-bus \
                --dump-file "$MB_DUMP_FILE" >>"$MB_TMP/daemon.log" 2>&1 &
        MB_DAEMON_PID=$!
}

# Unprivileged, in a user namespace: ArenaBacking=tmpfs starts, and the
# instance bounds a client that fallocates its whole arena.
if unshare --user true 2>/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups unshare --user true 2>/dev/null
then
        mb_write_broker_conf "Capacity=64M" "ArenaBacking=tmpfs" "ChargeBatch=64"
        mb_write_tenant a "Path=a" "AllowUsers=nobody"
        mb_start_unprivileged
        wait_for 20 test -S "$MB_SOCK" || { cat "$MB_TMP/daemon.log"; fail "unprivileged membrokerd did not start"; }
        out=$(as_nobody hello a charge 1 expect-ok fallocate-arena print-backed charge 1000 expect-ok \
                write-pages 0x5a check-pages 0x5a) ||
                { echo "$out"; fail "client of the unprivileged daemon"; }
        echo "$out"
        grep -q '^fallocate error=ENOSPC$' <<<"$out" ||
                fail "fallocate beyond the charge did not fail with ENOSPC on the user namespace's tmpfs"
        backed=$(mb_field "$out" backed)
        [ "$backed" -le $(( 4096 + 2 * 64 * 4096 )) ] || fail "a's arena is backed by $backed bytes"
        grep -q '^pages ok$' <<<"$out" || fail "the client's pages do not hold what it wrote"
        pass "unprivileged: a tmpfs instance per tenant, made in a user namespace, bounds the arena ($backed bytes) and grows with the charge"
        mb_stop_clean
        : >"$MB_TMP/daemon.log"
else
        echo "unprivileged user namespaces are not available here: the tmpfs-in-a-user-namespace case is not tried"
fi

mb_write_broker_conf "Capacity=64M" "ArenaBacking=tmpfs"
mb_write_tenant a "Path=a" "AllowUsers=nobody"
mb_start_unprivileged no-userns
rc=0
wait "$MB_DAEMON_PID" || rc=$?
MB_DAEMON_PID=
[ $rc -ne 0 ] || fail "membrokerd started with ArenaBacking=tmpfs and no way to make a tmpfs instance"
# reads the daemon's log: a daemon that refuses to start says why on stderr, its only channel then
grep -q 'ArenaBacking=tmpfs, but no tmpfs instance can be made' "$MB_TMP/daemon.log" ||
        { cat "$MB_TMP/daemon.log"; fail "the refusal does not say why"; }
pass "ArenaBacking=tmpfs refuses to start without tmpfs instances (exit $rc)"

mb_write_broker_conf "Capacity=64M"
mb_start_unprivileged no-userns
wait_for 20 test -S "$MB_SOCK" || { cat "$MB_TMP/daemon.log"; fail "membrokerd did not start"; }
mb_dump_state
assert_eq memfd "$(mb_dump_field config backing)" "the arenas' backing without tmpfs instances"
as_nobody_bg "$MB_TMP/c.out" hello a charge 64 expect-ok write-pages 0x33 check-pages 0x33 \
        write-arena 100 8 0x42 hold
pc=$MB_BG_PID
wait_for 20 grep -q '^ready$' "$MB_TMP/c.out" || { cat "$MB_TMP/c.out"; fail "client"; }
grep -q '^pages ok$' "$MB_TMP/c.out" || fail "the client's pages do not hold what it wrote"
# the audit punches the 8 pages written beyond the charge: only the 64 charged stay backed
wait_for 20 eval '[ "$(mb_now a arena_backed)" = $((64 * 4096)) ] && [ "$(mb_event_local a overrun)" -ge 1 ]' ||
        { cat "$MB_TMP/state.dump"; fail "the audit did not punch what a client wrote beyond its charge"; }
pass "memfd fallback: the broker works and the audit bounds the arena"
kill -TERM "$pc"
wait "$pc" || true
mb_daemon_alive
mb_stop_clean
