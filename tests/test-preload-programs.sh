#!/bin/bash
# SPDX-License-Identifier: MIT
# Real programs under membroker-run: sqlite3 runs a scripted workload with
# the right results, gcc compiles and links a program that runs, git
# init/add/commit/log in a temporary repository, sh -c with command
# substitutions (fork() children); each of them is a client of the tenant
# while it runs (the daemon logs the attach by name) and leaves nothing
# charged.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/preload-lib.sh"
preload_check
preload_broker

attached() { grep -q "($1, pid [0-9]*, uid [0-9]*) attached to tenant t" "$MB_TMP/daemon.log"; }

need_program sqlite3
out=$(mbrun t sqlite3 "$MB_TMP/db.sqlite" <<'SQL'
create table t(a integer primary key, b text, c real);
with recursive n(x) as (select 1 union all select x + 1 from n where x < 50000)
insert into t select x, printf('row-%06d-%s', x, hex(x * 7919)), x / 3.0 from n;
create index tb on t(b);
select count(*), sum(a), max(b) from t;
update t set c = c * 3 where a % 2 = 0;
delete from t where a % 5 = 0;
select count(*), sum(a), cast(sum(c) as integer) from t;
select b from t where b like 'row-04999%' order by b limit 2;
SQL
)
echo "$out"
# (what sqlite3 prints without the shim)
expected='50000|1250025000|row-050000-333935393530303030
40000|1000000000|666666666
row-049991-333935383738373239
row-049992-333935383836363438'
[ "$out" = "$expected" ] || fail "sqlite3 results differ: expected
$expected"
attached sqlite3 || fail "sqlite3 was not a client of t"
pass "sqlite3 workload with the right results"

need_program gcc
cat >"$MB_TMP/prog.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
struct node { struct node *next; int v; };
int main(void) {
        struct node *h = NULL;
        long s = 0;
        for (int i = 0; i < 100000; i++) {
                struct node *n = malloc(sizeof(*n));
                n->v = i; n->next = h; h = n;
        }
        while (h) { struct node *n = h->next; s += h->v; free(h); h = n; }
        printf("%ld\n", s);
        return 0;
}
C
mbrun t gcc -O2 -Wall -o "$MB_TMP/prog" "$MB_TMP/prog.c" || fail "gcc failed"
assert_eq 4999950000 "$(mbrun t "$MB_TMP/prog")" "the compiled program's output (itself under the shim)"
attached cc1 || fail "cc1 was not a client of t"
pass "gcc compiled and linked (cc1, as, collect2 each a client)"

need_program git
repo="$MB_TMP/repo"
mkdir "$repo"
export GIT_CONFIG_NOSYSTEM=1 HOME="$MB_TMP"
mbrun t git -C "$repo" init -q || fail "git init"
for i in 1 2 3; do
        seq 1 $((i * 1000)) >"$repo/f$i"
        mbrun t git -C "$repo" add "f$i" || fail "git add"
        mbrun t git -C "$repo" -c user.name=t -c user.email=t@example.org commit -qm "commit $i" || fail "git commit"
done
log=$(mbrun t git -C "$repo" log --format=%s)
assert_eq "commit 3
commit 2
commit 1" "$log" "git log"
assert_eq 3000 "$(mbrun t git -C "$repo" show HEAD:f3 | wc -l)" "git show of a committed file"
attached git || fail "git was not a client of t"
pass "git init/add/commit/log"

out=$(mbrun t sh -c 'a=$(echo one); b=$(echo "$a" two | tr a-z A-Z); for i in 1 2 3; do c=$(echo $i); done; echo "$b $c"')
assert_eq "ONE TWO 3" "$out" "sh -c with command substitutions"
usage_back_to_zero t
pass "nothing left charged"
