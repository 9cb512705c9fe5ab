# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# The machine's own systemd, booted as PID 1 in private namespaces (pid,
# mount, uts, ipc, net, cgroup) over an overlay of / with a `make install
# DESTDIR=` tree copied on top, so that a test sees the units run as the
# service manager runs them: Type=notify, the watchdog, the fd store, D-Bus
# activation, the sandbox, User=, sysusers.d.  Only dbus and journald are
# started (pid1-test.target).  Sourced by tests/test-service-systemd.sh:
#   pid1_boot DESTDIR DIR   boot it, state under DIR; skips (77) where the
#                           machine cannot (not root, no unshare, overlayfs
#                           or cgroup2, or systemd does not come up)
#   pid1 CMD...             run CMD inside (all its namespaces)
#   pid1_poweroff           power it off and remove its cgroup
PID1_DIR=
PID1_PID=
PID1_CGROUP=

# The cgroup2 hierarchy to give the machine a cgroup of its own in (a
# hybrid host has it at /sys/fs/cgroup/unified).
_pid1_cgroup_root() {
        local d
        for d in /sys/fs/cgroup/unified /sys/fs/cgroup; do
                [ "$(stat -f -c %T "$d" 2>/dev/null)" = cgroup2fs ] && { echo "$d"; return 0; }
        done
        return 1
}

# The inside, run by unshare as the new PID 1's parent-to-be: mounts the
# root of the machine, then execs systemd in it.  $1: state dir, $2: DESTDIR.
_pid1_inner() {
        set -e
        local s=$1 dest=$2 root=$1/root u f
        mount -t tmpfs -o mode=0755 pid1-overlay "$s/ovl"
        mkdir -p "$s/ovl/upper" "$s/ovl/work"
        mount -t overlay -o "lowerdir=/,upperdir=$s/ovl/upper,workdir=$s/ovl/work" pid1-root "$root"
        mount -t proc proc "$root/proc"
        mount -t sysfs -o ro sysfs "$root/sys"
        mount -t cgroup2 cgroup2 "$root/sys/fs/cgroup"
        mount -t tmpfs -o mode=0755 pid1-dev "$root/dev"
        for f in null zero full random urandom tty; do
                : >"$root/dev/$f"
                mount --bind "/dev/$f" "$root/dev/$f"
        done
        mkdir -p "$root/dev/pts" "$root/dev/shm"
        mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"
        ln -s pts/ptmx "$root/dev/ptmx"
        ln -s /proc/self/fd "$root/dev/fd"
        : >"$root/dev/console"
        mount --bind "$s/console" "$root/dev/console"
        mount -t tmpfs -o mode=0755 pid1-run "$root/run"
        mount -t tmpfs -o mode=1777 pid1-tmp "$root/tmp"
        # The installed tree on top of the host's files.
        (cd "$dest" && tar -cf - .) | tar -C "$root" -xf - --keep-directory-symlink
        # dbus and journald, nothing else: units that need real hardware
        # or a whole boot are masked.
        u=$root/etc/systemd/system
        mkdir -p "$u"
        printf '%s\n' '[Unit]' 'Description=dbus and journald for a test' \
                'Requires=dbus.socket systemd-journald.service' \
                'After=dbus.socket systemd-journald.service' 'AllowIsolate=yes' >"$u/pid1-test.target"
        for f in systemd-modules-load kmod-static-nodes systemd-timesyncd systemd-pstore systemd-binfmt \
                 systemd-repart systemd-firstboot systemd-udevd systemd-udev-trigger systemd-udev-settle \
                 systemd-random-seed systemd-hwdb-update systemd-remount-fs systemd-sysctl systemd-pcrphase \
                 systemd-pcrphase-sysinit systemd-machine-id-commit systemd-logind getty@tty1 e2scrub_reap \
                 postgresql prometheus; do
                ln -sf /dev/null "$u/$f.service"
        done
        for f in proc-sys-fs-binfmt_misc.automount sys-fs-fuse-connections.mount sys-kernel-config.mount \
                 sys-kernel-debug.mount sys-kernel-tracing.mount; do
                ln -sf /dev/null "$u/$f"
        done
        cd "$root"
        mkdir -p .pid1-old
        pivot_root . .pid1-old
        cd /
        umount -l /.pid1-old
        rmdir /.pid1-old
        export container=membroker-test
        exec /lib/systemd/systemd --system --unit=pid1-test.target --log-level=info
}

pid1_boot() {
        local dest=$1 cg i
        PID1_DIR=$2
        [ "$(id -u)" = 0 ] || skip "booting systemd as PID 1 needs root"
        command -v unshare >/dev/null && command -v nsenter >/dev/null || skip "unshare/nsenter are not installed"
        [ -x /lib/systemd/systemd ] || skip "no systemd (/lib/systemd/systemd) to boot"
        grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
        grep -qw overlay /proc/filesystems || skip "the kernel has no overlayfs (to boot systemd over /)"
        cg=$(_pid1_cgroup_root) || skip "no cgroup2 hierarchy to give systemd (cgroup v1 only)"
        PID1_CGROUP=$cg/membroker-test-$$
        mkdir "$PID1_CGROUP" || skip "cannot make a cgroup for systemd under $cg"
        mkdir -p "$PID1_DIR/ovl" "$PID1_DIR/root"
        : >"$PID1_DIR/console"
        (
                echo "$BASHPID" >"$PID1_CGROUP/cgroup.procs"
                exec unshare --fork --pid --mount --uts --ipc --net --cgroup --propagation private \
                        bash -c "$(declare -f _pid1_inner); _pid1_inner \"\$@\"" pid1 "$PID1_DIR" "$dest"
        ) >"$PID1_DIR/boot.log" 2>&1 </dev/null &
        local outer=$!
        for i in $(seq 150); do
                PID1_PID=$(pgrep -P "$outer" 2>/dev/null | head -1) || PID1_PID=
                if [ -n "$PID1_PID" ] && [ "$(cat "/proc/$PID1_PID/comm" 2>/dev/null)" = systemd ] &&
                   pid1 systemctl is-system-running --wait >/dev/null 2>&1; then
                        return 0
                fi
                kill -0 "$outer" 2>/dev/null || break
                sleep 0.2
        done
        cat "$PID1_DIR/boot.log"
        tail -20 "$PID1_DIR/console"
        [ -z "$PID1_PID" ] || pid1 systemctl --failed --no-pager 2>/dev/null || true
        pid1_poweroff
        skip "systemd did not boot as PID 1 in namespaces here (boot.log and console above)"
}

pid1() {
        nsenter -t "$PID1_PID" -m -u -i -n -p -C -r -w "$@"
}

pid1_poweroff() {
        local i
        if [ -n "$PID1_PID" ] && kill -0 "$PID1_PID" 2>/dev/null; then
                # SIGRTMIN+4: systemd starts poweroff.target (systemd(1)),
                # with no logind to ask.
                kill -s RTMIN+4 "$PID1_PID" 2>/dev/null || true
                for i in $(seq 100); do
                        kill -0 "$PID1_PID" 2>/dev/null || break
                        sleep 0.1
                done
                kill -KILL "$PID1_PID" 2>/dev/null || true
        fi
        PID1_PID=
        if [ -n "$PID1_CGROUP" ] && [ -d "$PID1_CGROUP" ]; then
                # Its own cgroups (init.scope, system.slice, ...) first.
                for i in $(seq 50); do
                        find "$PID1_CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null
                        [ -d "$PID1_CGROUP" ] || break
                        sleep 0.1
                done
        fi
        PID1_CGROUP=
}
