#!/bin/bash
# Debug mode detects each error class, reports it on stderr with the cache
# name and the address, ignores the bad operation and carries on.
. "$top_srcdir/tests/slab-lib.sh"
slab_start_daemon

# check CASE REGEX-AFTER-ADDRESS : the report names the object's address
check() {
        local case=$1 pattern=$2 addr
        slab_client "debug-$case" || fail "debug-$case: the process did not carry on"
        addr=$(sed -n 's/^reported=//p' "$MB_TMP/out")
        [ -n "$addr" ] || fail "debug-$case: no address printed"
        grep -F "membroker slab: " "$MB_TMP/err" | grep -F -- "$addr" | grep -Eq -- "$pattern" ||
                { cat "$MB_TMP/err"; fail "debug-$case: no report matching '$pattern' for $addr"; }
        pass "debug-$case reported: $(head -1 "$MB_TMP/err")"
}

check double-free 'cache "victim": double free of object 0x[0-9a-f]+; ignored'
check wrong-cache 'cache "bystander": free of 0x[0-9a-f]+ into the wrong cache: it belongs to cache "victim"; ignored'
check not-object 'cache "victim": free of 0x[0-9a-f]+: not the start of an object; ignored'
check redzone 'cache "victim": red zone of object 0x[0-9a-f]+ overwritten at 0x[0-9a-f]+ \(object\+100\)'
check use-after-free 'cache "victim": use after free: object 0x[0-9a-f]+ was written after it was freed \(offset 7'
