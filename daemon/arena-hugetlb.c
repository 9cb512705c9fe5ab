/* SPDX-License-Identifier: MIT */
/*
 * arena-hugetlb.c - arenas of hugetlb pages (arena.h, HugePages=hugetlbfs).
 *
 * The arena is a sealed memfd on the kernel's internal hugetlbfs mount
 * (memfd_create() with MFD_HUGETLB | MFD_HUGE_2MB), one 2 MiB page per
 * broker page.  Three things differ from shmem:
 *   - hugetlbfs cannot be resized once mounted (no reconfigure operation),
 *     so there is no tmpfs-like size bound: what a client backs beyond its
 *     charge is bounded by the audit and by the reserved pool;
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
#include <linux/falloc.h>
#include <linux/magic.h>
#include <sys/mman.h>
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

int arena_hugetlb_probe(void) {
        _cleanup_(closep) int fd = -1;
        int r;

        r = arena_hugetlb_memfd("membroker-probe", ARENA_HUGETLB_PAGE_SIZE_BYTES);
        if (r < 0)
                return r;
        fd = r;
        if (ftruncate(fd, (off_t) ARENA_HUGETLB_PAGE_SIZE_BYTES) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
                return -errno;
        return 0;
}
