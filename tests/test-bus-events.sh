#!/bin/bash
# SPDX-License-Identifier: MIT
# A charge that fails at MemoryMax counts max and oom events
# (memory.events), emits MemoryEvent(event, count) on the tenant's object and
# on its ancestors', and GetEvents shows them, hierarchical and .local.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant a "Path=app/a" "MemoryMax=1M"
mb_write_tenant b "Path=app/b"
bus_run

for k in low high max oom oom_kill overrun oom_group_kill low.local high.local max.local oom.local oom_kill.local \
        overrun.local oom_group_kill.local; do
        assert_eq 0 "$(events_value app/a "$k")" "$k of app/a before"
done

monitor_start ev "type='signal',sender='$BUS_DEST',interface='$BUS_TENANT_IFACE',member='MemoryEvent'"
rc=0
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant app/a --hold 2M --seconds 1 >"$MB_TMP/load.out" 2>&1 || rc=$?
assert_eq 1 "$rc" "membroker-load over MemoryMax exits with 1 (a limit)"

monitor_wait ev 'STRING "max";' || fail "no MemoryEvent max: $(cat "$MB_TMP/ev.mon")"
monitor_wait ev 'STRING "oom";' || fail "no MemoryEvent oom"
grep -q "Path=/org/membroker1/tenant/app_2fa .*Member=MemoryEvent" "$MB_TMP/ev.mon" ||
        fail "MemoryEvent not on app/a's object"
monitor_wait ev "Path=/org/membroker1/tenant/app .*Member=MemoryEvent" || fail "MemoryEvent not on the parent's object"
pass "MemoryEvent(max) and MemoryEvent(oom) on app/a and on app"

max=$(events_value app/a max)
[ "$max" -ge 1 ] || fail "max events of app/a: $max"
assert_eq "$max" "$(events_value app/a max.local)" "max.local of app/a (the tenant itself)"
[ "$(events_value app/a oom)" -ge 1 ] || fail "no oom event counted"
assert_eq "$max" "$(events_value app max)" "max of app (hierarchical)"
assert_eq 0 "$(events_value app max.local)" "max.local of app"
assert_eq 0 "$(events_value app/b max)" "max of the sibling"
# The count a signal carries is the hierarchical count at emission.
grep -A4 "Path=/org/membroker1/tenant/app_2fa .*Member=MemoryEvent" "$MB_TMP/ev.mon" | grep -q "UINT64 [1-9]" ||
        fail "MemoryEvent carries no count"
pass "GetEvents counts the failure on app/a and app"
