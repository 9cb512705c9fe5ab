#!/bin/bash
# SPDX-License-Identifier: MIT
# A lower Capacity= at a reload is the root's max lowered: it reclaims the
# excess across tenants (the caches give way), like a lower memory.max at
# the top of the tree; the pages the applications use stay.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/bus-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant a "Path=a"
mb_write_tenant b "Path=b"
bus_run

root_pages() { echo $(( $(mgr_prop MemoryCurrent) / PAGE )); }
root_at_most() { [ "$(root_pages)" -le "$1" ]; }

pc_start a a
pc_start b b
assert_eq "alloc ok 64" "$(pc a alloc 64)" "a: the application's pages"
assert_eq "cache ok 1000" "$(pc a cache 1000)" "a: a cache"
assert_eq "alloc ok 64" "$(pc b alloc 64)" "b: the application's pages"
assert_eq "cache ok 1000" "$(pc b cache 1000)" "b: a cache"
[ "$(root_pages)" -ge 2128 ] || fail "usage before the reload: $(root_pages) pages"

pr_setup "Capacity=4M"                                 # 1024 pages
mgr_call Reload >/dev/null
wait_for 30 root_at_most 1024 || fail "usage $(root_pages) stays above the new capacity of 1024 pages"
pass "Capacity=4M at a reload: usage down to $(root_pages) pages"
assert_eq 64 "$(pc_field a app)" "a keeps the pages it uses"
assert_eq 64 "$(pc_field b app)" "b keeps the pages it uses"
[ "$(pc_field a cache)" -lt 1000 ] && [ "$(pc_field b cache)" -lt 1000 ] ||
        fail "not both caches gave way: a $(pc_field a cache), b $(pc_field b cache)"
pass "both caches gave way: a $(pc_field a cache), b $(pc_field b cache) pages left"
settle
leak_check "after the capacity was lowered"
pc_quit a
pc_quit b
leak_check "after the clients left"
