#!/bin/bash
# SPDX-License-Identifier: MIT
# The manual pages: `man --warnings` renders each without a complaint, and
# each covers what it documents -- every key daemon/core/config.c parses is
# in membroker.conf(5), every function of membroker.h in libmembroker(3),
# every method, property and signal of the bus in org.membroker1(5), every
# option of membroker-load in membroker-load(1), every verb of membrokerctl
# in membrokerctl(1).
. "$top_srcdir/tests/lib.sh"

command -v man >/dev/null || skip "man (man-db) is not installed"

pages=("$top_srcdir/daemon/membrokerd.8" "$top_srcdir/tools/membrokerctl.1" "$top_srcdir/tools/membroker-exporter.1"
       "$top_srcdir/man/membroker-load.1" "$top_srcdir/man/membroker-run.1" "$top_srcdir/man/libmembroker.3" "$top_srcdir/man/libmembroker-sqlite.3"
       "$top_srcdir/man/org.membroker1.5"
       "$top_builddir/man/membroker.conf.5")
for p in "${pages[@]}"; do
        [ -f "$p" ] || fail "$p is missing"
        err=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$p" 2>&1 >/dev/null) || fail "man -l $p failed: $err"
        [ -z "$err" ] || fail "man --warnings -l $p: $err"
        pass "man --warnings: ${p##*/} is clean"
done

# text PAGE : the page as man renders it, hyphenation and justification off
text() { LC_ALL=C.UTF-8 MANWIDTH=1000 man -l "$1" 2>/dev/null | col -b | sed 's/\xe2\x80\x90/-/g'; }

conf=$(text "$top_builddir/man/membroker.conf.5")
keys=$(sed -n 's/.*strcmp(key, "\([A-Za-z]*\)") == 0.*/\1/p' "$top_srcdir/daemon/core/config.c" | sort -u)
[ "$(wc -w <<<"$keys")" -ge 20 ] || fail "found only $(wc -w <<<"$keys") keys in config.c"
for k in $keys; do
        grep -q -- "$k=" <<<"$conf" || fail "membroker.conf(5) does not document $k="
done
pass "membroker.conf(5) documents all $(wc -w <<<"$keys") keys"

lib=$(text "$top_srcdir/man/libmembroker.3")
funcs=$(grep -o '\bmb_[a-z_]*(' "$top_srcdir/client/membroker.h" | tr -d '(' | sort -u)
for f in $funcs; do
        grep -q -- "$f(" <<<"$lib" || fail "libmembroker(3) does not document $f()"
done
pass "libmembroker(3) documents all $(wc -w <<<"$funcs") functions"

sqlib=$(text "$top_srcdir/man/libmembroker-sqlite.3")
funcs=$(grep -o '\bmb_sqlite_[a-z_]*(' "$top_srcdir/sqlite/membroker-sqlite.h" | tr -d '(' | sort -u)
[ "$(wc -w <<<"$funcs")" -ge 3 ] || fail "found only $(wc -w <<<"$funcs") functions in membroker-sqlite.h"
for f in $funcs; do
        grep -q -- "$f(" <<<"$sqlib" || fail "libmembroker-sqlite(3) does not document $f()"
done
fields=$(sed -n '/^struct mb_sqlite_stats {/,/^};/s/^ *uint64_t \([a-z_]*\);.*/\1/p' "$top_srcdir/sqlite/membroker-sqlite.h")
[ "$(wc -w <<<"$fields")" -ge 10 ] || fail "found only $(wc -w <<<"$fields") fields of struct mb_sqlite_stats"
for f in $fields; do
        grep -qw -- "$f" <<<"$sqlib" || fail "libmembroker-sqlite(3) does not document the statistic $f"
done
pass "libmembroker-sqlite(3) documents all $(wc -w <<<"$funcs") functions and $(wc -w <<<"$fields") statistics"

bus=$(text "$top_srcdir/man/org.membroker1.5")
members=$(sed -n 's/.*<\(method\|property\|signal\) name="\([A-Za-z]*\)".*/\2/p' "$top_srcdir"/dbus/*.xml | sort -u)
for m in $members; do
        grep -qw -- "$m" <<<"$bus" || fail "org.membroker1(5) does not document $m"
done
pass "org.membroker1(5) documents all $(wc -w <<<"$members") members"

load=$(text "$top_srcdir/man/membroker-load.1")
for o in $("$MEMBROKER_LOAD" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
        grep -q -- "$o" <<<"$load" || fail "membroker-load(1) does not document $o"
done
pass "membroker-load(1) documents every option"

run=$(text "$top_srcdir/man/membroker-run.1")
for o in $("$top_builddir/tools/membroker-run" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
        grep -q -- "$o" <<<"$run" || fail "membroker-run(1) does not document $o"
done
pass "membroker-run(1) documents every option"

ctl=$(text "$top_srcdir/tools/membrokerctl.1")
for v in $("$top_builddir/tools/membrokerctl" --help | sed -n '/^Verbs:/,/^$/p' | awk 'NR > 1 && NF { print $1 }'); do
        grep -qE -- "^ {7}$v( |$)" <<<"$ctl" || fail "membrokerctl(1) does not document the verb $v"
done
pass "membrokerctl(1) documents every verb"
