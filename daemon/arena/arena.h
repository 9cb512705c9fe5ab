/* SPDX-License-Identifier: MIT */
/*
 * arena.h - a tenant's pages: one shared-memory file, a free-index pool and
 * a per-page owner table.
 *
 * Backing: by default the file lives on a tmpfs instance of its own
 * (arena-tmpfs.c) whose size tracks the pages charged to the tenant's
 * clients (nused, stocked pages included) plus a slack: grown to
 * nused + 2 x slack before a Grant that would leave less than nused + slack,
 * shrunk to nused + slack after a release leaves more than nused + 2 x slack.
 * Whatever a client does with its fd or mapping, the kernel keeps the memory
 * backing the arena within that size (SIGBUS on a fault, ENOSPC from
 * fallocate()), so at most 2 x slack pages beyond the charge.  Where no
 * tmpfs instance can be made, the file is a sealed memfd and only the audit
 * (arena_audit()) bounds it, after the fact.
 *
 * Layout of the metadata (one anonymous MAP_NORESERVE mapping, so pages that
 * were never used cost nothing):
 *   owner[i]   uint32_t per page: the arena-local id of the client holding
 *              page i (0 while the page is free);
 *   used[]     one bit per page, set while the page is charged to a client;
 *   full[]     one bit per 64 pages, set while that word of used[] is full,
 *              so finding the lowest free page skips full regions 4096 pages
 *              at a time.
 * Total: 4 + 1/8 + 1/4096 bytes per page (target: <= 8 bytes per page
 * across daemon and client).
 *
 * Threading:
 *   - allocation and the used/full bitmaps are serialised by the arena mutex;
 *   - owner[] entries of pages a client holds are written only by the thread
 *     serving that client (its worker), so checking and releasing one's own
 *     pages needs no lock; the lock is taken once per extent to give the
 *     indices back.  A page is hole-punched while still marked used, so it is
 *     never handed to another client before its contents are gone; a
 *     deferred release (arena_release_begin()/arena_release_finish()) takes
 *     it out of nused at once and keeps it used until the punch.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define ARENA_OWNER_NONE 0u
#define ARENA_OWNER_MAX (UINT32_MAX - 2) /* UINT32_MAX - 1 marks pages returned whose punch is
                                        * pending, UINT32_MAX pages being checked */

struct arena_extent {
        uint64_t start;
        uint32_t count;
};

/* How a new arena is backed. */
struct arena_backing {
        bool tmpfs;            /* its own tmpfs instance (else a sealed memfd) */
        uint64_t slack_pages;  /* the tmpfs size beyond nused (see above) */
        bool huge;             /* the instance mounted huge=always (shmem
                                * THP, shmem_is_huge()); tmpfs only */
        bool hugetlb;          /* 2 MiB hugetlb pages (not tmpfs;
                                * arena-hugetlb.c) */
        uint64_t hugetlb_size_pages; /* hugetlb: the size of its own
                                * hugetlbfs instance, 0 for a memfd */
};

/* The hugetlb page an arena of HugePages=hugetlbfs is made of. */
#define ARENA_HUGETLB_PAGE_SIZE_BYTES (UINT64_C(2) << 20)

/* What one arena_audit() found and did. */
struct arena_audit {
        uint64_t found_bytes;    /* memory backing the file, as found */
        uint64_t backed_bytes;   /* memory backing the file afterwards */
        uint64_t overrun_pages;  /* backed pages nobody held, punched (here
                                  * or at a grant since the last audit) */
        bool size_restored;      /* a client had changed the file size */
};

struct arena {
        int fd;              /* the arena file; CLOEXEC (a memfd: sealed
                              * grow/shrink/seal) */
        bool tmpfs;          /* fd is on its own tmpfs instance */
        int root_fd;         /* that instance's root directory, -1 */
        int pick_fd;         /* fspick() of it, to resize; -1 when it cannot
                              * be resized (then only the audit bounds it) */
        pthread_mutex_t size_lock; /* serialises resizes (not allocation) */
        _Atomic uint64_t size_pages; /* the tmpfs size; written under
                                      * size_lock */
        uint64_t slack_pages;
        _Atomic uint64_t dirty_at_grant; /* pages punched at grants, not yet
                                          * reported by arena_audit() */
        int owner_fd;        /* memfd holding owner[] so that it survives the
                              * daemon (arena_new_shared(), restart.h), -1
                              * when owner[] is anonymous; closed by
                              * arena_free() */
        uint64_t npages;     /* arena size in pages */
        uint64_t page_size;  /* bytes */

        pthread_mutex_t lock;
        uint64_t nwords;     /* words of used[] */
        uint64_t nfull_words; /* words of full[] */
        uint64_t hint;       /* lowest full[] word that may have room */
        uint64_t top;        /* pages at or above this index were never used */
        bool hugetlb;        /* on hugetlbfs (arena-hugetlb.c) */
        _Atomic uint64_t nused; /* pages currently charged to clients */
        _Atomic uint64_t npending; /* pages returned (no longer in nused)
                                    * whose punch is pending: still marked
                                    * used, so never handed out before it;
                                    * at most slack_pages */

        uint32_t *owner;
        uint64_t *used;
        uint64_t *full;
        void *meta;          /* the mapping holding owner/used/full (used/full
                              * only when owner[] is shared) */
        size_t meta_bytes;
        void *owner_map;     /* owner[]'s own shared mapping, or NULL */
        size_t owner_map_bytes;

        /* arena-local client ids: next never-used id, and a stack of freed ones */
        uint32_t next_owner;
        uint32_t *free_owners;
        size_t n_free_owners, free_owners_alloc;
};

/**
 * arena_new - create an arena of @npages pages of @page_size bytes, backed as
 * @backing says (NULL: a sealed memfd without slack) by a file named after
 * @name.  Nothing is allocated or backed until pages are used.  Returns 0 or
 * a negative errno (that of fsopen()/fsmount() when a tmpfs instance cannot
 * be made: the caller may fall back to a memfd).
 */
int arena_new(const char *name, uint64_t npages, uint64_t page_size, const struct arena_backing *backing,
              struct arena **ret);

/**
 * arena_new_shared - like arena_new(), but owner[] lives in @owner_fd (a
 * memfd the caller made at least @owner_offset + 4 * @npages bytes long;
 * @owner_offset a multiple of the system page size), mapped shared, so
 * that the page owners survive the daemon (restart.h).  The caller keeps
 * @owner_fd; setting a->owner_fd hands it to the arena (closed by
 * arena_free()).
 */
int arena_new_shared(const char *name, uint64_t npages, uint64_t page_size, int owner_fd, uint64_t owner_offset,
                     const struct arena_backing *backing, struct arena **ret);

/**
 * arena_restore - rebuild an arena from the memfd @fd of a previous daemon
 * and the owner table it kept in @owner_fd (arena_new_shared(), same
 * @owner_offset): the arena size comes from @fd, the used pages, their
 * count and the owner ids in use from owner[] (an id without pages is
 * free again).  Pages a previous daemon left half-returned, and any backed
 * page nobody holds, are hole-punched.  @root_fd is the root of the tmpfs
 * instance @fd lives on (-1: a memfd, or a root that was lost: then the
 * arena cannot be resized and only the audit bounds it); the arena gets
 * @slack_pages of slack.  On success the arena owns @fd and @root_fd (not
 * @owner_fd).  -EINVAL when @fd is not a whole number of pages.
 */
int arena_restore(int fd, int root_fd, uint64_t page_size, uint64_t slack_pages, int owner_fd, uint64_t owner_offset,
                  const char *name, struct arena **ret);

/**
 * arena_transfer - move the pages of @n extents from their owners to @to: a
 * client re-claiming after a restart.  Every page must be held by one of
 * the @nfrom ids in @from, and the extents must be in increasing order
 * without overlap (checked before anything changes); else -EINVAL with
 * *@ret_bad_page.  @ret_moved[i] (an array of @nfrom) gets the pages taken
 * from @from[i].  The caller serialises transfers with anything else that
 * changes the owners of these pages.
 */
int arena_transfer(struct arena *a, const uint32_t *from, size_t nfrom, uint32_t to,
                   const struct arena_extent *extents, size_t n, uint64_t *ret_moved, uint64_t *ret_bad_page);

/* Close the memfd and free the metadata.  No client may hold pages. */
void arena_free(struct arena *a);

/* A new arena-local id for a client (never ARENA_OWNER_NONE); -ENOSPC. */
int arena_owner_new(struct arena *a, uint32_t *ret);
/* Give an id back; the client must hold no pages any more. */
void arena_owner_free(struct arena *a, uint32_t owner);

/**
 * arena_alloc - pick @n free pages for @owner, lowest indices first, and
 * record the owner of each.  The result is written as at most @max_extents
 * extents into @ret_extents: when the lowest pages are too fragmented, the
 * last extent is the lowest free run long enough for the rest.  Returns the
 * number of extents, -ENOSPC when the arena cannot supply @n pages in
 * @max_extents extents (nothing is allocated then).
 */
int arena_alloc(struct arena *a, uint32_t owner, uint32_t n, struct arena_extent *ret_extents,
                unsigned max_extents);

/**
 * arena_check_owned - true when every page of the @n extents is held by
 * @owner (each page once: a page named twice fails).  On failure
 * *@ret_bad_page is the first offending page index.  Changes nothing.
 * Call from the thread serving @owner only.
 */
bool arena_check_owned(struct arena *a, uint32_t owner, const struct arena_extent *extents, size_t n,
                       uint64_t *ret_bad_page);

/**
 * arena_release - return the pages of @n extents held by @owner (checked with
 * arena_check_owned() before): hole-punch them, then give the indices back.
 * Returns the number of pages released.
 */
uint64_t arena_release(struct arena *a, uint32_t owner, const struct arena_extent *extents, size_t n);

/**
 * arena_release_begin - the first half of a deferred release: the pages of
 * the @n extents @owner holds (checked with arena_check_owned() before) stop
 * being its own and leave nused at once, but stay marked used, so that no
 * client gets them before arena_release_finish() punched them (the zero-page
 * guarantee).  At most slack_pages pages of the arena wait for their punch
 * at any time (they are backed and charged to nobody; the tmpfs size keeps
 * that much room above nused, so the bound on the backing is unchanged).
 * Returns 0 with the number of pages in *@ret_released, or -ENOSPC when the
 * pages would pass that cap: nothing changed, release them with
 * arena_release() (punched at once).
 */
int arena_release_begin(struct arena *a, const struct arena_extent *extents, size_t n, uint64_t *ret_released);

/**
 * arena_release_finish - punch and free the pages of @n extents given to
 * arena_release_begin() before (by one or several calls), sorted by start;
 * adjacent extents are punched as one run.  Shrinks the tmpfs instance
 * after the punch when it is larger than the charge needs.
 */
void arena_release_finish(struct arena *a, const struct arena_extent *extents, size_t n);

/**
 * arena_release_owner - return every page @owner holds (a disconnect or
 * crash), hole-punching each contiguous run once.  @held is how many pages
 * the owner holds (the scan stops when all are found).  Returns the number
 * of pages released.
 */
uint64_t arena_release_owner(struct arena *a, uint32_t owner, uint64_t held);

/* Pages currently charged to clients of this arena. */
uint64_t arena_used(const struct arena *a);

/* Bytes of memory really backing the file (fstat st_blocks * 512). */
int arena_backed_bytes(const struct arena *a, uint64_t *ret);

/**
 * arena_grant_prepare - make the @n extents just taken by arena_alloc() fit
 * to hand out: punch any extent a client wrote into while it was free (its
 * pages count in dirty_at_grant, reported by the next arena_audit()), then
 * grow the tmpfs size to cover nused + slack.  Call before the Grant goes
 * out.  Returns 0, or a negative errno when the size cannot grow (the caller
 * releases the extents and fails the charge).
 */
int arena_grant_prepare(struct arena *a, const struct arena_extent *extents, size_t n);

/**
 * arena_audit - compare the memory backing @a with what is charged and
 * revoke what nobody holds.  When the file is backed beyond nused pages,
 * when a tmpfs instance is full (the next honest fault could get SIGBUS) or
 * when a client changed the file size: restore the size, walk the backed
 * runs (SEEK_DATA/SEEK_HOLE) and punch every backed page that is free,
 * checking and punching under the allocation lock so that arena_alloc()
 * cannot hand such a page out in between.  Then shrink the tmpfs size if it
 * may.  Fills @ret.  Returns 0 or a negative errno (fstat()).  One caller at
 * a time.
 */
int arena_audit(struct arena *a, struct arena_audit *ret);

/* ---- the tmpfs instance (arena-tmpfs.c) ---- */

/**
 * arena_tmpfs_create - a new detached tmpfs instance of @size_bytes (never
 * 0) holding one unlinked file of @file_bytes named after @name: returns
 * the file, a directory fd of the instance's root and an fspick() fd to
 * resize it.  With @huge the instance is mounted huge=always: its pages
 * are transparent huge pages wherever a whole aligned PMD fits.
 * Without CAP_SYS_ADMIN it is made in a short-lived child's user and mount
 * namespaces (arena-tmpfs.c).  Returns 0 or a negative errno (-EPERM where
 * neither works, -ENOSYS on a
 * kernel or libc without the new mount API, -EINVAL when the kernel refuses
 * huge=, having no transparent huge pages).
 */
int arena_tmpfs_create(const char *name, uint64_t size_bytes, uint64_t file_bytes, bool huge, int *ret_file,
                       int *ret_root, int *ret_pick);

/**
 * arena_fs_mount_file - mount the configured filesystem context @fc (tmpfs
 * or hugetlbfs, made by fsconfig(FSCONFIG_CMD_CREATE)) detached, and make
 * in it one file named after @name, unlinked at once, of @file_bytes.
 * Returns 0 with the mount in *@ret_mnt and the file in *@ret_file, or a
 * negative errno (nothing left open).
 */
int arena_fs_mount_file(int fc, const char *name, uint64_t file_bytes, int *ret_mnt, int *ret_file);

/* fspick() the instance whose root directory is @root_fd.  0 or -errno. */
int arena_tmpfs_pick(int root_fd, int *ret_pick);

/* Set the size of the instance of @pick_fd; -EINVAL when fewer bytes than
 * are in use (shmem_reconfigure()).  0 or -errno. */
int arena_tmpfs_resize(int pick_fd, uint64_t size_bytes);

/* Whether this process can make (and resize) a tmpfs instance, mounted
 * huge=always with @huge: 0 or -errno. */
int arena_tmpfs_probe(bool huge);

/* Whether the instances are made in a child's user namespace (the daemon
 * lacking CAP_SYS_ADMIN), rather than by the daemon itself. */
bool arena_tmpfs_in_userns(void);

/**
 * arena_hugetlb_memfd - a new memfd of hugetlb pages of @page_size bytes
 * (2 MiB only: MFD_HUGETLB | MFD_HUGE_2MB), named @name.  Returns the fd or
 * a negative errno (-EINVAL for another page size or a kernel without
 * hugetlbfs, -ENOENT/-ENOSYS where memfds cannot be hugetlb).
 */
int arena_hugetlb_memfd(const char *name, uint64_t page_size);

/**
 * arena_hugetlb_create - a new detached hugetlbfs instance of 2 MiB pages
 * whose size= is @size_bytes (a multiple of 2 MiB, never 0: the pages its
 * file holds and those reserved for it never exceed it), holding one
 * unlinked file of @file_bytes named after @name.  The instance cannot be
 * resized.  Returns 0 with the file in *@ret_file, or a negative errno
 * (-EPERM without CAP_SYS_ADMIN, -ENOSYS without the new mount API).
 */
int arena_hugetlb_create(const char *name, uint64_t size_bytes, uint64_t file_bytes, int *ret_file);

/* Whether @fd is a file on hugetlbfs (HUGETLBFS_MAGIC). */
bool arena_fd_is_hugetlb(int fd);

/**
 * arena_hugetlb_grant_prepare - arena_grant_prepare() of a hugetlb arena:
 * punch the @n extents (hugetlbfs cannot tell which pages hold data) and
 * allocate them, zeroed, so that the client's first touch finds them.
 * Returns 0, or -ENOMEM when the pool has no free page for them (nothing
 * of them is left allocated).
 */
int arena_hugetlb_grant_prepare(struct arena *a, const struct arena_extent *extents, size_t n);

/* Whether this process can make a sealed memfd of 2 MiB hugetlb pages:
 * 0 or -errno; *@ret_instance: whether it can make hugetlbfs instances
 * (arena_hugetlb_create()) too.  Allocates no page. */
int arena_hugetlb_probe(bool *ret_instance);
