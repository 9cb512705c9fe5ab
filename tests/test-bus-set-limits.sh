#!/bin/bash
# SPDX-License-Identifier: MIT
# SetTenantLimits applies at once: the properties show it, PropertiesChanged
# carries the new values, a lowered MemoryMax holds for the very next charge
# (memory_max_write() semantics), "max" (UINT64_MAX) lifts it, and a
# ChargeBatch change reaches the descendants that inherit it.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M" "ChargeBatch=64"
mb_write_tenant a "Path=app/a"
mb_write_tenant b "Path=app/b" "ChargeBatch=8"
bus_run

monitor_start props "type='signal',sender='$BUS_DEST',interface='org.freedesktop.DBus.Properties'"
mgr_call SetTenantLimits "sa{sv}b" app/a 3 MemoryMax t $((1 << 20)) MemoryLow t 8192 MemoryMin t 4096 true
assert_eq $((1 << 20)) "$(tenant_prop app/a MemoryMax)" "MemoryMax"
assert_eq 8192 "$(tenant_prop app/a MemoryLow)" "MemoryLow"
assert_eq 4096 "$(tenant_prop app/a MemoryMin)" "MemoryMin"
monitor_wait props "Path=/org/membroker1/tenant/app_2fa" || fail "no PropertiesChanged for app/a"
monitor_wait props "UINT64 1048576;" || fail "PropertiesChanged lacks the new MemoryMax"
pass "PropertiesChanged on /org/membroker1/tenant/app_2fa with MemoryMax=1048576"

# Byte values are rounded down to pages, as page_counter_memparse() does.
mgr_call SetTenantLimits "sa{sv}b" app/a 1 MemoryHigh t $(( (1 << 20) + 100 )) true
assert_eq $((1 << 20)) "$(tenant_prop app/a MemoryHigh)" "MemoryHigh rounded down to pages"

# The next charge sees the new max: 2M does not fit in 1M.
rc=0
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant app/a --hold 2M --seconds 1 >"$MB_TMP/over.out" 2>&1 || rc=$?
assert_eq 1 "$rc" "membroker-load over MemoryMax exits with 1 (a limit)"
grep -q "held=1048576 " "$MB_TMP/over.out" || fail "the client did not get exactly 1M: $(cat "$MB_TMP/over.out")"
pass "the client got exactly MemoryMax"

# Lower it below what a client holds (nothing reclaimable): the limit
# applies, the call says that the usage stays above it (memory_max_write()
# returns once reclaim can do no more), and the next charge fails.
load_start held app/a 512K
expect_fail "The limits apply, but the usage stays at" \
        mgr_call SetTenantLimits "sa{sv}b" app/a 1 MemoryMax t $((256 << 10)) true
assert_eq $((256 << 10)) "$(tenant_prop app/a MemoryMax)" "MemoryMax below usage"
rc=0
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant app/a --hold 64K --seconds 1 >"$MB_TMP/second.out" 2>&1 || rc=$?
assert_eq 1 "$rc" "a new charge above the lowered max fails"
load_stop held

# UINT64_MAX is "max".
mgr_call SetTenantLimits "sa{sv}b" app/a 1 MemoryMax t 18446744073709551615 true
assert_eq 18446744073709551615 "$(tenant_prop app/a MemoryMax)" "MemoryMax=max"
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant app/a --hold 2M --seconds 1 >"$MB_TMP/after.out" 2>&1 ||
        fail "2M do not fit after lifting the limit: $(cat "$MB_TMP/after.out")"
pass "2M fit after MemoryMax=max"

# ChargeBatch: app/a inherits from app, app/b has its own.
assert_eq 64 "$(tenant_prop app/a ChargeBatch)" "ChargeBatch of app/a (broker default)"
assert_eq 8 "$(tenant_prop app/b ChargeBatch)" "ChargeBatch of app/b (own)"
mgr_call SetTenantLimits "sa{sv}b" app 1 ChargeBatch t 16 true
assert_eq 16 "$(tenant_prop app ChargeBatch)" "ChargeBatch of app"
assert_eq 16 "$(tenant_prop app/a ChargeBatch)" "ChargeBatch of app/a (inherited)"
assert_eq 8 "$(tenant_prop app/b ChargeBatch)" "ChargeBatch of app/b (own, unchanged)"
monitor_wait props "UINT32 16;" || fail "no PropertiesChanged with ChargeBatch=16"
pass "PropertiesChanged carries ChargeBatch=16"
