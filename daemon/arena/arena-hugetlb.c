/* SPDX-License-Identifier: MIT */
/*
 * arena-hugetlb.c - arenas of hugetlb pages (arena.h, HugePages=hugetlbfs).
 *
 * The arena is the one unlinked file of a detached hugetlbfs instance of
 * its own (fsopen("hugetlbfs") + fsmount(), as arena-tmpfs.c does for
 * tmpfs), one 2 MiB page per broker page.  The instance's size= makes a
 * subpool (hugepage_subpool_get_pages()) that bounds the pages its file
 * holds and the pages reserved for it: a client that maps the arena
 * without MAP_NORESERVE reserves pages for the whole mapping
 * (hugetlb_reserve_pages()), which stay reserved after munmap() and keep
 * them from every other tenant; the subpool refuses a reservation past its
 * size.  Where no instance can be made (no mount API, no CAP_SYS_ADMIN) the
 * arena is a sealed memfd of hugetlb pages (MFD_HUGETLB | MFD_HUGE_2MB),
 * bounded by the audit and the pool only.  Three things differ from shmem:
 *   - hugetlbfs cannot be resized once mounted (it has no reconfigure
 *     operation), so the size is fixed when the arena is made: the
 *     tenant's limit then plus 2 x ChargeBatch pages;
 *   - SEEK_DATA finds data everywhere (hugetlbfs has the generic llseek), so
 *     a grant cannot ask which of its pages a client wrote while free: it
 *     punches them all (cheap where nothing is) before it allocates them;
 *   - a fault that finds no free huge page gets SIGBUS (the clients map
 *     with MAP_NORESERVE), so a grant allocates its pages first
 *     (fallocate(), hugetlbfs_fallocate()), and a pool that cannot supply
 *     them fails the charge with ENOMEM instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "arena.h"
#include "macros.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif
#ifndef MFD_HUGE_SHIFT
#define MFD_HUGE_SHIFT 26
#endif
#define ARENA_MFD_HUGE_2MB (21U << MFD_HUGE_SHIFT)

int arena_hugetlb_memfd(const char *name, uint64_t page_size) {
        int fd;

        if (page_size != ARENA_HUGETLB_PAGE_SIZE_BYTES)
                return -EINVAL;
        fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB | ARENA_MFD_HUGE_2MB);
        return fd < 0 ? -errno : fd;
}

#if defined(HAVE_FSOPEN) && defined(HAVE_FSCONFIG) && defined(HAVE_FSMOUNT)
int arena_hugetlb_create(const char *name, uint64_t size_bytes, uint64_t file_bytes, int *ret_file) {
        _cleanup_(closep) int fc = -1, mnt = -1, file = -1;
        char size[32];
        int r;

        if (size_bytes == 0 || size_bytes % ARENA_HUGETLB_PAGE_SIZE_BYTES != 0)
                return -EINVAL;
        snprintf(size, sizeof(size), "%" PRIu64, size_bytes);
        fc = fsopen("hugetlbfs", FSOPEN_CLOEXEC);
        if (fc < 0)
                return -errno;
        if (fsconfig(fc, FSCONFIG_SET_STRING, "pagesize", "2M", 0) < 0 ||
            fsconfig(fc, FSCONFIG_SET_STRING, "size", size, 0) < 0 ||
            fsconfig(fc, FSCONFIG_SET_STRING, "nr_inodes", "4", 0) < 0 ||
            fsconfig(fc, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
            fsconfig(fc, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        r = arena_fs_mount_file(fc, name, file_bytes, &mnt, &file);
        if (r < 0)
                return r;
        *ret_file = TAKE_FD(file);
        return 0;
}
#else
int arena_hugetlb_create(const char *name, uint64_t size_bytes, uint64_t file_bytes, int *ret_file) {
        (void) name;
        (void) size_bytes;
        (void) file_bytes;
        (void) ret_file;
        return -ENOSYS;
}
#endif

bool arena_fd_is_hugetlb(int fd) {
        struct statfs sfs;

        return fstatfs(fd, &sfs) == 0 && sfs.f_type == HUGETLBFS_MAGIC;
}

int arena_hugetlb_grant_prepare(struct arena *a, const struct arena_extent *extents, size_t n) {
        const int punch_mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
        size_t i;
        int r = 0;

        for (i = 0; i < n; i++) {
                off_t start = (off_t) (extents[i].start * a->page_size);
                off_t len = (off_t) ((uint64_t) extents[i].count * a->page_size);

                /* What a client wrote into these pages while they were free
                 * goes first; then they are allocated, zeroed by the kernel. */
                (void) fallocate(a->fd, punch_mode, start, len);
                if (fallocate(a->fd, FALLOC_FL_KEEP_SIZE, start, len) < 0) {
                        r = -errno;
                        break;
                }
        }
        if (r < 0) {
                /* A failed fallocate() keeps what it allocated: give back
                 * this grant's pages to the pool. */
                for (size_t j = 0; j <= i && j < n; j++)
                        (void) fallocate(a->fd, punch_mode, (off_t) (extents[j].start * a->page_size),
                                         (off_t) ((uint64_t) extents[j].count * a->page_size));
                return r == -ENOSPC ? -ENOMEM : r;
        }
        return 0;
}

int arena_hugetlb_probe(bool *ret_instance) {
        _cleanup_(closep) int fd = -1, inst = -1;
        int r;

        /* An instance of one page: allocates none. */
        *ret_instance = arena_hugetlb_create("probe", ARENA_HUGETLB_PAGE_SIZE_BYTES, ARENA_HUGETLB_PAGE_SIZE_BYTES,
                                             &inst) >= 0;

        r = arena_hugetlb_memfd("membroker-probe", ARENA_HUGETLB_PAGE_SIZE_BYTES);
        if (r < 0)
                return r;
        fd = r;
        if (ftruncate(fd, (off_t) ARENA_HUGETLB_PAGE_SIZE_BYTES) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
                return -errno;
        return 0;
}
