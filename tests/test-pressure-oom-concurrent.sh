#!/bin/bash
# SPDX-License-Identifier: MIT
# Concurrent OOMs kill one victim: mem_cgroup_out_of_memory() is serialised
# (oom_lock), and oom_evaluate_task() chooses no new victim while an earlier
# one (tsk_is_oom_victim(), not yet MMF_OOM_SKIP) is still exiting: the
# charges wait for it to go and retry.  Two clients charge at once into a
# full OOMPolicy=kill tenant whose biggest client exits slowly (held in its
# exit for 2 s): one oom_kill, both charges succeed, nobody else dies.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/pressure-lib.sh"

pr_setup
mb_write_tenant k "Path=k" "MemoryMax=4M" "OOMPolicy=kill"       # 1024 pages
mb_start_daemon

pc_start big k --exit-delay-ms 2000
grep -q 'traced=1' "$MB_TMP/big.out" || skip "ptrace (PTRACE_O_TRACEEXIT) is not permitted here"
pc_start a k
pc_start b k
assert_eq "alloc ok 900" "$(pc big alloc 900)" "the biggest client allocates"

# Both at once: 900 + 200 + 200 > 1024 and nothing is reclaimable.
na=$(wc -l <"$MB_TMP/a.out")
nb=$(wc -l <"$MB_TMP/b.out")
# Read-write opens (as pc's): a write-only open would wait forever for a
# reader if the first charge's OOM took the other client.
echo "alloc 200" 1<>"$MB_TMP/a.in"
echo "alloc 200" 1<>"$MB_TMP/b.in"
both_answered() {
        _pc_lines_above "$MB_TMP/a.out" "$na" && _pc_lines_above "$MB_TMP/b.out" "$nb" && return 0
        kill -0 "${PC_PID[a]}" 2>/dev/null && kill -0 "${PC_PID[b]}" 2>/dev/null || return 0
        return 1
}
wait_for 60 both_answered || fail "the charges did not finish"
kill -0 "${PC_PID[a]}" 2>/dev/null || fail "client a was killed: a second OOM victim"
kill -0 "${PC_PID[b]}" 2>/dev/null || fail "client b was killed: a second OOM victim"
assert_eq "alloc ok 200" "$(sed -n "$((na + 1))p" "$MB_TMP/a.out")" "client a's charge"
assert_eq "alloc ok 200" "$(sed -n "$((nb + 1))p" "$MB_TMP/b.out")" "client b's charge"

rc=0
wait "${PC_PID[big]}" || rc=$?
assert_eq 137 "$rc" "exit status of the biggest client (SIGKILL)"
mb_dump_state
assert_eq 1 "$(mb_event_local k oom_kill)" "oom_kill events (one victim)"
assert_eq 1 "$(mb_dump_field reclaim oom_kills)" "clients the reclaimer killed (its counter)"
settle
leak_check "after the OOM kill"
pc_quit a
pc_quit b
settle
leak_check "after the clients left"
assert_eq 0 "$(mb_state k usage)" "usage after the clients left"
mb_daemon_alive
