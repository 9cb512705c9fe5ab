#!/bin/bash
# membroker-load (the real client library) against the daemon: 20 clients
# with 2 threads each hold their pages; the tenant's usage equals what the
# clients' own stats regions report (pages in use + stocked pages, flushed
# through rstat), pages in use equal what they say they hold; past a limit
# membroker-load fails with exit 1 and max/oom are counted; at the end every
# page has been verified and returned.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

[ -x "$MEMBROKER_LOAD" ] || skip "membroker-load was not built"
NCLIENTS=20

mb_write_broker_conf "Capacity=256M"
mb_write_tenant app "Path=app"
mb_write_tenant lim "Path=lim" "MemoryMax=1M"
mb_start_daemon

pids=()
for i in $(seq 1 $NCLIENTS); do
        "$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant app --hold 400K --threads 2 --quiet >"$MB_TMP/l$i.out" 2>&1 &
        pids+=("$!"); MB_CHILDREN+=("$!")
done

# all_holding : every client reports 400K held (SIGUSR1 prints the line)
all_holding() {
        local i
        for i in $(seq 1 $NCLIENTS); do
                grep -q '^held=409600 ' "$MB_TMP/l$i.out" && continue
                kill -USR1 "${pids[$((i - 1))]}" 2>/dev/null
                return 1
        done
}
# (SIGUSR1 only once they are attached: before, it would kill them)
wait_for 60 mb_dumped_ge connections attached "$NCLIENTS" ||
        fail "not every client attached"
wait_for 60 all_holding || { cat "$MB_TMP"/l*.out | head; fail "the clients did not allocate"; }
pass "$NCLIENTS membroker-load clients hold 400K each"

mb_dump_state
usage=$(mb_state app usage)
pages=$(mb_state app pages)
stock=$(mb_state app stock)
echo "usage=$usage pages=$pages stock=$stock"
assert_eq $((NCLIENTS * 100)) "$pages" "pages in use reported by the clients' stats regions"
assert_eq "$usage" $((pages + stock)) "usage = pages in use + stocked pages"
assert_eq "$usage" "$(mb_state / usage)" "root usage"

# Past max: exit 1, the limit counted.
rc=0
"$MEMBROKER_LOAD" --socket "$MB_SOCK" --tenant lim --hold 2M --seconds 0 --quiet >"$MB_TMP/lim.out" 2>&1 || rc=$?
cat "$MB_TMP/lim.out"
assert_eq 1 "$rc" "membroker-load exit code past max"
mb_dump_state
[ "$(mb_event lim max)" -ge 1 ] || fail "no max event counted"
[ "$(mb_event lim oom)" -ge 1 ] || fail "no oom event counted"
assert_eq 0 "$(mb_state lim usage)" "usage of lim after the client left"
pass "max/oom counted: $(mb_state lim events)"

kill -TERM "${pids[@]}"
for i in $(seq 1 $NCLIENTS); do
        rc=0; wait "${pids[$((i - 1))]}" || rc=$?
        [ $rc = 0 ] || { cat "$MB_TMP/l$i.out"; fail "client $i exited with $rc"; }
        tail -1 "$MB_TMP/l$i.out" | grep -q ' errors=0 verify=ok$' || { cat "$MB_TMP/l$i.out"; fail "client $i: no verify=ok"; }
done
MB_CHILDREN=()
pass "every client verified its pages"
wait_for 20 mb_dumped_ge connections detached "$NCLIENTS" ||
        fail "not every client detached"
mb_dump_state
assert_eq 0 "$(mb_state app usage)" "usage of app at the end"
assert_eq 0 "$(mb_state app pages)" "pages of app at the end"
assert_eq 0 "$(mb_state app unaccounted)" "unaccounted bytes of app"
mb_stop_clean
