#!/bin/bash
# A client writes 0x42 into free pages it never held, then exits; a new
# client of the same tenant asks for 2,000 pages: every one is zero, as
# membroker.h promises (the daemon checks a grant's pages for data and
# punches them before the Grant goes out).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/attack-lib.sh"

mb_attack_prereqs
mb_write_broker_conf "Capacity=64M"
mb_write_tenant a "Path=a" "AllowUsers=nobody"
mb_start_daemon

for backing in first second; do
        out=$(as_nobody hello a charge 1 expect-ok probe-write 1 2000 0x42 quit) || { echo "$out"; fail "attacker"; }
        echo "$out"
        out=$(as_nobody hello a charge 2000 expect-ok print-held check-pages 0) ||
                { echo "$out" | tail -5; fail "a new client got pages that are not zero ($backing round)"; }
        grep -q '^held=2000$' <<<"$out" || fail "the new client does not hold 2000 pages"
        pass "2000 fresh pages are zero ($backing round)"
done
mb_daemon_alive
mb_stop_clean
