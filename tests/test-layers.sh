#!/bin/bash
# The daemon's layering (docs/architecture.md), checked from the sources:
#
#  1. every module includes only headers of its own layer or below;
#  2. the module graph has no cycle, a family of files (X.c, X.h, X-*.c,
#     X-*.h, e.g. manager-reload.c, reclaim-internal.h, bus-tenant.c) being
#     one module;
#  3. every function a daemon header declares is defined in that header's
#     module: X.h's (or X-internal.h's) prototypes in X.c or X-*.c of the
#     same directory, so that no header declares what another module
#     implements.  Macros, static inline functions, typedefs and function
#     pointers (members of ops tables) are not prototypes.
#
# A module is a .c/.h pair in one of daemon/'s folders (daemon/core/ is one
# layer).  Then, by tests/folder-layers.py, the folders themselves: every
# include and call between two goes down their floors (core/ 0, base/ 1,
# arena/ 2, service/ 3, reclaim/ 4, conn/ 5, manager/ 6, bus/ 7), no circle
# of files spans two folders or holds more than six, and daemon/ keeps at
# most three C files at its top.
set -eu
: "${top_srcdir:?run through make check}"
cd "$top_srcdir/daemon"

# layer_of MODULE : the layer number, or nothing for an unknown module
layer_of() {
        case $1 in core/*) echo 0; return ;; esac
        case ${1##*/} in
        arena|arena-*|log) echo 0 ;;
        mailbox|state|auth|guard|service|tenant_state|broker) echo 1 ;;
        conn|conn-*|worker|session|client-events|reclaim|reclaim-*|restart|pressure|rightsizer|stats|audit|admission|listener) echo 2 ;;
        manager|manager-*|config-files) echo 3 ;;
        bus|bus-*) echo 4 ;;
        main) echo 5 ;;
        esac
}

# family_of MODULE : X for X-something when X.c or X.h exists beside it
# (manager-reload -> manager), else MODULE itself (client-events stays).
family_of() {
        local dir='' base=$1 head
        case $1 in */*) dir=${1%/*}/ base=${1##*/} ;; esac
        case $base in
        *-*)
                head=${base%%-*}
                if [ -f "$dir$head.c" ] || [ -f "$dir$head.h" ]; then
                        echo "$dir$head"
                        return
                fi
                ;;
        esac
        echo "$1"
}

fail=0
edges=$(mktemp)
defined=$(mktemp)
trap 'rm -f "$edges" "$edges.err" "$defined"' EXIT
modules=$(find . -name '*.[ch]' | sed 's|^\./||; s/\.[ch]$//' | sort -u)
folders=$(find . -mindepth 1 -maxdepth 1 -type d | sed 's|^\./||' | sort)

# ---- 1 and 2: includes ----

for m in $modules; do
        lm=$(layer_of "$m")
        if [ -z "$lm" ]; then
                echo "FAIL: daemon/$m has no layer: add it to tests/test-layers.sh and docs/architecture.md"
                fail=1
                continue
        fi
        for f in "$m.c" "$m.h"; do
                [ -f "$f" ] || continue
                for inc in $(sed -n 's/^#include "\([^"]*\)\.h".*/\1/p' "$f"); do
                        # Resolve to a daemon module: headers are included by
                        # their bare names, through the module folders.
                        dep=
                        if [ -f "$inc.h" ]; then dep=$inc
                        else
                                for d in $folders; do
                                        [ -f "$d/$inc.h" ] && { dep=$d/$inc; break; }
                                done
                        fi
                        [ -n "$dep" ] || continue # common/, proto/, generated headers
                        [ "$dep" = "$m" ] && continue
                        ld=$(layer_of "$dep")
                        if [ -n "$ld" ] && [ "$ld" -gt "$lm" ]; then
                                echo "FAIL: daemon/$f (layer $lm) includes $dep.h (layer $ld): lower layers call upward through ops or callbacks"
                                fail=1
                        fi
                        from=$(family_of "$m")
                        to=$(family_of "$dep")
                        [ "$from" = "$to" ] && continue
                        echo "$from $to" >>"$edges"
                done
        done
done

# A cycle among modules: tsort names it.
if ! tsort "$edges" >/dev/null 2>"$edges.err"; then
        echo "FAIL: include cycle between daemon modules:"
        cat "$edges.err"
        fail=1
fi

# ---- 3: a header's functions are defined in its module ----

# c_statements FILE... : each top-level statement of the C files on one
# line, "D text" for a declaration (ended by ';') and "B text" for what is
# followed by a body or an initializer ('{').  Comments, preprocessor lines
# (with their continuations), string and character literals and everything
# inside braces are dropped.
c_statements() {
        awk '
        function flush(kind) {
                gsub(/[ \t]+/, " ", stmt)
                sub(/^ /, "", stmt)
                if (stmt != "")
                        print kind " " stmt
                stmt = ""
        }
        FNR == 1 { depth = 0; incomment = 0; pp = 0; stmt = "" }
        {
                line = $0
                if (pp) { pp = (line ~ /\\$/); next }
                if (!incomment && line ~ /^[ \t]*#/) { pp = (line ~ /\\$/); next }
                n = length(line)
                i = 1
                while (i <= n) {
                        c = substr(line, i, 1)
                        c2 = substr(line, i, 2)
                        if (incomment) {
                                if (c2 == "*/") { incomment = 0; i += 2 } else i++
                                continue
                        }
                        if (c2 == "/*") { incomment = 1; i += 2; continue }
                        if (c2 == "//") break
                        if (c == "\"" || c == "\047") {
                                q = c
                                for (i++; i <= n; i++) {
                                        c = substr(line, i, 1)
                                        if (c == "\\") { i++; continue }
                                        if (c == q) break
                                }
                                i++
                                if (depth == 0) stmt = stmt q q
                                continue
                        }
                        if (c == "{") { if (depth == 0) flush("B"); depth++ }
                        else if (c == "}") depth--
                        else if (depth == 0) { if (c == ";") flush("D"); else stmt = stmt c }
                        i++
                }
                if (depth == 0) stmt = stmt " "
        }' "$@"
}

# function_names : read c_statements lines, print the name of each function
# they declare ("D") or define ("B"); typedefs, static declarations, function
# pointers, macro invocations (ALL_CAPS) and keywords are not functions.
function_names() {
        awk -v want="$1" '
        function strip_attributes(s,    p, d, j, c) {
                while ((p = index(s, "__attribute__")) > 0) {
                        j = p + length("__attribute__")
                        while (substr(s, j, 1) == " ") j++
                        if (substr(s, j, 1) != "(") break
                        d = 0
                        for (; j <= length(s); j++) {
                                c = substr(s, j, 1)
                                if (c == "(") d++
                                else if (c == ")" && --d == 0) break
                        }
                        s = substr(s, 1, p - 1) substr(s, j + 1)
                }
                return s
        }
        $1 == want {
                s = strip_attributes(substr($0, 3))
                if (s ~ /^typedef / || (want == "D" && s ~ /(^| )static /))
                        next
                p = index(s, "(")
                if (p == 0 || substr(s, p) ~ /^\( *\*/)
                        next
                pre = substr(s, 1, p - 1)
                sub(/ *$/, "", pre)
                if (!match(pre, /[A-Za-z_][A-Za-z_0-9]*$/))
                        next
                name = substr(pre, RSTART, RLENGTH)
                if (name ~ /^[A-Z_][A-Z0-9_]*$/ || name ~ /^_Static_assert$/ || name == pre)
                        next
                if (name ~ /^(void|int|char|short|long|unsigned|signed|float|double|bool|return|sizeof|if|while|for|switch)$/)
                        next
                print name
        }'
}

for h in $(find . -name '*.h' | sort); do
        [ -f "$h" ] || continue
        h=${h#./}
        dir=$(dirname "$h")
        [ "$dir" = . ] && dir='' || dir=$dir/
        base=$(basename "$h" .h)
        mod=${base%-internal}
        declared=$(c_statements "$h" | function_names D | sort -u)
        [ -n "$declared" ] || continue
        srcs=$(ls "$dir$mod.c" "$dir$mod"-*.c 2>/dev/null || true)
        if [ -z "$srcs" ]; then
                echo "FAIL: daemon/$h declares functions but its module has no $dir$mod.c:" $declared
                fail=1
                continue
        fi
        # shellcheck disable=SC2086 # one word per file
        c_statements $srcs | function_names B | sort -u >"$defined"
        for f in $declared; do
                grep -qx "$f" "$defined" && continue
                where=$(find . -name '*.c' -exec grep -l "^[^ #].*\<$f *(" {} + 2>/dev/null | sed 's|^\./||' | tr '\n' ' ')
                echo "FAIL: daemon/$h declares $f() but $dir$mod.c/$dir$mod-*.c do not define it${where:+ (found in: $where)}"
                fail=1
        done
done

if command -v python3 >/dev/null; then
        python3 "$top_srcdir/tests/folder-layers.py" "$top_srcdir/daemon" \
                core=0 base=1 arena=2 service=3 reclaim=4 conn=5 manager=6 bus=7 || fail=1
else
        echo "FAIL: no python3 to check the folders' floors (scripts/install-deps installs it)"
        fail=1
fi

[ $fail -eq 0 ] && echo "ok: $(echo "$modules" | wc -w) modules, every include goes down or sideways without a cycle, every header's functions are defined in its module"
exit $fail
