#!/bin/bash
# The daemon's layering (docs/architecture.md), checked from the includes:
# every module includes only headers of its own layer or below, and the
# module graph has no cycle except inside the bus adapter or the manager
# hub.  A module is a .c/.h pair of daemon/ (daemon/core/ is one layer); a
# module's X-internal.h, shared by its files only, belongs to module X.
set -eu
: "${top_srcdir:?run through make check}"
cd "$top_srcdir/daemon"

# layer_of MODULE : the layer number, or nothing for an unknown module
layer_of() {
        case $1 in
        core/*|arena|arena-*|log) echo 0 ;;
        mailbox|state|auth|guard|service|tenant_state|broker) echo 1 ;;
        conn|conn-*|worker|session|client-events|reclaim|reclaim-*|restart|pressure|stats|audit|admission|listener) echo 2 ;;
        manager|manager-*|config-files) echo 3 ;;
        bus|bus-*) echo 4 ;;
        main) echo 5 ;;
        esac
}

fail=0
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
modules=$( (ls ./*.c ./*.h core/*.c core/*.h 2>/dev/null) | sed 's|^\./||; s/\.[ch]$//' | sort -u)
for name in $modules; do
        m=${name%-internal}
        lm=$(layer_of "$m")
        if [ -z "$lm" ]; then
                echo "FAIL: daemon/$m has no layer: add it to tests/test-layers.sh and docs/architecture.md"
                fail=1
                continue
        fi
        for f in "$name.c" "$name.h"; do
                [ -f "$f" ] || continue
                for inc in $(sed -n 's/^#include "\([^"]*\)\.h".*/\1/p' "$f"); do
                        # Resolve to a daemon module: core headers are included by bare name.
                        if [ -f "$inc.h" ]; then dep=$inc
                        elif [ -f "core/$inc.h" ]; then dep=core/$inc
                        else continue # common/, proto/, generated headers
                        fi
                        dep=${dep%-internal}
                        [ "$dep" = "$m" ] && continue
                        ld=$(layer_of "$dep")
                        if [ -n "$ld" ] && [ "$ld" -gt "$lm" ]; then
                                echo "FAIL: daemon/$f (layer $lm) includes $dep.h (layer $ld): lower layers call upward through ops or callbacks"
                                fail=1
                        fi
                        case $m:$dep in bus*:bus*|manager*:manager*) continue ;; esac
                        echo "$m $dep" >>"$edges"
                done
        done
done

# A cycle among modules (outside the bus adapter): tsort names it.
if ! tsort "$edges" >/dev/null 2>"$edges.err"; then
        echo "FAIL: include cycle between daemon modules:"
        cat "$edges.err"
        fail=1
fi
rm -f "$edges.err"
[ $fail -eq 0 ] && echo "ok: $(echo "$modules" | wc -w) modules, every include goes down or sideways without a cycle"
exit $fail
