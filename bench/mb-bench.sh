#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/mb-bench.sh - run the benchmark tables (BENCHMARKS.md).
#
#   mb-bench.sh [--output FILE] TABLE...     TABLE: all, hotpath, charge,
#       depth, counters, nolimits, stats, dbus, overhead, slab, scale, reload, latency, sqlite,
#       rightsize, mbmalloc, programs, and
#       flood (not part of all: it needs root and tests/wire-client)
#
# Tables go to stdout (Markdown) and, with --output, to FILE as well;
# progress goes to stderr.  MB_BENCH_QUICK=1 runs everything once with tiny
# counts (CI).  Needs top_builddir and top_srcdir (make bench sets them).
# Root is needed only for the kernel rows (memory cgroups); they are
# skipped with a note otherwise.
set -uo pipefail

. "$top_srcdir/bench/lib.sh"

QUICK=${MB_BENCH_QUICK:-0}
[ "$QUICK" = 0 ] && QUICK=
q() { if [ -n "$QUICK" ]; then echo "$2"; else echo "$1"; fi; }

OUTPUT=
if [ "${1:-}" = --output ]; then
        OUTPUT=$2; shift 2
fi
[ $# -gt 0 ] || set -- all

ALL_TABLES=(hotpath charge depth counters nolimits stats dbus overhead slab scale reload latency sqlite rightsize mbmalloc programs patterns)
STATUS=0

# missing WHAT: print a table stub saying why it could not run
missing() {
        printf '\n## %s\n\nskipped: %s\n' "$1" "$2"
}

need_daemon() {
        mb_have_daemon && [ -x "$BENCH_BIN/bench-broker" ]
}

# ---- table 1 ----
t_hotpath() {
        need_daemon || { missing "Table 1: the hot path" "membrokerd or bench-broker not built"; return; }
        local conf=$MB_TMP/hot
        mb_config "$conf" 4G
        mb_tenant "$conf" hot "Path=hot"
        mb_start_daemon "$conf" || { missing "Table 1: the hot path" "membrokerd did not start"; return 1; }
        "$BENCH_BIN/bench-broker" hotpath "$MB_SOCK" hot
        local rc=$?
        mb_stop_daemon
        return $rc
}

# memcg_child NAME: a fresh child of this process's memory cgroup; prints its
# path, or nothing (and sets MEMCG_SKIP) when that is impossible
memcg_child() {
        local base dir
        MEMCG_SKIP=
        if [ "$(id -u)" -ne 0 ]; then
                MEMCG_SKIP="not root: cannot create memory cgroups"; return 1
        fi
        base=$(mb_memcg_base) || { MEMCG_SKIP="no usable memory cgroup hierarchy (v1 memory controller, or v2 with memory delegated)"; return 1; }
        dir="$base/$1.$$"
        mb_cgroup_make "$dir" || { MEMCG_SKIP="cannot create $1 in this process's memory cgroup"; return 1; }
        MB_BENCH_MEMCG_VERSION="cgroup $(mb_memcg_version "$base")"
        export MB_BENCH_MEMCG_VERSION
        echo "$dir"
}

# ---- table 2 ----
t_charge() {
        need_daemon || { missing "Table 2: charging through the daemon" "membrokerd or bench-broker not built"; return; }
        local conf=$MB_TMP/charge b specs=() memcg base
        mb_config "$conf" 4G
        for b in 1 8 32 64 128; do
                # a limit far away keeps the tenant off any "unlimited" fast
                # path, so that the batch is the configured one
                mb_tenant "$conf" "b$b" "Path=b$b" "ChargeBatch=$b" "MemoryMax=3G"
                specs+=("ChargeBatch $b=b$b")
        done
        specs+=("ChargeBatch 64, pages touched=b64:touch")
        mb_start_daemon "$conf" || { missing "Table 2: charging through the daemon" "membrokerd did not start"; return 1; }
        memcg=$(memcg_child mbbench-charge) || true
        # memcg_child ran in a subshell: recompute what it set
        if [ -n "$memcg" ]; then
                MB_CGROUP_DIRS+=("$memcg")
                base=$(dirname "$memcg")
                MB_BENCH_REPS=${MB_BENCH_REPS:-$(q 15 1)} MB_BENCH_MEMCG_VERSION="cgroup $(mb_memcg_version "$base")" \
                        "$BENCH_BIN/bench-broker" charge "$MB_SOCK" --memcg "$memcg" "$base" "${specs[@]}"
        else
                MB_BENCH_REPS=${MB_BENCH_REPS:-$(q 15 1)} MB_BENCH_MEMCG_SKIP="$(memcg_child_reason)" \
                        "$BENCH_BIN/bench-broker" charge "$MB_SOCK" "${specs[@]}"
        fi
        local rc=$?
        mb_stop_daemon
        [ -n "$memcg" ] && mb_cgroup_remove "$memcg"
        return $rc
}

# why memcg_child would fail (it runs in a subshell, so ask again)
memcg_child_reason() {
        if [ "$(id -u)" -ne 0 ]; then echo "not root: cannot create memory cgroups"
        elif ! mb_memcg_base >/dev/null; then echo "no usable memory cgroup hierarchy (v1 memory controller, or v2 with memory delegated)"
        else echo "cannot create a memory cgroup in this process's own"
        fi
}

# ---- table 3 ----
t_depth() {
        need_daemon || { missing "Table 3: hierarchy depth" "membrokerd or bench-broker not built"; return; }
        local conf=$MB_TMP/depth d i path specs=() letters=(x a b c d e f g h)
        mb_config "$conf" 4G
        for d in 1 2 4 8; do
                path=
                for ((i = 1; i <= d; i++)); do
                        path="${path:+$path/}${letters[$d]}$i"
                        mb_tenant "$conf" "${letters[$d]}$i" "Path=$path" "MemoryMax=3G" "MemoryHigh=3G"
                done
                specs+=("depth $d=$path")
        done
        mb_start_daemon "$conf" || { missing "Table 3: hierarchy depth" "membrokerd did not start"; return 1; }
        # ±5% questions: more repetitions (cheap tables 2 to 5)
        MB_BENCH_REPS=${MB_BENCH_REPS:-$(q 15 1)} "$BENCH_BIN/bench-broker" depth "$MB_SOCK" "${specs[@]}"
        local rc=$?
        mb_stop_daemon
        return $rc
}

# ---- table 4 ----
t_counters() {
        [ -x "$BENCH_BIN/bench-counters" ] || { missing "Table 4: counter layout" "bench-counters not built"; return; }
        MB_BENCH_REPS=${MB_BENCH_REPS:-$(q 15 1)} "$BENCH_BIN/bench-counters"
}

# ---- table 5 ----
t_nolimits() {
        need_daemon || { missing "Table 5: nothing limited vs limits everywhere" "membrokerd or bench-broker not built"; return; }
        local conf=$MB_TMP/nolim lim=("MemoryMax=3G" "MemoryHigh=3G" "MemoryLow=64M" "MemoryMin=32M")
        mb_config "$conf" 4G
        mb_tenant "$conf" free "Path=free/app"
        mb_tenant "$conf" lim "Path=lim" "${lim[@]}"
        mb_tenant "$conf" limapp "Path=lim/app" "${lim[@]}"
        mb_start_daemon "$conf" || { missing "Table 5: nothing limited vs limits everywhere" "membrokerd did not start"; return 1; }
        MB_BENCH_REPS=${MB_BENCH_REPS:-$(q 15 1)} "$BENCH_BIN/bench-broker" nolimits "$MB_SOCK" free/app lim/app
        local rc=$?
        mb_stop_daemon
        return $rc
}

# ---- table 6 ----
t_stats() {
        [ -x "$BENCH_BIN/bench-stats" ] || { missing "Table 6: statistics" "bench-stats not built"; return; }
        "$BENCH_BIN/bench-stats" || return 1
        t_stats_callgrind
}

# Table 6c: instruction counts of the same reads under callgrind (immune to
# machine noise).  One run of each read, counted between client requests.
t_stats_callgrind() {
        local title="Table 6c: instructions per read (callgrind)"
        if [ -n "$QUICK" ]; then
                missing "$title" "not run in quick mode"; return 0
        fi
        command -v valgrind >/dev/null || { missing "$title" "valgrind is not installed"; return 0; }
        local dir=$MB_TMP/callgrind
        mkdir -p "$dir"
        if ! MB_BENCH_CALLGRIND=1 valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
                "$BENCH_BIN/bench-stats" >/dev/null 2>"$dir/valgrind.log"; then
                missing "$title" "valgrind failed: $(tail -1 "$dir/valgrind.log")"; return 0
        fi
        printf '\n## %s\n\n' "$title"
        echo "The reads of table 6a, each run once under valgrind --tool=callgrind and counted between"
        echo "CALLGRIND_ZERO_STATS and CALLGRIND_DUMP_STATS_AT (instructions executed, Ir)."
        echo
        echo "| read | instructions | ratio to the full flush |"
        echo "| --- | ---: | ---: |"
        local f desc ir full= rows=()
        # dumps are numbered in the order the program made them
        for f in $(ls "$dir"/cg.out.* 2>/dev/null | sort -t. -k3 -n); do
                desc=$(sed -n 's/^desc: Trigger: Client Request: //p' "$f")
                ir=$(sed -n 's/^summary: //p' "$f" | awk '{ print $1 }')
                [ -n "$desc" ] && [ -n "$ir" ] || continue
                rows+=("$desc|$ir")
                [ "$desc" = "full flush" ] && full=$ir
        done
        local r
        for r in "${rows[@]}"; do
                desc=${r%|*}; ir=${r#*|}
                if [ -n "$full" ] && [ "$ir" -gt 0 ]; then
                        if [ "$desc" = "full flush" ]; then
                                echo "| $desc | $ir | 1.00× (base) |"
                        else
                                echo "| $desc | $ir | $(awk -v a="$ir" -v b="$full" 'BEGIN { r = a / b; if (r < 0.1) printf "%.2g×", r; else printf "%.2f×", r }') |"
                        fi
                else
                        echo "| $desc | $ir | — |"
                fi
        done
        echo
}

# ---- table 7 ----
t_dbus() {
        local title="Table 7: D-Bus DumpStats() vs the kernel's memory.stat"
        local n i conf=$MB_TMP/dbus busfile=$MB_TMP/dump.argv catfile=$MB_TMP/cat.argv memcg= catrow
        local compactfile=$MB_TMP/compact.argv
        n=$(q 1000 20)
        mb_have_daemon || { missing "$title" "membrokerd not built"; return; }
        command -v "$BUSCTL" >/dev/null || { missing "$title" "busctl is not installed"; return; }
        mb_config "$conf" 4G
        for ((i = 1; i <= n; i++)); do
                printf '[Tenant]\nPath=t/%04d\n' "$i" >"$conf/tenants.d/t$i.conf"
        done
        say "table 7: starting membrokerd with $n tenants on a private bus"
        mb_start_daemon "$conf" bus || { missing "$title" "membrokerd did not start on the private bus"; return 1; }
        printf '%s\n' "$(command -v "$BUSCTL")" "--address=$MB_BUS_ADDRESS" call org.membroker1 \
                /org/membroker1 org.membroker1.Manager DumpStats >"$busfile"
        printf '%s\n' "$(command -v "$BUSCTL")" "--address=$MB_BUS_ADDRESS" call org.membroker1 \
                /org/membroker1 org.membroker1.Manager DumpStatsCompact >"$compactfile"
        local got
        got=$("$BUSCTL" --address="$MB_BUS_ADDRESS" call org.membroker1 /org/membroker1 \
                org.membroker1.Manager DumpStats 2>&1 | head -c 40)
        if [ "${got%% *}" != "a(sa(st))" ]; then
                busfile="skip:DumpStats failed: ${got:-no answer}"
        fi
        got=$("$BUSCTL" --address="$MB_BUS_ADDRESS" call org.membroker1 /org/membroker1 \
                org.membroker1.Manager DumpStatsCompact 2>&1 | head -c 40)
        if [ "${got%% *}" != "asasasa(satatat)" ]; then
                compactfile="skip:DumpStatsCompact failed: ${got:-no answer}"
        fi

        if memcg=$(memcg_child mbbench-stat); then
                MB_CGROUP_DIRS+=("$memcg")
                MB_BENCH_MEMCG_VERSION="cgroup $(mb_memcg_version "$(dirname "$memcg")")"
                say "table 7: creating $n kernel memory cgroups"
                # one mkdir for all: a process per cgroup costs more than the cgroup
                (cd "$memcg" && eval "mkdir cg{1..$n}")
                { echo cat; for ((i = 1; i <= n; i++)); do echo "$memcg/cg$i/memory.stat"; done; } >"$catfile"
                catrow=$catfile
        else
                catrow="skip:$(memcg_child_reason)"
        fi
        say "table 7: timing"
        "$BENCH_BIN/bench-exec" --title "$title" \
                --question "Statistics of $n tenants in one call: busctl calling DumpStats() on the private bus (the daemon flushes and serializes $n tenants) against cat of $n kernel memory.stat files of $n fresh memory cgroups (${MB_BENCH_MEMCG_VERSION:-cgroup}; what the kernel's local-stats work timed). Both as whole commands, output discarded; ms per command." \
                --target "1,000-tenant DumpStats faster than cat of 1,000 memory.stat" 1 3 \
                --within 0.5 --target "1,000-tenant DumpStats via busctl at most 0.5× cat of 1,000 memory.stat" 1 3 \
                --within 0.5 --target "1,000-tenant DumpStatsCompact via busctl at most 0.5× cat of 1,000 memory.stat" 2 3 \
                "busctl call … DumpStats() ($n tenants)" "$busfile" \
                "busctl call … DumpStatsCompact() ($n tenants)" "$compactfile" \
                "cat $n × memory.stat" "$catrow"
        local rc=$?
        if [ -n "$memcg" ]; then
                say "table 7: removing the $n kernel memory cgroups"
                (cd "$memcg" && eval "rmdir cg{1..$n}" 2>/dev/null)
                mb_cgroup_remove "$memcg"
        fi
        mb_stop_daemon
        t_scrape || rc=1
        return $rc
}

# ---- table 7b: one scrape of many tenants ----

# cpu_ns PID: CPU time of every thread of PID so far, in ns (schedstat)
cpu_ns() {
        cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d\n", s }'
}

# daemon_cpu_per_call K CMD...: median over K runs of CMD of the daemon's
# CPU time during the run, in ms (one sample per run)
daemon_cpu_per_call() {
        local k=$1 i t0 t1; shift
        for ((i = 0; i < k; i++)); do
                t0=$(cpu_ns "$MB_DAEMON_PID")
                "$@" >/dev/null 2>&1 || return 1
                t1=$(cpu_ns "$MB_DAEMON_PID")
                echo $((t1 - t0))
        done | sort -n | awk '{ v[NR] = $1 } END { printf "%.1f|%.1f|%.1f\n", v[int((NR + 1) / 2)] / 1e6, v[1] / 1e6, v[NR] / 1e6 }'
}

t_scrape() {
        local title="Table 7b: one scrape of 10,000 tenants"
        local n k i conf=$MB_TMP/scrape port exporter="$top_builddir/tools/membroker-exporter" exp_pid= row
        n=$(q 10000 50)
        k=$(q 15 2)
        mb_have_daemon || { missing "$title" "membrokerd not built"; return; }
        command -v "$BUSCTL" >/dev/null || { missing "$title" "busctl is not installed"; return; }
        mb_config "$conf" 64G
        awk -v dir="$conf/tenants.d" -v n="$n" 'BEGIN {
                for (i = 1; i <= n; i++) {
                        f = sprintf("%s/t%05d.conf", dir, i)
                        printf "[Tenant]\nPath=fleet/t%05d\n", i > f
                        close(f)
                }
        }'
        say "table 7b: starting membrokerd with $n tenants on a private bus"
        mb_start_daemon "$conf" bus || { missing "$title" "membrokerd did not start on the private bus"; return 1; }
        local call=("$BUSCTL" --address="$MB_BUS_ADDRESS" call org.membroker1 /org/membroker1 org.membroker1.Manager)
        printf '\n## %s\n\n' "$title"
        printf 'What one scrape of a broker with %s tenants costs: the daemon'"'"'s CPU time (all its threads, from /proc/PID/task/*/schedstat) while busctl calls each method once, output discarded (GetManagedObjects: the tenants'"'"' properties, what the exporter read before DumpStatsCompact); and the whole answer of membroker-exporter to GET /metrics (curl, wall time: its D-Bus call, its parsing and the Prometheus text of every tenant). Median of %s runs, ms.\n\n' "$n" "$k"
        echo "| what | ms (median) | min–max |"
        echo "| --- | ---: | ---: |"
        local dump compact objs
        dump=$(daemon_cpu_per_call "$k" "${call[@]}" DumpStats) || dump="—|—|—"
        compact=$(daemon_cpu_per_call "$k" "${call[@]}" DumpStatsCompact) || compact="—|—|—"
        objs=$(daemon_cpu_per_call "$k" "$BUSCTL" --address="$MB_BUS_ADDRESS" call org.membroker1 /org/membroker1 \
                org.freedesktop.DBus.ObjectManager GetManagedObjects) || objs="—|—|—"
        for row in "daemon CPU: DumpStats() ($n tenants)|$dump" "daemon CPU: DumpStatsCompact() ($n tenants)|$compact" \
                   "daemon CPU: GetManagedObjects() ($n tenants)|$objs"; do
                IFS='|' read -r what med lo hi <<<"$row"
                echo "| $what | $med | $lo–$hi |"
        done
        local exp="—|—|—" exp_cpu="—|—|—" why=
        if [ ! -x "$exporter" ]; then
                why="membroker-exporter not built (libmicrohttpd missing)"
        elif ! command -v curl >/dev/null; then
                why="curl is not installed"
        else
                port=$((20000 + RANDOM % 20000))
                "$exporter" --address="$MB_BUS_ADDRESS" --listen="127.0.0.1:$port" >>"$MB_TMP/exporter.log" 2>&1 &
                exp_pid=$!
                if wait_for 20 curl -sf -o /dev/null "http://127.0.0.1:$port/metrics"; then
                        exp=$(for ((i = 0; i < k; i++)); do
                                curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$port/metrics"
                        done | sort -n | awk '{ v[NR] = $1 * 1000 } END { printf "%.1f|%.1f|%.1f\n", v[int((NR + 1) / 2)], v[1], v[NR] }')
                        exp_cpu=$(daemon_cpu_per_call "$k" curl -s -o /dev/null "http://127.0.0.1:$port/metrics") || exp_cpu="—|—|—"
                else
                        why="membroker-exporter did not answer: $(tail -1 "$MB_TMP/exporter.log")"
                fi
                kill "$exp_pid" 2>/dev/null
                wait "$exp_pid" 2>/dev/null
        fi
        for row in "daemon CPU: one exporter scrape ($n tenants)|$exp_cpu" \
                   "membroker-exporter: whole answer to GET /metrics ($n tenants)|$exp"; do
                IFS='|' read -r what med lo hi <<<"$row"
                echo "| $what | $med | $lo–$hi |"
        done
        echo
        [ -n "$why" ] && echo "exporter rows: $why" && echo
        # targets (the full run only: QUICK counts are not the question)
        local cpu_med=${exp_cpu%%|*} ans_med=${exp%%|*}
        if [ -n "$QUICK" ]; then
                echo "- target \"one scrape of 10,000 tenants: daemon at most 20 ms, exporter at most 100 ms\": not measured (quick run, $n tenants)"
        elif [ "$cpu_med" = "—" ] || [ "$ans_med" = "—" ]; then
                echo "- target \"one scrape of 10,000 tenants: daemon at most 20 ms, exporter at most 100 ms\": not measured (${why:-no figure})"
        else
                local met
                met=$(awk -v c="$cpu_med" -v a="$ans_med" 'BEGIN { print (c <= 20 && a <= 100) ? "met" : "MISSED" }')
                echo "- target \"one scrape of 10,000 tenants: daemon at most 20 ms, exporter at most 100 ms\": **$met** (daemon $cpu_med ms, exporter $ans_med ms)"
        fi
        mb_stop_daemon
}

# ---- table 13 ----
t_latency() {
        need_daemon || { missing "Table 13: allocation latency under steady churn" "membrokerd not built"; return; }
        [ -x "$BENCH_BIN/bench-latency" ] || { missing "Table 13: allocation latency under steady churn" "bench-latency not built (sanitizer build)"; return; }
        local conf=$MB_TMP/latency
        mb_config "$conf" 4G
        # "lim": a limit far away (the configured batch, 64); "unl": nothing
        # limited up the tree (4 x the batch, charged ahead while the root
        # stays below half its capacity)
        mb_tenant "$conf" lim "Path=lim" "ChargeBatch=64" "MemoryMax=3G"
        mb_tenant "$conf" unl "Path=unl"
        mb_start_daemon "$conf" || { missing "Table 13: allocation latency under steady churn" "membrokerd did not start"; return 1; }
        MEMBROKER_SOCKET="$MB_SOCK" "$BENCH_BIN/bench-latency"
        local rc=$?
        mb_stop_daemon
        t_latency_huge || rc=$?
        return $rc
}

# huge_row OUT PAGESIZE BATCH [BROKER KEY...]: one row of table 13b, its
# own daemon; the figures (or "skipped: why") in OUT
huge_row() {
        local out=$1 ps=$2 batch=$3 conf=$MB_TMP/huge; shift 3
        mb_config "$conf" 4G "PageSize=$ps" "$@"
        mb_tenant "$conf" t "Path=t" "ChargeBatch=$batch" "MemoryMax=3G"
        if ! mb_start_daemon "$conf"; then
                echo "skipped: membrokerd did not start ($(grep -m1 'error' "$MB_TMP/daemon.log" | tail -c 150))" >"$out"
                return 0
        fi
        MEMBROKER_SOCKET="$MB_SOCK" "$BENCH_BIN/bench-latency" --bytes >"$out" || echo "skipped: the row failed" >"$out"
        # the same daemon, the library's thread not faulting pages in
        if [ -n "${HUGE_NOPOP_OUT:-}" ]; then
                MEMBROKER_POPULATE=0 MEMBROKER_SOCKET="$MB_SOCK" "$BENCH_BIN/bench-latency" --bytes >"$HUGE_NOPOP_OUT" ||
                        echo "skipped: the row failed" >"$HUGE_NOPOP_OUT"
        fi
        mb_stop_daemon
}

# ---- table 13b: huge pages (hugetlb pages need root: 160 of them are
# reserved for the row, and the pool put back) ----
t_latency_huge() {
        local rows=() f=$MB_TMP/huge-
        huge_row "${f}4k" 4K 64
        rows+=("PageSize=4K (4 KiB shmem pages)=${f}4k")
        huge_row "${f}no" 2M 8
        rows+=("PageSize=2M, HugePages=no (4 KiB shmem pages)=${f}no")
        HUGE_NOPOP_OUT="${f}thp0" huge_row "${f}thp" 2M 8 "HugePages=thp"
        rows+=("PageSize=2M, HugePages=thp=${f}thp" "PageSize=2M, HugePages=thp, MEMBROKER_POPULATE=0=${f}thp0")
        if [ -n "$QUICK" ]; then
                # make -j check runs tests that count the pool's pages
                echo "skipped: quick run (no hugetlb pages reserved)" >"${f}tlb"
        elif [ "$(id -u)" != 0 ] || [ ! -w "$MB_HUGETLB_POOL/nr_hugepages" ]; then
                echo "skipped: not root (no hugetlb pages can be reserved)" >"${f}tlb"
        else
                MB_HUGETLB_ORIG=$(cat "$MB_HUGETLB_POOL/nr_hugepages")
                echo $((MB_HUGETLB_ORIG + 160)) >"$MB_HUGETLB_POOL/nr_hugepages"
                if [ "$(cat "$MB_HUGETLB_POOL/free_hugepages")" -lt 160 ]; then
                        echo "skipped: fewer than 160 free 2 MiB hugetlb pages could be reserved" >"${f}tlb"
                else
                        huge_row "${f}tlb" 2M 8 "HugePages=hugetlbfs"
                fi
                echo "$MB_HUGETLB_ORIG" >"$MB_HUGETLB_POOL/nr_hugepages"
                MB_HUGETLB_ORIG=
        fi
        rows+=("PageSize=2M, HugePages=hugetlbfs=${f}tlb")
        "$BENCH_BIN/bench-latency" --huge "${rows[@]}"
}

# ---- table 14 ----
# Right-sizing: a tenant with MemoryPressureTarget= and one client whose cold
# cache is 10x its hot set, sampled every second while the loop converges.
t_rightsize() {
        local title="Table 14: right-sizing (MemoryPressureTarget=)"
        local client=$top_builddir/tests/rightsize-client hot=256 cold=2560 secs target="some avg10 1%" pid rc
        need_daemon || { missing "$title" "membrokerd not built"; return; }
        [ -x "$BENCH_BIN/bench-rightsize" ] || { missing "$title" "bench-rightsize not built"; return; }
        [ -x "$client" ] || { missing "$title" "tests/rightsize-client not built"; return; }
        secs=$(q 90 3)
        local conf=$MB_TMP/rightsize
        mb_config "$conf" 1G "ChargeBatch=16" "RightSizeIntervalMSec=500"
        mb_tenant "$conf" rs "Path=rs" "MemoryPressureTarget=$target"
        mb_start_daemon "$conf" bus || { missing "$title" "membrokerd did not start"; return 1; }
        "$client" --socket "$MB_SOCK" --tenant rs --hot $hot --cold $cold >"$MB_TMP/rs.out" 2>"$MB_TMP/rs.err" &
        pid=$!
        if ! wait_for 60 grep -q '^ready' "$MB_TMP/rs.out"; then
                kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
                mb_stop_daemon
                missing "$title" "rightsize-client did not start: $(head -c 200 "$MB_TMP/rs.err")"
                return 1
        fi
        "$BENCH_BIN/bench-rightsize" "$MB_BUS_ADDRESS" rs $((hot * 4096)) $((cold * 4096)) "$secs" "$target"
        rc=$?
        kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
        mb_stop_daemon
        return $rc
}

# ---- table 8 ----
t_overhead() {
        need_daemon || { missing "Table 8: memory overhead" "membrokerd not built"; return; }
        [ -x "$BENCH_BIN/bench-overhead" ] || { missing "Table 8: memory overhead" "bench-overhead not built"; return; }
        "$BENCH_BIN/bench-overhead" "$MEMBROKERD" "$MB_TMP/overhead"
}

# ---- table 9 ----
t_slab() {
        need_daemon || { missing "Table 9: slab caches" "membrokerd not built"; return; }
        [ -x "$BENCH_BIN/bench-slab" ] || { missing "Table 9: slab caches" "bench-slab not built"; return; }
        local conf=$MB_TMP/slab
        mb_config "$conf" 4G
        mb_tenant "$conf" slab "Path=slab"
        mb_start_daemon "$conf" || { missing "Table 9: slab caches" "membrokerd did not start"; return 1; }
        "$BENCH_BIN/bench-slab" "$MB_SOCK" slab
        local rc=$?
        mb_stop_daemon
        return $rc
}

# ---- table 15 ----
t_sqlite() {
        local title="Table 15: SQLite page cache on broker pages"
        need_daemon || { missing "$title" "membrokerd not built"; return; }
        [ -x "$BENCH_BIN/bench-sqlite" ] || { missing "$title" "bench-sqlite not built"; return; }
        local conf=$MB_TMP/sqlite
        mb_config "$conf" 4G
        mb_tenant "$conf" sqlite "Path=sqlite"
        mkdir -p "$MB_TMP/sqlite-db"
        mb_start_daemon "$conf" || { missing "$title" "membrokerd did not start"; return 1; }
        "$BENCH_BIN/bench-sqlite" "$MB_SOCK" sqlite "$MB_TMP/sqlite-db"
        local rc=$?
        mb_stop_daemon
        return $rc
}

# ---- table 16 ----
t_mbmalloc() {
        local title="Table 16: mb_malloc() by size class"
        need_daemon || { missing "$title" "membrokerd not built"; return; }
        [ -x "$BENCH_BIN/bench-mbmalloc" ] || { missing "$title" "bench-mbmalloc not built"; return; }
        local conf=$MB_TMP/mbmalloc
        mb_config "$conf" 4G
        mb_tenant "$conf" mall "Path=mall"
        mb_start_daemon "$conf" || { missing "$title" "membrokerd did not start"; return 1; }
        "$BENCH_BIN/bench-mbmalloc" "$MB_SOCK" mall
        local rc=$?
        mb_stop_daemon
        return $rc
}

# ---- table 17 ----
# programs_workloads DIR: the three workloads' files and ARGVFILEs in DIR
programs_workloads() {
        local dir=$1 rows=$(q 400000 2000) funcs=$(q 400 10) i
        mkdir -p "$dir"
        cat >"$dir/alloc.py" <<PYEOF
d = {}
for r in range(3):
    for i in range($(q 200000 1000)):
        d[i] = [str(i)] * (i % 5) + [i * 1.5, {'k': i}]
    x = sorted(d.items(), key=lambda kv: -kv[0])
    s = ''.join(str(k) for k, _ in x[:50000])
    d.clear()
print(len(x), len(s))
PYEOF
        cat >"$dir/work.sql" <<SQLEOF
create table t(a integer primary key, b text, c real);
with recursive n(x) as (select 1 union all select x + 1 from n where x < $rows)
insert into t select x, printf('row-%08d-%s', x, hex(x * 7919)), x / 3.0 from n;
create index tb on t(b);
select count(*), sum(length(b)) from t where b > 'row-1';
update t set c = c * 3 where a % 2 = 0;
select count(*) from t t1 join t t2 on t1.a = t2.a + 1 where t1.b < 'row-2';
select b, count(*) from t group by substr(b, 1, 9) order by 2 desc limit 3;
SQLEOF
        {
                echo '#include <stdio.h>'
                echo '#include <stdlib.h>'
                echo '#include <string.h>'
                for ((i = 0; i < funcs; i++)); do
                        echo "struct s$i { int a[$((i % 7 + 1))]; double d; char *p; };"
                        echo "static int f$i(struct s$i *s, int n) { int r = 0; for (int k = 0; k < n; k++) { r += s->a[k % $((i % 7 + 1))] * k; if (r > $i) r ^= (int) strlen(s->p); } return r + (int) s->d; }"
                done
                echo 'int main(int argc, char **argv) { long t = 0;'
                for ((i = 0; i < funcs; i++)); do
                        echo "  { struct s$i v = { .d = $i, .p = argv[0] }; memset(v.a, argc, sizeof v.a); t += f$i(&v, argc + $i); }"
                done
                printf '%s\n' '  printf("%ld\n", t); return 0; }'
        } >"$dir/gen.c"
        # The interpreter itself, not a wrapper in front of it (pyenv's shims
        # are bash scripts that fork a dozen times, each process a client of
        # its own under membroker-run): the benchmark times Python.
        local py
        py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || py=$(command -v python3)
        printf '%s\n' "$py" "$dir/alloc.py" >"$dir/python.argv"
        printf '%s\n' sqlite3 ':memory:' ".read $dir/work.sql" >"$dir/sqlite.argv"
        printf '%s\n' gcc -O2 -c "$dir/gen.c" -o "$dir/gen.o" >"$dir/gcc.argv"
}

# shim_run_paths: set run (membroker-run) and libpath (its library path,
# or empty) for tables 17 and 18: the real binary, not libtool's
# uninstalled wrapper (a bash script that costs each run ~9 ms and ~1,700
# page faults of its own); the library path then applies to every way alike.
shim_run_paths() {
        run=$top_builddir/tools/membroker-run libpath=
        if [ -x "$top_builddir/tools/.libs/membroker-run" ]; then
                run=$top_builddir/tools/.libs/membroker-run
                libpath=$top_builddir/client/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        fi
}

t_programs() {
        local title="Table 17: real programs under membroker-run" p
        need_daemon || { missing "$title" "membrokerd not built"; return; }
        [ -x "$BENCH_BIN/bench-programs" ] || { missing "$title" "bench-programs not built (sanitizer build)"; return; }
        [ -x "$top_builddir/tools/membroker-run" ] || { missing "$title" "membroker-run not built"; return; }
        for p in python3 sqlite3 gcc; do
                command -v "$p" >/dev/null || { missing "$title" "$p is not installed"; return; }
        done
        local conf=$MB_TMP/programs dir=$MB_TMP/programs-work
        mb_config "$conf" 4G
        mb_tenant "$conf" prog "Path=prog" "MemoryMax=2G"
        mb_start_daemon "$conf" || { missing "$title" "membrokerd did not start"; return 1; }
        programs_workloads "$dir"
        local run libpath
        shim_run_paths
        LD_LIBRARY_PATH=${libpath:-${LD_LIBRARY_PATH:-}} \
        MEMBROKER_PRELOAD="${MEMBROKER_PRELOAD:-$top_builddir/client/.libs/libmembroker-preload.so}" \
                "$BENCH_BIN/bench-programs" --run "$run" --socket "$MB_SOCK" --tenant prog \
                "python3 (dicts, lists, strings)" "$dir/python.argv" \
                "sqlite3 (insert, index, update, join)" "$dir/sqlite.argv" \
                "gcc -O2 -c (a generated file)" "$dir/gcc.argv"
        local rc=$?
        mb_stop_daemon
        return $rc
}

# ---- table 18 ----
# The allocation patterns of bench-patterns under glibc, tcmalloc, jemalloc,
# mimalloc and membroker-run, in one run.
t_patterns() {
        local title="Table 18: allocation patterns under membroker-run" p scale=$(q 3 1)
        need_daemon || { missing "$title" "membrokerd not built"; return; }
        [ -x "$BENCH_BIN/bench-programs" ] || { missing "$title" "bench-programs not built (sanitizer build)"; return; }
        [ -x "$BENCH_BIN/bench-patterns" ] || { missing "$title" "bench-patterns not built"; return; }
        local conf=$MB_TMP/patterns dir=$MB_TMP/patterns-work
        mb_config "$conf" 4G
        mb_tenant "$conf" pat "Path=pat" "MemoryMax=3G"
        mb_start_daemon "$conf" || { missing "$title" "membrokerd did not start"; return 1; }
        mkdir -p "$dir"
        for p in large xthread larson simple thread; do
                printf '%s\n' "$BENCH_BIN/bench-patterns" "$p" "$scale" >"$dir/$p.argv"
        done
        local run libpath
        shim_run_paths
        LD_LIBRARY_PATH=${libpath:-${LD_LIBRARY_PATH:-}} \
        MEMBROKER_PRELOAD="${MEMBROKER_PRELOAD:-$top_builddir/client/.libs/libmembroker-preload.so}" \
                "$BENCH_BIN/bench-programs" --patterns --run "$run" --socket "$MB_SOCK" --tenant pat \
                "large (blocks of 5-25 MiB, 20 live)" "$dir/large.argv" \
                "xthread (one thread allocates, another frees)" "$dir/xthread.argv" \
                "larson (a server's churn, generations of threads)" "$dir/larson.argv" \
                "simple (batches of small blocks, one thread)" "$dir/simple.argv" \
                "thread (the same in one thread per CPU)" "$dir/thread.argv"
        local rc=$?
        mb_stop_daemon
        return $rc
}

# ---- table 10 ----
t_scale() {
        need_daemon || { missing "Table 10: scale" "membrokerd not built"; return; }
        [ -x "$BENCH_BIN/bench-scale" ] || { missing "Table 10: scale" "bench-scale not built"; return; }
        mb_start_bus || { missing "Table 10: scale" "no dbus-daemon"; return; }
        "$BENCH_BIN/bench-scale" "$MEMBROKERD" "$MB_TMP/scale" "$MB_BUS_ADDRESS" "$(command -v "$BUSCTL")"
}

# ---- table 11 ----
# Start-up and Reload() of many tenant files: N files of one [Tenant] each
# (a limit and a protection, under one parent); membrokerd started on a
# private bus, timed from its exec to the socket listening and the bus name
# owned (what READY=1 waits for); then Reload() over the bus with one limit
# changed, timed as the busctl round trip, and the daemon's own account of
# the reload (files read off the main loop, tree lock held).
reload_gen() {
        awk -v dir="$1/tenants.d" -v n="$2" -v first="$3" 'BEGIN {
                for (i = 1; i <= n; i++) {
                        f = sprintf("%s/s%05d.conf", dir, i)
                        printf "[Tenant]\nPath=scale/t%05d\nMemoryMax=%s\nMemoryLow=64K\n", i, i == 1 ? first : "4M" > f
                        close(f)
                }
        }'
}

median_of() { sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%d %d %d", v[int((NR + 1) / 2)], v[1], v[NR] }'; }

t_reload() {
        local title="Table 11: start-up and Reload() of many tenant files"
        local n sizes reps i conf t0 a b c line start_ms reload_ms read_ms lock_ms verdict target=
        mb_have_daemon || { missing "$title" "membrokerd not built"; return; }
        command -v "$BUSCTL" >/dev/null || { missing "$title" "busctl is not installed"; return; }
        mb_start_bus || { missing "$title" "no dbus-daemon"; return; }
        sizes=$(q "10000 30000" "500 1000")
        reps=${MB_BENCH_REPS:-$(q 5 1)}
        printf '\n## %s\n\n' "$title"
        echo "Each tenants.d/ file holds one [Tenant] (Path=scale/tNNNNN, MemoryMax=, MemoryLow=); membrokerd runs"
        echo "on a private dbus-daemon. Start-up: exec to the socket listening and org.membroker1 owned (the"
        echo "conditions of READY=1). Reload(): busctl round trip with one limit changed; \"read\" and \"locked\" are"
        echo "the daemon's own account (files read and parsed off the main loop; tree write lock held). $reps runs,"
        echo "median and min–max, in ms."
        echo
        echo "| tenants | start-up | Reload() | files read (off the loop) | tree lock held |"
        echo "| --- | ---: | ---: | ---: | ---: |"
        for n in $sizes; do
                conf=$MB_TMP/reload$n
                mb_config "$conf" 4G
                reload_gen "$conf" "$n" 4M
                : >"$MB_TMP/r.start"; : >"$MB_TMP/r.reload"; : >"$MB_TMP/r.read"; : >"$MB_TMP/r.lock"
                for ((i = 1; i <= reps; i++)); do
                        say "table 11: $n tenants, run $i"
                        : >"$MB_TMP/daemon.log"
                        rm -f "$MB_TMP/mb.sock"
                        mkdir -p "$MB_TMP/state"
                        t0=$(date +%s%N)
                        "$MEMBROKERD" --config-dir "$conf" --socket "$MB_TMP/mb.sock" --state-dir "$MB_TMP/state" \
                                --address "$MB_BUS_ADDRESS" >>"$MB_TMP/daemon.log" 2>&1 &
                        MB_DAEMON_PID=$!
                        until [ -S "$MB_TMP/mb.sock" ]; do
                                kill -0 "$MB_DAEMON_PID" 2>/dev/null || break
                                sleep 0.002
                        done
                        until "$BUSCTL" --address="$MB_BUS_ADDRESS" status org.membroker1 >/dev/null 2>&1; do
                                kill -0 "$MB_DAEMON_PID" 2>/dev/null || break
                                sleep 0.002
                        done
                        a=$(date +%s%N)
                        kill -0 "$MB_DAEMON_PID" 2>/dev/null || { mb_stop_daemon; missing "$title" "membrokerd did not start"; return 1; }
                        echo $(( (a - t0) / 1000000 )) >>"$MB_TMP/r.start"
                        reload_gen "$conf" "$n" $((4 + i))M
                        b=$(date +%s%N)
                        "$BUSCTL" --address="$MB_BUS_ADDRESS" --timeout=600 call org.membroker1 /org/membroker1 \
                                org.membroker1.Manager Reload >/dev/null || { mb_stop_daemon; missing "$title" "Reload() failed"; return 1; }
                        c=$(date +%s%N)
                        echo $(( (c - b) / 1000000 )) >>"$MB_TMP/r.reload"
                        line=$(grep -o 'files read in [0-9]* ms, tree lock held [0-9]* ms' "$MB_TMP/daemon.log" | tail -1)
                        echo "$line" | awk '{ print $4 }' >>"$MB_TMP/r.read"
                        echo "$line" | awk '{ print $9 }' >>"$MB_TMP/r.lock"
                        mb_stop_daemon
                done
                start_ms=($(median_of <"$MB_TMP/r.start"))
                reload_ms=($(median_of <"$MB_TMP/r.reload"))
                read_ms=($(median_of <"$MB_TMP/r.read"))
                lock_ms=($(median_of <"$MB_TMP/r.lock"))
                echo "| $n | ${start_ms[0]} (${start_ms[1]}–${start_ms[2]}) | ${reload_ms[0]} (${reload_ms[1]}–${reload_ms[2]}) |" \
                        "${read_ms[0]} (${read_ms[1]}–${read_ms[2]}) | ${lock_ms[0]} (${lock_ms[1]}–${lock_ms[2]}) |"
                rm -rf "$conf"
                if [ "$n" = 30000 ]; then
                        verdict="**met**"
                        [ "${start_ms[0]}" -lt 1000 ] && [ "${reload_ms[0]}" -lt 1000 ] || verdict="**MISSED**"
                        target="- target \"start-up and Reload() of 30,000 tenants each under 1 s\": $verdict (medians: start-up ${start_ms[0]} ms, Reload() ${reload_ms[0]} ms, tree lock held ${lock_ms[0]} ms)"
                fi
        done
        echo
        [ -n "${target:-}" ] && echo "$target"
        return 0
}

# ---- table 12 (not in "all": needs root and tests/wire-client) ----
# flood_attach_ms: one attach (Hello, Welcome, one page charged) of a client
# of uid daemon in tenant "honest"; prints its wall time in ms
flood_attach_ms() {
        local t0 t1
        t0=$(date +%s%N)
        timeout -s KILL 600 setpriv --reuid="$(id -u daemon)" --regid="$(id -g daemon)" --clear-groups \
                "$WIRE" --socket "$MB_SOCK" --name honest hello honest charge 1 expect-ok >/dev/null || return 1
        t1=$(date +%s%N)
        awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.1f\n", ns / 1e6 }'
}

# flood_bus_ms: one GetTenant() on the bus by uid daemon (busctl's start
# included); prints its wall time in ms
flood_bus_ms() {
        local t0 t1
        t0=$(date +%s%N)
        timeout -s KILL 600 setpriv --reuid="$(id -u daemon)" --regid="$(id -g daemon)" --clear-groups \
                "$BUSCTL" --address="$MB_BUS_ADDRESS" call org.membroker1 /org/membroker1 \
                org.membroker1.Manager GetTenant s honest >/dev/null || return 1
        t1=$(date +%s%N)
        awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.1f\n", ns / 1e6 }'
}

# flood_row LABEL : median and min-max of $REPS attaches, then of $REPS
# GetTenant() calls
flood_row() {
        local i v vals=() bus=()
        for ((i = 0; i < REPS; i++)); do
                v=$(flood_attach_ms) || { echo "| $1 | failed | | | | |"; return 1; }
                vals+=("$v")
                v=$(flood_bus_ms) || { echo "| $1 | | | | failed | |"; return 1; }
                bus+=("$v")
        done
        { printf 'a %s\n' "${vals[@]}"; printf 'b %s\n' "${bus[@]}"; } | sort -k1,1 -k2n |
                awk -v label="$1" -v base="${FLOOD_BASE:-}" '
                $1 == "a" { a[++na] = $2 }
                $1 == "b" { b[++nb] = $2 }
                END {
                        med = a[int((na + 1) / 2)]
                        ratio = base == "" ? "1.00× (base)" : sprintf("%.2f×", med / base)
                        printf "| %s | %.1f | %.1f–%.1f | %s | %.1f | %.1f–%.1f |\n", label, med, a[1], a[na],
                                ratio, b[int((nb + 1) / 2)], b[1], b[nb]
                }'
}

t_flood() {
        local title="Table 12: attaching while one user floods the daemon with connections"
        WIRE="$top_builddir/tests/wire-client"
        need_daemon || { missing "$title" "membrokerd not built"; return; }
        [ -x "$WIRE" ] || { missing "$title" "tests/wire-client not built (make check builds it)"; return; }
        [ "$(id -u)" = 0 ] || { missing "$title" "not root: the flood runs as nobody, the client as daemon"; return; }
        command -v setpriv >/dev/null || { missing "$title" "no setpriv"; return; }
        local n=$(q 11000 300) conf=$MB_TMP/flood rows
        REPS=$(q 7 1)
        if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt $((n + 64)) ]; then
                ulimit -Hn $((n + 64)) 2>/dev/null || n=$(( $(ulimit -Hn) - 64 ))
        fi
        mb_config "$conf" 256M
        mb_tenant "$conf" mob "Path=mob" "AllowUsers=nobody" "MemoryMax=64M"
        mb_tenant "$conf" honest "Path=honest" "AllowUsers=daemon"
        mb_start_daemon "$conf" bus || { missing "$title" "membrokerd did not start"; return 1; }
        printf '\n## %s\n\n' "$title"
        printf 'One process of uid nobody opens %s connections as fast as it can (MaxConnectionsPerUser=256 keeps 256, refuses the rest), then 100,000 half-open ones (half a frame each; from as many processes as the hard RLIMIT_NOFILE needs), then runs 240 sessions that never read their replies; meanwhile a client of uid daemon in another tenant attaches (Hello, Welcome with its two fds, one page charged) and calls GetTenant() on the bus with busctl, %s times each per row; wall time per attach and per call, milliseconds.\n\n' "$n" "$REPS"
        echo "| when | ms per attach (median) | min–max | ratio to no flood | ms per GetTenant() (median) | min–max |"
        echo "| --- | ---: | ---: | ---: | ---: | ---: |"
        rows=$(flood_row "no flood") || { echo "$rows"; mb_stop_daemon; return 1; }
        echo "$rows"
        FLOOD_BASE=$(awk -F'|' '{ print $3 + 0 }' <<<"$rows")
        ( ulimit -n $((n + 32)) && exec setpriv --reuid=65534 --regid=65534 --clear-groups \
                "$WIRE" --socket "$MB_SOCK" --name flood flood "$n" flood-count "$n" hold ) >"$MB_TMP/flood.out" 2>&1 &
        local fpid=$!
        flood_row "while the flood opens its connections" || { kill "$fpid"; mb_stop_daemon; return 1; }
        wait_for 900 grep -q '^ready' "$MB_TMP/flood.out" || { kill "$fpid"; mb_stop_daemon; return 1; }
        flood_row "while the flood holds its connections" || { kill "$fpid"; mb_stop_daemon; return 1; }
        kill -TERM "$fpid"; wait "$fpid" 2>/dev/null
        # Half-open: each connection sends half a frame and holds; the
        # cap counts them from accept() on.
        # From as many processes as the hard RLIMIT_NOFILE needs.
        local nh=$(q 100000 1000) hard per k left c pids=()
        hard=$(ulimit -Hn)
        [ "$hard" = unlimited ] && hard=1048576
        [ "$hard" -ge $((nh + 64)) ] || { ulimit -Hn $((nh + 64)) 2>/dev/null && hard=$((nh + 64)); }
        per=$((hard - 64))
        left=$nh
        for ((k = 0; left > 0; k++)); do
                c=$(( left < per ? left : per ))
                left=$((left - c))
                ( ulimit -n $((c + 32)) && exec setpriv --reuid=65534 --regid=65534 --clear-groups \
                        "$WIRE" --socket "$MB_SOCK" --name half flood "$c" flood-partial flood-count 256 hold ) \
                        >"$MB_TMP/half.$k.out" 2>&1 &
                pids+=($!)
        done
        flood_row "while $nh half-open connections are opened" || { kill "${pids[@]}"; mb_stop_daemon; return 1; }
        for ((k = 0; k < ${#pids[@]}; k++)); do
                wait_for 900 grep -q '^ready' "$MB_TMP/half.$k.out" || { kill "${pids[@]}"; mb_stop_daemon; return 1; }
        done
        kill -TERM "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
        # Sessions that never read their replies (cut after 5 s over the
        # bound on unread output, opened again at once).
        setpriv --reuid=65534 --regid=65534 --clear-groups \
                "$WIRE" --socket "$MB_SOCK" --name noread noread 240 mob "$(q 12 3)" >"$MB_TMP/noread.out" 2>&1 &
        fpid=$!
        sleep 1
        flood_row "while 240 sessions never read their replies" || { kill "$fpid"; mb_stop_daemon; return 1; }
        wait "$fpid" 2>/dev/null
        echo
        echo "Flood: $(grep '^flood' "$MB_TMP/flood.out" | tr '\n' ' '); half-open: $(cat "$MB_TMP"/half.*.out | grep '^flood' | tr '\n' ' '); $(grep '^noread s' "$MB_TMP/noread.out")"
        FLOOD_BASE=
        mb_stop_daemon
}

run_table() {
        local t=$1 start rc
        start=$(now_ms)
        say "table $t ..."
        "t_$t"
        rc=$?
        say "table $t: $(( ($(now_ms) - start) / 1000 )) s, exit $rc"
        if [ $rc -ne 0 ]; then
                STATUS=1
                printf '\n(table %s: the benchmark failed with exit status %s)\n' "$t" "$rc"
        fi
}

main() {
        local tables=() t
        for t in "$@"; do
                if [ "$t" = all ]; then tables+=("${ALL_TABLES[@]}")
                elif declare -F "t_$t" >/dev/null; then tables+=("$t")
                else echo "mb-bench: unknown table $t (one of: all ${ALL_TABLES[*]})" >&2; exit 2
                fi
        done
        echo "# membroker benchmarks"
        echo
        echo "Run $(date -u '+%Y-%m-%d %H:%M UTC')$( [ -n "$QUICK" ] && echo ', QUICK mode (tiny counts: the figures mean nothing)'), membroker $(git -C "$top_srcdir" describe --always --dirty 2>/dev/null || echo '(no git)'), repetitions per case: ${MB_BENCH_REPS:-$(q "7 (15 in tables 2 to 5)" 1)}, median and min–max shown."
        echo
        mb_machine
        local start
        start=$(now_ms)
        for t in "${tables[@]}"; do
                run_table "$t"
        done
        echo
        echo "Total time: $(( ($(now_ms) - start) / 1000 )) s."
        return $STATUS
}

if [ -n "$OUTPUT" ]; then
        # main runs in this shell (not in a pipeline's subshell), so that the
        # EXIT trap knows every daemon it started
        mkdir -p "$(dirname "$OUTPUT")"
        exec 3>&1
        exec > >(tee "$OUTPUT.tmp")
        TEE_PID=$!
        main "$@"
        STATUS=$?
        exec >&3
        wait "$TEE_PID" 2>/dev/null
        mv "$OUTPUT.tmp" "$OUTPUT"
        # the summary of the targets, at the end of the file and on stdout
        {
                echo
                echo "## Targets"
                echo
                grep '^- target' "$OUTPUT" || echo "(no target was measured)"
        } | tee -a "$OUTPUT"
        # the tables as PNG charts beside the results (gnuplot), listed at
        # the end of the results
        say "drawing the charts"
        charts=$(bash "$top_srcdir/bench/charts.sh" "$OUTPUT" "$(dirname "$OUTPUT")")
        {
                echo
                if [ -n "$charts" ]; then
                        echo "Charts (PNG, beside this file): $(printf '%s\n' "$charts" | xargs -n1 basename | tr '\n' ' ')"
                elif ! command -v "${GNUPLOT:-gnuplot}" >/dev/null; then
                        echo "Charts: skipped: gnuplot is not installed (Debian: gnuplot-nox)"
                else
                        echo "Charts: none (no table with a median column)"
                fi
        } | tee -a "$OUTPUT"
else
        main "$@"
        STATUS=$?
fi
exit $STATUS
