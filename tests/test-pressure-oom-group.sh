#!/bin/bash
# SPDX-License-Identifier: MIT
# OOMGroup=yes (memory.oom.group): when an OOM kill chooses a client, the
# highest tenant with OOMGroup=yes between the victim's tenant and the one
# out of memory (mem_cgroup_get_oom_group()) loses all its clients
# together; each counts oom_kill, the group counts oom_group_kill once.
# Clients outside the group are untouched, and the charge goes through.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant p "Path=p" "MemoryMax=4M" "OOMPolicy=kill"     # 1024 pages
mb_write_tenant p-g "Path=p/g" "OOMGroup=yes"
mb_write_tenant p-o "Path=p/o"
mb_write_tenant p-x "Path=p/x"
mb_start_daemon

pc_start g1 p/g
pc_start g2 p/g
pc_start o p/o
pc_start x p/x
assert_eq "alloc ok 592" "$(pc g1 alloc 592)" "g1, the largest client"
assert_eq "alloc ok 96" "$(pc g2 alloc 96)" "g2, small, in the same group"
assert_eq "alloc ok 128" "$(pc o alloc 128)" "o, outside the group"
# 592 + 96 + 128 + 300 > 1024, nothing reclaimable: g1 is chosen, g2 goes
# with it.
assert_eq "alloc ok 300" "$(pc x alloc 300)" "the charge that needed room"

for c in g1 g2; do
        rc=0
        wait "${PC_PID[$c]}" || rc=$?
        assert_eq 137 "$rc" "exit status of $c (SIGKILL)"
done
kill -0 "${PC_PID[o]}" 2>/dev/null || fail "o, outside the group, was killed"
mb_dump_state
assert_eq 2 "$(mb_event_local p/g oom_kill)" "oom_kill events of p/g (one per client)"
assert_eq 1 "$(mb_event_local p/g oom_group_kill)" "oom_group_kill events of p/g"
assert_eq 0 "$(mb_event_local p oom_group_kill)" "oom_group_kill events of p (local)"
assert_eq 0 "$(mb_event_local p/o oom_kill)" "oom_kill events of p/o"
grep -q "killed client [0-9]* (pressure-client, pid ${PC_PID[g2]}) of tenant p/g holding .* (OOMGroup=yes of tenant p/g)" \
        "$MB_TMP/daemon.log" || fail "no group kill of g2 in the log"
assert_eq 128 "$(pc_field o app)" "o keeps its pages"
assert_eq 300 "$(pc_field x app)" "x has its pages"
settle
leak_check "after the group kill"
assert_eq 0 "$(mb_state p/g usage)" "usage of p/g"
pc_quit o
pc_quit x
mb_daemon_alive
