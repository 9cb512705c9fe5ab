#!/bin/bash
# mb_cache_destroy() of a cache with live objects reports how many and where,
# and returns their number.
. "$top_srcdir/tests/slab-lib.sh"
slab_start_daemon
slab_client destroy-live || fail "destroy-live failed"
assert_eq 10 "$(sed -n 's/^live=//p' "$MB_TMP/out")" "live objects returned by mb_cache_destroy"
first=$(sed -n 's/^first-live=//p' "$MB_TMP/out")
grep -F 'cache "leaky": destroyed with 10 live objects:' "$MB_TMP/err" | grep -qF -- " $first" ||
        { cat "$MB_TMP/err"; fail "the report does not name the live object $first"; }
pass "destroy reported: $(head -1 "$MB_TMP/err")"
