#!/bin/bash
# SPDX-License-Identifier: MIT
# Introspection shows the documented org.membroker1 API (docs/design.md), every
# tenant has an object at /org/membroker1/tenant/<sd_bus_path_encode(path)>,
# and `busctl tree` lists them all, including one created at run time.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant cache "Path=db/cache" "MemoryMax=16M"
mb_write_tenant web "Path=web"
bus_run

# member type signature result, as busctl introspect prints them
members() {
        mb_busctl introspect "$BUS_DEST" "$1" "$2" | awk 'NR > 1 && $1 ~ /^\./ { print $1, $2, $3, $4, $5 }'
}
expect_member() { # expect_member LISTING NAME TYPE SIGNATURE RESULT
        printf '%s\n' "$1" | grep -q -- "^\\.$2 $3 $4 $5 " || fail "introspection lacks .$2 $3 $4 $5"
}

mgr=$(members "$BUS_MGR_PATH" "$BUS_MGR_IFACE")
for p in "Version s" "PageSize t" "Capacity t" "MemoryCurrent t" "ChargeBatch u" "NTenants u" \
         "NClients u" "StatsFlushes t" "StatsFlushedNodes t"; do
        set -- $p
        printf '%s\n' "$mgr" | grep -q "^\.$1 property $2 " || fail "Manager lacks property $1 ($2)"
done
expect_member "$mgr" ListTenants method - "a(so)"
expect_member "$mgr" GetTenant method s o
expect_member "$mgr" CreateTenant method "sa{sv}" o
expect_member "$mgr" RemoveTenant method s -
expect_member "$mgr" SetTenantLimits method "sa{sv}b" -
expect_member "$mgr" GetStat method s "a(st)"
expect_member "$mgr" GetStatText method s s
expect_member "$mgr" GetEvents method s "a(st)"
expect_member "$mgr" DumpStats method - "a(sa(st))"
expect_member "$mgr" DumpStatsCompact method - "asasasa(satatat)"
expect_member "$mgr" Reclaim method st t
expect_member "$mgr" Reload method - -
pass "org.membroker1.Manager has every documented member"

# Object paths: sd_bus_path_encode() of the tenant path; the root "/" is _2f.
assert_eq /org/membroker1/tenant/db_2fcache "$(tenant_object db/cache)" "object of db/cache"
assert_eq /org/membroker1/tenant/_2f "$(tenant_object /)" "object of the root"
assert_eq /org/membroker1/tenant/db "$(tenant_object /db/)" "object of /db/ (normalised)"

ten=$(members /org/membroker1/tenant/db_2fcache "$BUS_TENANT_IFACE")
for p in "Path s" "MemoryCurrent t" "MemoryPeak t" "MemoryMax t" "MemoryHigh t" "MemoryLow t" \
         "MemoryMin t" "EffectiveMemoryLow t" "EffectiveMemoryMin t" "ChargeBatch u" "EffectiveChargeBatch u" \
         "NClients u" "Draining b"; do
        set -- $p
        printf '%s\n' "$ten" | grep -q "^\.$1 property $2 " || fail "Tenant lacks property $1 ($2)"
done
expect_member "$ten" GetStat method - "a(st)"
expect_member "$ten" GetStatText method - s
expect_member "$ten" GetEvents method - "a(st)"
expect_member "$ten" SetLimits method "a{sv}b" -
expect_member "$ten" Reclaim method t t
expect_member "$ten" MemoryEvent signal st -
printf '%s\n' "$ten" | grep -q '^\.MemoryMax property t 16777216 emits-change' ||
        fail "MemoryMax is not 16M with emits-change: $(printf '%s\n' "$ten" | grep MemoryMax)"
pass "org.membroker1.Tenant has every documented member"

# ListTenants and busctl tree agree with the configuration.
assert_eq 4 "$(mgr_prop NTenants)" "NTenants"
list=$(mgr_call ListTenants)
for t in '"/" "/org/membroker1/tenant/_2f"' '"db" "/org/membroker1/tenant/db"' \
         '"db/cache" "/org/membroker1/tenant/db_2fcache"' '"web" "/org/membroker1/tenant/web"'; do
        case "$list" in *"$t"*) ;; *) fail "ListTenants lacks $t: $list" ;; esac
done
pass "ListTenants lists every tenant"

tree_objects() { mb_busctl tree --list "$BUS_DEST" | grep '^/org/membroker1/tenant/' | sort; }
assert_eq "$(printf '%s\n' /org/membroker1/tenant/_2f /org/membroker1/tenant/db \
        /org/membroker1/tenant/db_2fcache /org/membroker1/tenant/web | sort)" "$(tree_objects)" "busctl tree"

mgr_call CreateTenant "sa{sv}" batch/job-1.x 0 >/dev/null
tree_objects | grep -qx /org/membroker1/tenant/batch_2fjob_2d1_2ex || fail "busctl tree lacks the new tenant"
mgr_call RemoveTenant s batch/job-1.x
tree_objects | grep -qx /org/membroker1/tenant/batch || fail "parent batch vanished with its child"
! tree_objects | grep -q job_2d1 || fail "busctl tree still lists the removed tenant"
pass "busctl tree follows CreateTenant/RemoveTenant"

# Unknown objects under the prefix do not exist.
out=$(mb_busctl introspect "$BUS_DEST" /org/membroker1/tenant/nope "$BUS_TENANT_IFACE" 2>&1) &&
        fail "an object for a tenant that does not exist: $out"
pass "no object for an unknown tenant"
