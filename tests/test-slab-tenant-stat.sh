#!/bin/bash
# The tenant's memory.stat-style figures over D-Bus show the slab bytes a
# client holds -- slab, slab_reclaimable, slab_unreclaimable, exactly, in the
# tenant and (hierarchically) in the root -- once rstat has flushed the
# client's stats slots; and drop to zero when the client is gone.
. "$top_srcdir/tests/slab-lib.sh"
mb_start_bus
mb_write_broker_conf "Capacity=256M" "PageSize=4K" "ChargeBatch=16" "StatsFlushIntervalSec=1"
mb_write_tenant app "Path=app" "MemoryMax=128M" "AllowUsers=$(id -un)"
mb_start_daemon

# stat TENANT KEY : one value of GetStat(TENANT)
stat() {
        mb_busctl call org.membroker1 /org/membroker1 org.membroker1.Manager GetStat s "$1" |
                tr ' ' '\n' | grep -A1 -x "\"$2\"" | tail -1
}
# stat_is TENANT KEY VALUE
stat_is() { [ "$(stat "$1" "$2")" = "$3" ]; }

mkfifo "$MB_TMP/hold.in"
"$SLAB_CLIENT" "$MB_SOCK" app hold <"$MB_TMP/hold.in" >"$MB_TMP/hold.out" 2>"$MB_TMP/hold.err" &
holder=$!
MB_CHILDREN+=("$holder")
exec 7<>"$MB_TMP/hold.in"  # read-write: never blocks, whether or not the client opened its end
wait_for 20 grep -q 'slab=' "$MB_TMP/hold.out" || { cat "$MB_TMP/hold.err"; fail "slab-client hold did not start"; }
line=$(grep 'slab=' "$MB_TMP/hold.out")
echo "client holds: $line"
for key in slab slab_reclaimable slab_unreclaimable; do
        want=$(echo "$line" | tr ' ' '\n' | sed -n "s/^$key=//p")
        [ "$want" -gt 0 ] || fail "the client holds no $key"
        wait_for 10 stat_is app "$key" "$want" || fail "tenant app: $key is $(stat app "$key"), expected $want"
        pass "tenant app: $key = $want"
        assert_eq "$want" "$(stat / "$key")" "root (hierarchical) $key"
done

exec 7>&-
mb_wait "$holder" || fail "slab-client hold failed: $(cat "$MB_TMP/hold.err")"
for key in slab slab_reclaimable slab_unreclaimable; do
        wait_for 10 stat_is app "$key" 0 || fail "tenant app: $key is $(stat app "$key") after the client left"
        pass "tenant app: $key = 0 after the client left"
done
