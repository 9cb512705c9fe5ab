# SPDX-License-Identifier: MIT
# tests/attack-lib.sh - helpers for the attack tests (sourced after lib.sh
# and broker-lib.sh): a misbehaving client run as an unprivileged uid, and
# the figures of the daemon's state dump they are checked against.

# mb_attack_prereqs : skip unless clients can run as nobody
mb_attack_prereqs() {
        command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
        [ "$(id -u)" = 0 ] || skip "needs root to run the attacking client as uid 65534"
        getent passwd nobody >/dev/null || skip "no user nobody"
}

# The writers die of SIGBUS: a sanitizer build must not catch it.
MB_ATTACK_ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_sigbus=0"

# as_nobody STEPS... : wire-client as uid/gid 65534 without groups
as_nobody() {
        ASAN_OPTIONS="$MB_ATTACK_ASAN_OPTIONS" setpriv --reuid=65534 --regid=65534 --clear-groups \
                "$WIRE_CLIENT" --socket "$MB_SOCK" --name attacker "$@"
}

# as_nobody_bg OUTFILE STEPS... : the same in the background, pid in $MB_BG_PID
as_nobody_bg() {
        local out=$1; shift
        ASAN_OPTIONS="$MB_ATTACK_ASAN_OPTIONS" setpriv --reuid=65534 --regid=65534 --clear-groups \
                "$WIRE_CLIENT" --socket "$MB_SOCK" --name attacker "$@" >"$out" 2>&1 &
        MB_BG_PID=$!
        MB_CHILDREN+=("$MB_BG_PID")
}

# mb_need_tmpfs_backing : skip when the daemon had to fall back to a memfd
# (no detached tmpfs for it on this machine), as its state dump says
mb_need_tmpfs_backing() {
        mb_dump_state
        case $(mb_dump_field config backing) in
        tmpfs*) ;;
        *) skip "the daemon cannot create detached tmpfs instances here (fsopen/fsmount): backing=$(mb_dump_field config backing)" ;;
        esac
}

# mb_now TENANT FIELD : FIELD of TENANT in a fresh state dump
mb_now() {
        mb_dump_state
        mb_state "$1" "$2"
}

# mb_field OUT KEY : the value of KEY=VALUE in the output OUT of wire-client
mb_field() {
        printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | tail -1
}
