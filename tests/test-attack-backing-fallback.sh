#!/bin/bash
# Where no tmpfs instance can be made (here: membrokerd without privileges,
# so fsopen() fails with EPERM), ArenaBacking=auto falls back to sealed
# memfds and says so once, and the broker works; ArenaBacking=tmpfs refuses
# to start.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/attack-lib.sh"

mb_attack_prereqs
chown -R 65534:65534 "$MB_STATE"
chmod 0777 "$MB_TMP"

# mb_start_unprivileged : membrokerd as uid 65534
mb_start_unprivileged() {
        rm -f "$MB_SOCK"
        setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
                "$MEMBROKERD" --config-dir "$MB_ETC" --socket "$MB_SOCK" --state-dir "$MB_STATE" --no-bus \
                >>"$MB_TMP/daemon.log" 2>&1 &
        MB_DAEMON_PID=$!
}

mb_write_broker_conf "Capacity=64M" "ArenaBacking=tmpfs"
mb_write_tenant a "Path=a" "AllowUsers=nobody"
mb_start_unprivileged
rc=0
wait "$MB_DAEMON_PID" || rc=$?
MB_DAEMON_PID=
[ $rc -ne 0 ] || fail "membrokerd started with ArenaBacking=tmpfs and no way to make a tmpfs instance"
grep -q 'ArenaBacking=tmpfs, but no tmpfs instance can be made' "$MB_TMP/daemon.log" ||
        { cat "$MB_TMP/daemon.log"; fail "the refusal does not say why"; }
pass "ArenaBacking=tmpfs refuses to start without tmpfs instances (exit $rc)"

mb_write_broker_conf "Capacity=64M"
mb_start_unprivileged
wait_for 20 test -S "$MB_SOCK" || { cat "$MB_TMP/daemon.log"; fail "membrokerd did not start"; }
grep -q 'arena backing: memfd (a tmpfs instance cannot be made: Operation not permitted)' "$MB_TMP/daemon.log" ||
        { cat "$MB_TMP/daemon.log"; fail "the fallback to memfd is not logged"; }
assert_eq 1 "$(grep -c 'arena backing' "$MB_TMP/daemon.log")" "backing log lines"
as_nobody_bg "$MB_TMP/c.out" hello a charge 64 expect-ok write-pages 0x33 check-pages 0x33 \
        write-arena 100 8 0x42 hold
pc=$MB_BG_PID
wait_for 20 grep -q '^ready$' "$MB_TMP/c.out" || { cat "$MB_TMP/c.out"; fail "client"; }
grep -q '^pages ok$' "$MB_TMP/c.out" || fail "the client's pages do not hold what it wrote"
wait_for 20 grep -q 'tenant a: overrun: 32 KiB (8 pages)' "$MB_TMP/daemon.log" ||
        { cat "$MB_TMP/daemon.log"; fail "the audit did not punch what a client wrote beyond its charge"; }
pass "memfd fallback: the broker works and the audit bounds the arena"
kill -TERM "$pc"
wait "$pc" || true
mb_daemon_alive
mb_stop_clean
