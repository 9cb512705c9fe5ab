/* SPDX-License-Identifier: MIT */
/*
 * arena-tmpfs.c - an arena's own detached tmpfs instance (arena.h).
 *
 * The instance is made with the new mount API and never attached to any
 * mount point: fsopen() + fsconfig() + fsmount() give a mount fd only this
 * process holds, so no mount namespace changes and no path leads to it.
 * Its "size" limits the blocks all its files may use (shmem_inode_acct_blocks()
 * fails past it: a fault gets SIGBUS, fallocate() and write() ENOSPC), and
 * fspick() + FSCONFIG_CMD_RECONFIGURE changes it at run time
 * (shmem_reconfigure(), which refuses a size below the blocks in use).
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/mount.h>
#include <unistd.h>

#include "arena.h"
#include "macros.h"

#if defined(HAVE_FSOPEN) && defined(HAVE_FSCONFIG) && defined(HAVE_FSMOUNT) && defined(HAVE_FSPICK)
#define ARENA_HAVE_MOUNT_API 1
#endif

/* The root directory and the one arena file, plus room for nothing else. */
#define ARENA_TMPFS_NR_INODES "4"

#ifdef ARENA_HAVE_MOUNT_API
static int tmpfs_set_size(int fc, uint64_t size_bytes) {
        char buf[32];

        /* size=0 would mean "no limit" to tmpfs: never ask for it. */
        if (size_bytes == 0)
                return -EINVAL;
        snprintf(buf, sizeof(buf), "%" PRIu64, size_bytes);
        if (fsconfig(fc, FSCONFIG_SET_STRING, "size", buf, 0) < 0)
                return -errno;
        return 0;
}

int arena_fs_mount_file(int fc, const char *name, uint64_t file_bytes, int *ret_mnt, int *ret_file) {
        _cleanup_(closep) int mnt = -1, file = -1;
        char fname[NAME_MAX + 1];

        mnt = fsmount(fc, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (mnt < 0)
                return -errno;
        /* Made with a name and unlinked at once (rather than O_TMPFILE) so
         * that /proc/PID/fd and /proc/PID/maps of the clients say whose
         * arena it is, as a memfd's name does.  '/' cannot be in a name. */
        snprintf(fname, sizeof(fname), "membroker-arena:%s", name);
        for (char *c = fname; *c; c++)
                if (*c == '/')
                        *c = ':';
        file = openat(mnt, fname, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (file < 0)
                return -errno;
        if (unlinkat(mnt, fname, 0) < 0)
                return -errno;
        if (ftruncate(file, (off_t) file_bytes) < 0)
                return -errno;
        *ret_mnt = TAKE_FD(mnt);
        *ret_file = TAKE_FD(file);
        return 0;
}

int arena_tmpfs_create(const char *name, uint64_t size_bytes, uint64_t file_bytes, bool huge, int *ret_file,
                       int *ret_root, int *ret_pick) {
        _cleanup_(closep) int fc = -1, mnt = -1, file = -1, root = -1, pick = -1;
        int r;

        fc = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fc < 0)
                return -errno;
        r = tmpfs_set_size(fc, size_bytes);
        if (r < 0)
                return r;
        if (fsconfig(fc, FSCONFIG_SET_STRING, "nr_inodes", ARENA_TMPFS_NR_INODES, 0) < 0 ||
            fsconfig(fc, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
            /* shmem_parse_one() refuses huge= without transparent huge
             * pages (has_transparent_hugepage()). */
            (huge && fsconfig(fc, FSCONFIG_SET_STRING, "huge", "always", 0) < 0) ||
            fsconfig(fc, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        r = arena_fs_mount_file(fc, name, file_bytes, &mnt, &file);
        if (r < 0)
                return r;
        /* A plain directory fd of the root: what the fd store can keep, and
         * what fspick() needs to resize the instance again after a restart. */
        root = openat(mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        r = arena_tmpfs_pick(root, &pick);
        if (r < 0)
                return r;
        *ret_file = TAKE_FD(file);
        *ret_root = TAKE_FD(root);
        *ret_pick = TAKE_FD(pick);
        return 0;
}

int arena_tmpfs_pick(int root_fd, int *ret_pick) {
        int pick = fspick(root_fd, "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC);

        if (pick < 0)
                return -errno;
        *ret_pick = pick;
        return 0;
}

int arena_tmpfs_resize(int pick_fd, uint64_t size_bytes) {
        int r = tmpfs_set_size(pick_fd, size_bytes);

        if (r < 0)
                return r;
        if (fsconfig(pick_fd, FSCONFIG_CMD_RECONFIGURE, NULL, NULL, 0) < 0)
                return -errno;
        return 0;
}
#else
int arena_fs_mount_file(int fc, const char *name, uint64_t file_bytes, int *ret_mnt, int *ret_file) {
        (void) fc;
        (void) name;
        (void) file_bytes;
        (void) ret_mnt;
        (void) ret_file;
        return -ENOSYS;
}

int arena_tmpfs_create(const char *name, uint64_t size_bytes, uint64_t file_bytes, bool huge, int *ret_file,
                       int *ret_root, int *ret_pick) {
        (void) name;
        (void) huge;
        (void) size_bytes;
        (void) file_bytes;
        (void) ret_file;
        (void) ret_root;
        (void) ret_pick;
        return -ENOSYS;
}

int arena_tmpfs_pick(int root_fd, int *ret_pick) {
        (void) root_fd;
        (void) ret_pick;
        return -ENOSYS;
}

int arena_tmpfs_resize(int pick_fd, uint64_t size_bytes) {
        (void) pick_fd;
        (void) size_bytes;
        return -ENOSYS;
}
#endif

int arena_tmpfs_probe(bool huge) {
        _cleanup_(closep) int file = -1, root = -1, pick = -1;
        int r;

        r = arena_tmpfs_create("probe", 4096, 4096, huge, &file, &root, &pick);
        if (r < 0)
                return r;
        /* Resizing must work too: it is what bounds the arena. */
        return arena_tmpfs_resize(pick, 8192);
}
