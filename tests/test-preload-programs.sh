#!/bin/bash
# SPDX-License-Identifier: MIT
# Real programs under membroker-run: sqlite3 runs a scripted workload with
# the right results, gcc compiles and links a program that runs, git
# init/add/commit/log in a temporary repository, sh -c with command
# substitutions (fork() children); each of them is a client of the tenant
# while it runs (the shim says so by name with MEMBROKER_PRELOAD_DEBUG=1)
# and leaves nothing charged.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/preload-lib.sh"
preload_check
preload_broker

# the programs run with the shim's attach notice on; attached NAME: NAME
# attached to t since the last "attached_reset"
export MEMBROKER_PRELOAD_DEBUG=1
attached_reset() { : >"$MB_TMP/attach.err"; }
attached() { grep -q "^libmembroker-preload: $1, pid [0-9]* attached to t as client " "$MB_TMP/attach.err"; }
mbrun() {
        local tenant=$1; shift
        "$MEMBROKER_RUN" --socket "$MB_SOCK" --tenant "$tenant" -- "$@" 2>>"$MB_TMP/attach.err"
}
attached_reset

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
attached_reset
mbrun t gcc -O2 -Wall -o "$MB_TMP/prog" "$MB_TMP/prog.c" || fail "gcc failed"
assert_eq 4999950000 "$(mbrun t "$MB_TMP/prog")" "the compiled program's output (itself under the shim)"
attached cc1 || fail "cc1 was not a client of t"
pass "gcc compiled and linked (cc1, as, collect2 each a client)"

# Threads: blocks of every size class and runs, allocated on one thread and
# freed on another, realloc'd, reallocarray'd and checked, under the shim.
cat >"$MB_TMP/threads.c" <<'C'
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#define N 4
#define SLOTS 512
static void *slot[N][SLOTS];
static size_t len[N][SLOTS];
static pthread_mutex_t lock[N];
static int bad;
static void *run(void *arg) {
        unsigned id = (unsigned) (uintptr_t) arg, seed = id * 77 + 1;
        for (int r = 0; r < 20000; r++) {
                unsigned t = (id + (unsigned) r) % N, i;
                size_t n;
                unsigned char *p;
                seed = seed * 1103515245u + 12345u;
                i = (seed >> 8) % SLOTS;
                n = (seed >> 4) % 100 < 95 ? 1 + (seed >> 3) % 3000 : 4096 + (seed >> 3) % 200000;
                p = (seed & 1) ? malloc(n) : reallocarray(NULL, n, 1);
                if (!p) { bad = 1; return NULL; }
                memset(p, (int) (n & 0xff), n);
                pthread_mutex_lock(&lock[t]);
                if (slot[t][i]) {
                        unsigned char *q = slot[t][i];
                        for (size_t k = 0; k < len[t][i]; k++)
                                if (q[k] != (unsigned char) (len[t][i] & 0xff)) { bad = 2; break; }
                        if (malloc_usable_size(q) < len[t][i]) bad = 3;
                        q = realloc(q, len[t][i] / 2 + 1);
                        if (!q || q[0] != (unsigned char) (len[t][i] & 0xff)) bad = 4;
                        free(q);
                }
                slot[t][i] = p;
                len[t][i] = n;
                pthread_mutex_unlock(&lock[t]);
        }
        return NULL;
}
int main(void) {
        pthread_t th[N];
        void *a = aligned_alloc(64, 100), *b = NULL;
        if (((uintptr_t) a & 63) || posix_memalign(&b, 4096, 5000) || ((uintptr_t) b & 4095)) return 5;
        free(a);
        free(b);
        for (unsigned i = 0; i < N; i++) pthread_mutex_init(&lock[i], NULL);
        for (unsigned i = 0; i < N; i++) pthread_create(&th[i], NULL, run, (void *) (uintptr_t) i);
        for (unsigned i = 0; i < N; i++) pthread_join(th[i], NULL);
        for (unsigned t = 0; t < N; t++) for (unsigned i = 0; i < SLOTS; i++) free(slot[t][i]);
        printf("threads %d\n", bad);
        return bad;
}
C
mbrun t gcc -O2 -pthread -o "$MB_TMP/threads" "$MB_TMP/threads.c" || fail "gcc threads.c"
attached_reset
assert_eq "threads 0" "$(mbrun t "$MB_TMP/threads")" "4 threads with cross-thread frees under the shim"
attached threads || fail "the threaded program was not a client"

need_program git
repo="$MB_TMP/repo"
mkdir "$repo"
attached_reset
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
