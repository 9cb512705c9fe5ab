#!/bin/bash
# SPDX-License-Identifier: MIT
# bash completion of membrokerctl, in a non-interactive bash: verbs, options,
# --format values, tenant paths read from the running broker on the bus the
# command line names, limit keys (with "=" for set and create, without for
# revert).  The completion file is the one `make install` puts in place.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant cache "Path=db/cache"
mb_write_tenant web "Path=web"
bus_run

# complete LINE : the completions of LINE (cursor at its end), one per line,
# from a fresh non-interactive bash with the completion file sourced and
# the built membrokerctl first in PATH.
complete_line() {
        PATH="$top_builddir/tools:$PATH" LINE="$1" bash --norc --noprofile -c '
                . "$1"
                COMP_LINE=$LINE
                COMP_POINT=${#LINE}
                # Split as readline does: blanks, and "=" stands alone.
                read -ra COMP_WORDS <<<"${LINE//=/ = }"
                [[ $LINE == *" " || $LINE == *"=" ]] && COMP_WORDS+=("")
                COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
                _membrokerctl membrokerctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
                printf "%s\n" "${COMPREPLY[@]}" | sort' _ "$top_srcdir/tools/membrokerctl.bash-completion"
}
expect() { # expect LINE WORDS... : the completions are exactly WORDS
        local line=$1; shift
        assert_eq "$(printf '%s\n' "$@" | sort)" "$(complete_line "$line")" "completion of '$line'"
}

A="--address=$MB_BUS_ADDRESS"
expect "membrokerctl " create events help pressure reclaim reload remove revert rightsize set stat status top tree
expect "membrokerctl re" reclaim reload remove revert
expect "membrokerctl $A pressure " / db db/cache web
expect "membrokerctl --no-l" --no-legend
expect "membrokerctl --format=p" prometheus
expect "membrokerctl $A tree " / db db/cache web
expect "membrokerctl $A set db/c" db/cache
expect "membrokerctl $A set db/cache Memory" MemoryHigh= MemoryLow= MemoryMax= MemoryMin= MemoryPressureTarget=
expect "membrokerctl $A revert web " ChargeBatch MemoryHigh MemoryLow MemoryMax MemoryMin MemoryPressureTarget
expect "membrokerctl $A stat db web " / db db/cache web
expect "membrokerctl $A set web MemoryMax="
expect "membrokerctl help s" set stat status
# Another bus (none there): no tenant, no error on the terminal.
expect "membrokerctl --address=unix:path=$MB_TMP/nobus tree "

# make install puts it where bash-completion looks for "membrokerctl".
D="$MB_TMP/dest"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$top_builddir" install-bash-completion DESTDIR="$D" >/dev/null ||
        fail "make install-bash-completion"
f=$(find "$D" -path '*/bash-completion/completions/membrokerctl' -type f)
[ -n "$f" ] || fail "the completion file is not installed"
cmp -s "$f" "$top_srcdir/tools/membrokerctl.bash-completion" || fail "installed completion differs"
pass "installed as ${f#"$D"}"
