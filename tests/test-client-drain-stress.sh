#!/bin/bash
# SPDX-License-Identifier: MIT
# Remote drains against the stock fast path on every CPU: threads pinned to
# each CPU (two per CPU, and one free to migrate) allocate and free
# (contents verified) at MemoryMax under a storm of signals (each aborts the
# restartable sequence in flight), while a thread of the process returns
# every CPU's stock as fast as it can, a second client's failing charges
# make the daemon drain the first client's stocks and `membrokerctl
# reclaim` takes stocked pages; afterwards exactly MemoryMax worth of
# distinct pages can be allocated and the stats slots add up.  Run with the stocks in rseq mode (checked: the remote takes
# fence with membarrier) and with the fall-back forced (MEMBROKER_RSEQ=0).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
# A private bus for membrokerctl reclaim, where the machine has one.
command -v "$BUSCTL" >/dev/null && command -v dbus-daemon >/dev/null && mb_start_bus
mb_client_setup

reclaim_loop() {
        [ -n "$MB_BUS_ADDRESS" ] || return 0
        while [ ! -e "$MB_TMP/stress-done" ]; do
                if mb_ctl reclaim small 32K >/dev/null 2>&1; then
                        echo >>"$MB_TMP/reclaims"
                fi
        done
}

run_case() {
        rm -f "$MB_TMP/stress-done"
        reclaim_loop &
        local loop=$! rc=0
        "$@" || rc=$?
        touch "$MB_TMP/stress-done"
        wait "$loop"
        return $rc
}

# The rseq mode is in use where the machine offers it: its remote takes call
# membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ) on the stock's CPU.
rseq=
if command -v strace >/dev/null && strace -qq -o /dev/null true 2>/dev/null; then
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" CK_RUN_CASE=drain-stress CK_DEFAULT_TIMEOUT=300 \
                strace -f -qq -e trace=membarrier -o "$MB_TMP/trace" "$TEST_CLIENT" >/dev/null && echo "# $(grep -c FLAG_CPU "$MB_TMP/trace") remote takes fenced" ||
                fail "drain-stress failed under strace"
        if grep -q 'MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ.*= 0' "$MB_TMP/trace"; then
                rseq=yes
                grep -q 'MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_CMD_FLAG_CPU' "$MB_TMP/trace" ||
                        fail "rseq registered, but no remote take fenced with membarrier"
                pass "rseq mode: remote takes fence the stock's CPU"
        else
                echo "# no rseq membarrier on this machine: only the fall-back runs"
        fi
fi

run_case env CK_RUN_CASE=drain-stress CK_DEFAULT_TIMEOUT=300 "$TEST_CLIENT" || fail "drain-stress (${rseq:+rseq mode}${rseq:-default mode})"
pass "drain-stress, default mode${rseq:+ (rseq)}"
run_case env MEMBROKER_RSEQ=0 CK_RUN_CASE=drain-stress CK_DEFAULT_TIMEOUT=300 "$TEST_CLIENT" || fail "drain-stress with MEMBROKER_RSEQ=0"
pass "drain-stress, fall-back forced (MEMBROKER_RSEQ=0)"
if [ -n "$MB_BUS_ADDRESS" ]; then
        [ -s "$MB_TMP/reclaims" ] || fail "no membrokerctl reclaim succeeded during the runs"
        pass "$(wc -l <"$MB_TMP/reclaims") reclaims answered during the runs"
fi
