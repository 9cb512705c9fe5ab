#!/bin/bash
# SPDX-License-Identifier: MIT
# Charging ahead of need: under a paced churn far below the refill rate (one
# page every 2 ms against a round trip of well under a millisecond, batch
# 8), the library's thread charges what fills the stock while it still
# has a batch, so no allocation finds its stock empty: 0 misses, in a
# limited tenant far from its limit and in a tenant with no limit.  The
# control: with charging ahead off (MEMBROKER_REFILL=0) the same churn
# misses once a batch.  Near a limit nothing is charged ahead (the Grant's
# headroom): in the "small" tenant (60 pages) the last batches are the
# application's own charges (misses), and every page up to the limit is
# still handed out.  Pages charged ahead are faulted in by the library's
# thread (MADV_POPULATE_WRITE): most pages of the churn are in memory
# when handed out (none with MEMBROKER_POPULATE=0), and every page reads
# zero when handed out, also when the same arena pages were written and
# returned (punched) by an earlier client of the tenant.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup

pages=200
misses_of() { sed -n 's/^misses=\([0-9]*\) .*/\1/p' <<<"$1"; }
resident_of() { sed -n 's/.* resident=\([0-9]*\)$/\1/p' <<<"$1"; }

for tenant in app grp/leaf; do
        out=$("$CLIENT_TOOL" churn "$tenant" "$pages" 2000) || fail "churn in $tenant failed"
        m=$(misses_of "$out")
        [ -n "$m" ] || fail "no miss count from churn in $tenant: $out"
        [ "$m" -eq 0 ] || fail "$tenant: $m allocations found their stock empty under a paced churn ($out)"
        pass "$tenant: the refill landed before the stock ran dry ($out, $pages pages)"
        res=$(resident_of "$out")
        [ "${res:-0}" -ge $((pages / 2)) ] || fail "$tenant: only ${res:-?} of $pages pages were faulted in ahead ($out)"
        pass "$tenant: $res of $pages pages were in memory when handed out"
done

# Again in app: the arena pages the first run wrote (0x77) and returned
# come back punched, populated ahead, and zero (client-tool checks every
# byte).
out=$("$CLIENT_TOOL" churn app "$pages" 2000) || fail "second churn in app failed (a page not zero?): $out"
pass "app again: every page zero after being written, returned and populated ahead ($out)"
out=$(MEMBROKER_POPULATE=0 "$CLIENT_TOOL" churn app "$pages" 2000) || fail "churn without populate failed: $out"
res=$(resident_of "$out")
[ "${res:-1}" -eq 0 ] || fail "MEMBROKER_POPULATE=0: $res pages in memory before their first touch ($out)"
pass "control: without populating ahead no page is in memory before its first touch ($out)"

out=$(MEMBROKER_REFILL=0 "$CLIENT_TOOL" churn app "$pages" 0) || fail "control churn failed"
m=$(misses_of "$out")
[ "${m:-0}" -ge $((pages / 8 - 1)) ] || fail "control: only ${m:-?} misses without charging ahead ($out)"
pass "control: without charging ahead the churn misses once a batch ($out)"

# Near max: 59 pages of a 60-page tenant (one more is the warm-up's), paced.
out=$("$CLIENT_TOOL" churn small 59 2000) || fail "churn in small (60 pages) failed: $out"
m=$(misses_of "$out")
[ "${m:-0}" -ge 1 ] || fail "small: charged ahead up to the limit ($out)"
pass "small: 59 of 60 pages handed out one by one, the last batches charged on demand ($out)"
