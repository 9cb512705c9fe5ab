#!/bin/bash
# Admission by uid and groups (SO_PEERCRED, /proc/PID/status): root may
# attach anywhere; a tenant without AllowUsers=/AllowGroups=/Cgroup= admits
# only root; others need their uid in AllowUsers= or their gid or a
# supplementary group in AllowGroups=.  A refusal is an EACCES Error whose
# reason names the uid, the tenant and the rule.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"

command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
[ "$(id -u)" = 0 ] || skip "needs root to run clients under other uids"
getent passwd nobody >/dev/null && getent passwd daemon >/dev/null || skip "no users nobody/daemon"
getent group users >/dev/null || skip "no group users"
nobody_group=$(id -gn nobody)

mb_write_broker_conf "Capacity=64M"
mb_write_tenant rootonly "Path=rootonly"
mb_write_tenant db "Path=db" "AllowUsers=daemon"
mb_write_tenant byuser "Path=byuser" "AllowUsers=daemon nobody"
mb_write_tenant bygroup "Path=bygroup" "AllowGroups=$nobody_group"
mb_write_tenant bysupp "Path=bysupp" "AllowGroups=users"
mb_start_daemon

# as_nobody [setpriv group options] -- STEPS... : wire-client as uid 65534
as_nobody() {
        local opts=()
        while [ "$1" != -- ]; do opts+=("$1"); shift; done; shift
        setpriv --reuid=65534 --regid="$(id -g nobody)" "${opts[@]}" \
                "$WIRE_CLIENT" --socket "$MB_SOCK" --name nobody "$@"
}

out=$(wire hello rootonly charge 1 expect-ok) || { echo "$out"; fail "root was refused"; }
pass "root attaches to a tenant without rules"

out=$(as_nobody --clear-groups -- hello rootonly expect-error EACCES expect-close) ||
        { echo "$out"; fail "nobody was not refused by rootonly"; }
echo "$out"
grep -q 'reason=uid 65534 (nobody) is not allowed in tenant rootonly: it has no AllowUsers=, AllowGroups= or Cgroup=, so only root may attach' \
        <<<"$out" || fail "unexpected reason"

out=$(as_nobody --clear-groups -- hello db expect-error EACCES expect-close) ||
        { echo "$out"; fail "nobody was not refused by db"; }
echo "$out"
grep -q 'reason=uid 65534 (nobody) is not allowed in tenant db: AllowUsers=daemon$' <<<"$out" ||
        fail "the reason does not name AllowUsers=daemon"

out=$(as_nobody --clear-groups -- hello byuser charge 2 expect-ok) || { echo "$out"; fail "AllowUsers=nobody refused"; }
pass "AllowUsers= admits the uid"

out=$(as_nobody --clear-groups -- hello bygroup charge 2 expect-ok) ||
        { echo "$out"; fail "AllowGroups=$nobody_group refused the primary gid"; }
pass "AllowGroups= admits the primary gid"

out=$(as_nobody --groups="$(getent group users | cut -d: -f3)" -- hello bysupp charge 2 expect-ok) ||
        { echo "$out"; fail "AllowGroups=users refused a supplementary member"; }
pass "AllowGroups= admits a supplementary group"

out=$(as_nobody --clear-groups -- hello bysupp expect-error EACCES expect-close) ||
        { echo "$out"; fail "AllowGroups=users admitted a non-member"; }
grep -q 'AllowGroups=users' <<<"$out" || fail "the reason does not name AllowGroups=users"
pass "AllowGroups= refuses a non-member"

mb_dump_state
assert_eq 0 "$(mb_state / usage)" "usage after the refused and the finished clients"
mb_daemon_alive
mb_stop_clean
