#!/bin/bash
# SPDX-License-Identifier: MIT
# Property values are what clients really allocated and what the
# configuration says: MemoryCurrent = the client's pages + its stock,
# hierarchical up to the root and the Manager; MemoryPeak, NClients, limits.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M" "PageSize=4K" "ChargeBatch=64"
mb_write_tenant a "Path=app/a" "MemoryMax=16M" "MemoryHigh=12M" "MemoryLow=2M" "MemoryMin=1M"
mb_write_tenant b "Path=app/b"
bus_run

assert_eq 4096 "$(mgr_prop PageSize)" "PageSize"
assert_eq $((64 << 20)) "$(mgr_prop Capacity)" "Capacity"
assert_eq 64 "$(mgr_prop ChargeBatch)" "ChargeBatch"
assert_eq 0 "$(mgr_prop MemoryCurrent)" "MemoryCurrent before any client"
version=$(sed -n 's/^AC_INIT(\[membroker\], \[\([^]]*\)\].*/\1/p' "$top_srcdir/configure.ac")
assert_eq "$version" "$(mgr_prop Version)" "Version"
assert_eq app/a "$(tenant_prop app/a Path)" "Path"
assert_eq $((16 << 20)) "$(tenant_prop app/a MemoryMax)" "MemoryMax"
assert_eq $((12 << 20)) "$(tenant_prop app/a MemoryHigh)" "MemoryHigh"
assert_eq $((2 << 20)) "$(tenant_prop app/a MemoryLow)" "MemoryLow"
assert_eq $((1 << 20)) "$(tenant_prop app/a MemoryMin)" "MemoryMin"
assert_eq 18446744073709551615 "$(tenant_prop app/b MemoryMax)" "MemoryMax of an unlimited tenant"

# 3 MiB + 5 pages: not a multiple of the batch, so some stock stays.
hold=$(( (3 << 20) + 5 * 4096 ))
load_start a app/a $hold
assert_eq 1 "$(tenant_prop app/a NClients)" "NClients of app/a"
assert_eq 1 "$(mgr_prop NClients)" "Manager NClients"

# The stat of the tenant says how much the client holds and stocks (bytes);
# wait until it is fresh (a read flushes once enough is pending, the periodic
# flush does the rest).
fresh() { [ "$(stat_value app/a pages)" = "$hold" ]; }
wait_for 20 fresh || fail "pages of app/a never reached $hold: $(stat_text app/a | head -3)"
stock=$(stat_value app/a stock)
current=$(tenant_prop app/a MemoryCurrent)
assert_eq $((hold + stock)) "$current" "MemoryCurrent of app/a = pages $hold + stock $stock"
[ $((current % 4096)) -eq 0 ] || fail "MemoryCurrent is not whole pages"
assert_eq "$current" "$(tenant_prop app MemoryCurrent)" "MemoryCurrent of the parent app"
assert_eq "$current" "$(tenant_prop / MemoryCurrent)" "MemoryCurrent of the root"
assert_eq "$current" "$(mgr_prop MemoryCurrent)" "Manager MemoryCurrent"
assert_eq 0 "$(tenant_prop app/b MemoryCurrent)" "MemoryCurrent of the idle sibling"
peak=$(tenant_prop app/a MemoryPeak)
[ "$peak" -ge "$current" ] || fail "MemoryPeak $peak < MemoryCurrent $current"
pass "MemoryPeak $peak >= MemoryCurrent"

# Protection: app has none, so the child's is capped at 0 (effective_protection()).
assert_eq 0 "$(tenant_prop app/a EffectiveMemoryLow)" "EffectiveMemoryLow under an unprotected parent"
mgr_call SetTenantLimits "sa{sv}b" app 2 MemoryLow t $((8 << 20)) MemoryMin t $((8 << 20)) true
assert_eq $((2 << 20)) "$(tenant_prop app/a EffectiveMemoryLow)" "EffectiveMemoryLow = own low (usage above it)"
assert_eq $((1 << 20)) "$(tenant_prop app/a EffectiveMemoryMin)" "EffectiveMemoryMin = own min"

# The client leaves: everything is uncharged, the peak stays.
load_stop a
assert_eq 0 "$LOAD_RC" "membroker-load exit status"
wait_for 10 eval '[ "$(tenant_prop app/a NClients)" = 0 ]' || fail "NClients did not drop to 0"
assert_eq 0 "$(tenant_prop app/a MemoryCurrent)" "MemoryCurrent after the client left"
assert_eq 0 "$(mgr_prop MemoryCurrent)" "Manager MemoryCurrent after the client left"
assert_eq "$peak" "$(tenant_prop app/a MemoryPeak)" "MemoryPeak after the client left"
