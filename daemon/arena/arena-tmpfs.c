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
 *
 * Without CAP_SYS_ADMIN (the daemon runs as a system user of its own) the
 * instance is made where no privilege is needed: tmpfs may be mounted by
 * whoever holds CAP_SYS_ADMIN over the mount namespace (FS_USERNS_MOUNT,
 * may_mount()), so a short-lived child unshares a user namespace and a mount
 * namespace, maps its own uid to root there, and does fsopen() ... fspick()
 * in them; it passes the file, the root and the fspick() fd back over a
 * socket pair and exits.  The mount fd and the superblock outlive it: the
 * detached mount has an anonymous mount namespace of its own, and the
 * superblock keeps its user namespace (sb->s_user_ns).  Resizing needs no
 * child: FSCONFIG_CMD_RECONFIGURE asks ns_capable(sb->s_user_ns,
 * CAP_SYS_ADMIN), which the daemon has as the owner of that namespace
 * (cap_capable(): a user namespace's owner has every capability in it),
 * after a restart too, the uid being the same.  Only a new fspick() needs a
 * child again (may_mount() of the caller's own mount namespace).
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

static int tmpfs_create_here(const char *name, uint64_t size_bytes, uint64_t file_bytes, bool huge, int *ret_file,
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
        pick = fspick(root, "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC);
        if (pick < 0)
                return -errno;
        *ret_file = TAKE_FD(file);
        *ret_root = TAKE_FD(root);
        *ret_pick = TAKE_FD(pick);
        return 0;
}

/* ---- the user namespace child ---- */

/* Where the instances are made: not known yet, here, or in a child's
 * user namespace (once here failed with EPERM). */
enum { TMPFS_WHERE_UNKNOWN, TMPFS_WHERE_HERE, TMPFS_WHERE_USERNS };
static _Atomic int tmpfs_where = TMPFS_WHERE_UNKNOWN;

struct userns_job {
        /* in */
        const char *name;
        uint64_t size_bytes, file_bytes;
        bool huge;
        int root_fd;              /* >= 0: fspick() it, else create */
        char uid_map[32], gid_map[32];
        /* out (in the child) */
        int fds[3];
        int nfds;
        bool no_userns;           /* the namespaces could not be made */
};

static int write_file(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        ssize_t n;
        int r = 0;

        if (fd < 0)
                return -errno;
        n = write(fd, text, strlen(text));
        if (n < 0)
                r = -errno;
        else if ((size_t) n != strlen(text))
                r = -EIO;
        close(fd);
        return r;
}

/* In the child: become root of a new user namespace that maps only our
 * own uid and gid (what an unprivileged process may map,
 * new_idmap_permitted(); setgroups must be denied first for the gid), with
 * a mount namespace it owns, and do the job.  0 or -errno. */
static int userns_child(struct userns_job *job) {
        int r;

        job->no_userns = true;
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                return -errno;
        /* Files the instance gets must belong to a mapped uid
         * (fsuidgid_has_mapping()), and tmpfs's root to its mounter. */
        r = write_file("/proc/self/setgroups", "deny");
        if (r < 0 && r != -ENOENT)
                return r;
        r = write_file("/proc/self/uid_map", job->uid_map);
        if (r < 0)
                return r;
        r = write_file("/proc/self/gid_map", job->gid_map);
        if (r < 0)
                return r;
        job->no_userns = false;
        if (job->root_fd >= 0) {
                job->fds[0] = fspick(job->root_fd, "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC);
                if (job->fds[0] < 0)
                        return -errno;
                job->nfds = 1;
                return 0;
        }
        r = tmpfs_create_here(job->name, job->size_bytes, job->file_bytes, job->huge, &job->fds[0], &job->fds[1],
                              &job->fds[2]);
        if (r < 0)
                return r;
        job->nfds = 3;
        return 0;
}

/* The child's answer: its errno (0 on success), and whether it failed to
 * make the namespaces; the fds ride along. */
struct userns_answer {
        int error;
        int no_userns;
};

static void userns_reply(int sock, int error, bool no_userns, const int *fds, int nfds) {
        char control[CMSG_SPACE(3 * sizeof(int))];
        struct userns_answer ans = { .error = error, .no_userns = no_userns };
        struct iovec iov = { .iov_base = &ans, .iov_len = sizeof(ans) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        memset(control, 0, sizeof(control));
        if (nfds > 0) {
                struct cmsghdr *cm;

                mh.msg_control = control;
                mh.msg_controllen = CMSG_SPACE((size_t) nfds * sizeof(int));
                cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN((size_t) nfds * sizeof(int));
                memcpy(CMSG_DATA(cm), fds, (size_t) nfds * sizeof(int));
        }
        (void) sendmsg(sock, &mh, MSG_NOSIGNAL);
}

/* Receive it: 0 with @want fds in @fds, or the child's -errno (and
 * *@no_userns). */
static int userns_receive(int sock, int *fds, int want, bool *no_userns) {
        char control[CMSG_SPACE(3 * sizeof(int))];
        struct userns_answer ans = { .error = EPROTO };
        int error, got = 0;
        struct iovec iov = { .iov_base = &ans, .iov_len = sizeof(ans) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof(control) };
        ssize_t n;

        do
                n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        error = ans.error;
        *no_userns = ans.no_userns != 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                        int k = (int) ((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

                        for (int i = 0; i < k; i++) {
                                int fd;

                                memcpy(&fd, CMSG_DATA(cm) + (size_t) i * sizeof(int), sizeof(int));
                                if (got < want)
                                        fds[got++] = fd;
                                else
                                        close(fd);
                        }
                }
        if (n != (ssize_t) sizeof(ans) || (error == 0 && got != want)) {
                for (int i = 0; i < got; i++)
                        close(fds[i]);
                return error != 0 ? -error : -EPROTO;
        }
        if (error != 0) {
                for (int i = 0; i < got; i++)
                        close(fds[i]);
                return -error;
        }
        return 0;
}

/* Run @job in a child of its own user and mount namespaces; its fds come
 * back in @out (1 for a pick, 3 for a create).  0 or -errno; -EPERM where
 * the namespaces themselves cannot be made (user.max_user_namespaces=0, a
 * seccomp or LSM policy against unshare()): the caller's own failure. */
static int userns_run(struct userns_job *job, int *out) {
        _cleanup_(closep) int mine = -1, theirs = -1;
        bool no_userns = false;
        int sv[2], status, r;
        pid_t pid;

        snprintf(job->uid_map, sizeof(job->uid_map), "0 %u 1\n", (unsigned) geteuid());
        snprintf(job->gid_map, sizeof(job->gid_map), "0 %u 1\n", (unsigned) getegid());
        job->nfds = 0;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        mine = sv[0];
        theirs = sv[1];
        job->no_userns = false;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                /* Only system calls from here on: the parent has threads. */
                r = userns_child(job);
                userns_reply(theirs, r < 0 ? -r : 0, job->no_userns, job->fds, r < 0 ? 0 : job->nfds);
                _exit(0);
        }
        close(TAKE_FD(theirs));
        r = userns_receive(mine, out, job->root_fd >= 0 ? 1 : 3, &no_userns);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        return r < 0 && no_userns ? -EPERM : r;
}

int arena_tmpfs_create(const char *name, uint64_t size_bytes, uint64_t file_bytes, bool huge, int *ret_file,
                       int *ret_root, int *ret_pick) {
        struct userns_job job = { .name = name, .size_bytes = size_bytes, .file_bytes = file_bytes, .huge = huge,
                                  .root_fd = -1 };
        int fds[3], r;

        if (atomic_load(&tmpfs_where) != TMPFS_WHERE_USERNS) {
                r = tmpfs_create_here(name, size_bytes, file_bytes, huge, ret_file, ret_root, ret_pick);
                if (r != -EPERM) {
                        if (r == 0)
                                atomic_store(&tmpfs_where, TMPFS_WHERE_HERE);
                        return r;
                }
        }
        r = userns_run(&job, fds);
        if (r < 0)
                return r;
        atomic_store(&tmpfs_where, TMPFS_WHERE_USERNS);
        *ret_file = fds[0];
        *ret_root = fds[1];
        *ret_pick = fds[2];
        return 0;
}

int arena_tmpfs_pick(int root_fd, int *ret_pick) {
        struct userns_job job = { .root_fd = root_fd };
        int pick, r;

        if (atomic_load(&tmpfs_where) != TMPFS_WHERE_USERNS) {
                pick = fspick(root_fd, "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC);
                if (pick >= 0) {
                        *ret_pick = pick;
                        return 0;
                }
                if (errno != EPERM)
                        return -errno;
        }
        r = userns_run(&job, &pick);
        if (r < 0)
                return r;
        atomic_store(&tmpfs_where, TMPFS_WHERE_USERNS);
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

bool arena_tmpfs_in_userns(void) {
#ifdef ARENA_HAVE_MOUNT_API
        return atomic_load(&tmpfs_where) == TMPFS_WHERE_USERNS;
#else
        return false;
#endif
}

int arena_tmpfs_probe(bool huge) {
        _cleanup_(closep) int file = -1, root = -1, pick = -1;
        int r;

        r = arena_tmpfs_create("probe", 4096, 4096, huge, &file, &root, &pick);
        if (r < 0)
                return r;
        /* Resizing must work too: it is what bounds the arena. */
        return arena_tmpfs_resize(pick, 8192);
}
