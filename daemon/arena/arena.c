/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "arena.h"
#include "macros.h"

#define ARENA_OWNER_MARK UINT32_MAX /* arena_check_owned(): page seen once */
#define ARENA_OWNER_PENDING (UINT32_MAX - 1) /* returned, punch pending */
#define BITS_PER_WORD 64u
#define ARENA_NAME_MAX_BYTES 200

static inline uint32_t owner_load(const struct arena *a, uint64_t i) {
        return __atomic_load_n(&a->owner[i], __ATOMIC_RELAXED);
}

static inline void owner_store(struct arena *a, uint64_t i, uint32_t v) {
        __atomic_store_n(&a->owner[i], v, __ATOMIC_RELAXED);
}

static size_t round_up8(size_t n) {
        return (n + 7) & ~(size_t) 7;
}

/* Bits past the end are permanently "used" so they are never picked. */
static void mark_tail(struct arena *a) {
        uint64_t tail = a->npages % BITS_PER_WORD;

        if (tail != 0)
                a->used[a->nwords - 1] = ~((UINT64_C(1) << tail) - 1);
        tail = a->nwords % BITS_PER_WORD;
        if (tail != 0)
                a->full[a->nfull_words - 1] = ~((UINT64_C(1) << tail) - 1);
}

/* The metadata of an arena of @npages pages; owner[] anonymous (@owner_fd
 * < 0) or shared from @owner_fd at @owner_offset.  Does not touch a->fd. */
static int arena_alloc_meta(uint64_t npages, uint64_t page_size, int owner_fd, uint64_t owner_offset,
                            struct arena **ret) {
        struct arena *a;
        size_t owner_bytes, used_bytes, full_bytes;
        int r;

        if (npages == 0 || page_size == 0 || npages > UINT64_MAX / page_size || npages > (uint64_t) SIZE_MAX / 8)
                return -EINVAL;

        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->fd = -1;
        a->root_fd = -1;
        a->pick_fd = -1;
        a->owner_fd = -1;
        a->npages = npages;
        a->page_size = page_size;
        a->nwords = DIV_ROUND_UP(npages, BITS_PER_WORD);
        a->nfull_words = DIV_ROUND_UP(a->nwords, BITS_PER_WORD);
        a->next_owner = 1;

        owner_bytes = round_up8((size_t) npages * sizeof(uint32_t));
        used_bytes = (size_t) a->nwords * sizeof(uint64_t);
        full_bytes = (size_t) a->nfull_words * sizeof(uint64_t);
        if (owner_fd >= 0) {
                /* owner[] in the caller's memfd; used/full stay private. */
                a->owner_map_bytes = owner_bytes;
                a->owner_map = mmap(NULL, owner_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, owner_fd,
                                    (off_t) owner_offset);
                if (a->owner_map == MAP_FAILED) {
                        r = -errno;
                        free(a);
                        return r;
                }
                owner_bytes = 0;
        }
        a->meta_bytes = owner_bytes + used_bytes + full_bytes;
        /* Anonymous and NORESERVE: untouched parts stay unbacked zero pages,
         * so a large arena with few pages in use costs what it uses. */
        a->meta = mmap(NULL, a->meta_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (a->meta == MAP_FAILED) {
                r = -errno;
                if (a->owner_map)
                        munmap(a->owner_map, a->owner_map_bytes);
                free(a);
                return r;
        }
        a->owner = a->owner_map ? a->owner_map : a->meta;
        a->used = (uint64_t *) ((char *) a->meta + owner_bytes);
        a->full = (uint64_t *) ((char *) a->meta + owner_bytes + used_bytes);
        mark_tail(a);

        r = pthread_mutex_init(&a->lock, NULL);
        if (r == 0) {
                r = pthread_mutex_init(&a->size_lock, NULL);
                if (r != 0)
                        pthread_mutex_destroy(&a->lock);
        }
        if (r != 0) {
                munmap(a->meta, a->meta_bytes);
                if (a->owner_map)
                        munmap(a->owner_map, a->owner_map_bytes);
                free(a);
                return -r;
        }
        *ret = a;
        return 0;
}

static int arena_create(const char *name, uint64_t npages, uint64_t page_size, int owner_fd, uint64_t owner_offset,
                        const struct arena_backing *backing, struct arena **ret) {
        _cleanup_(closep) int fd = -1, root_fd = -1, pick_fd = -1;
        char memfd_name[ARENA_NAME_MAX_BYTES];
        uint64_t size_pages = 0;
        struct arena *a;
        int r;

        if (npages == 0 || page_size == 0 || npages > UINT64_MAX / page_size || npages > (uint64_t) SIZE_MAX / 8)
                return -EINVAL;

        if (backing && backing->tmpfs) {
                /* Room for the slack only: nothing is charged yet. */
                size_pages = MB_MAX(backing->slack_pages, (uint64_t) 1);
                r = arena_tmpfs_create(name, size_pages * page_size, npages * page_size, backing->huge, &fd, &root_fd,
                                       &pick_fd);
                if (r < 0)
                        return r;
        } else if (backing && backing->hugetlb && backing->hugetlb_size_pages > 0) {
                /* Its own hugetlbfs instance: bounded, but a file there
                 * cannot be sealed (the audit restores a size a client
                 * changed, as on tmpfs). */
                r = arena_hugetlb_create(name, backing->hugetlb_size_pages * page_size, npages * page_size, &fd);
                if (r < 0)
                        return r;
        } else {
                snprintf(memfd_name, sizeof(memfd_name), "membroker-arena:%s", name);
                if (backing && backing->hugetlb) {
                        r = arena_hugetlb_memfd(memfd_name, page_size);
                        if (r < 0)
                                return r;
                        fd = r;
                } else {
                        fd = memfd_create(memfd_name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
                        if (fd < 0)
                                return -errno;
                }
                if (ftruncate(fd, (off_t) (npages * page_size)) < 0)
                        return -errno;
                /* Clients map the whole arena; they must not be able to
                 * resize it (and nobody may add or remove seals afterwards). */
                if (fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
                        return -errno;
        }

        r = arena_alloc_meta(npages, page_size, owner_fd, owner_offset, &a);
        if (r < 0)
                return r;
        a->fd = TAKE_FD(fd);
        a->hugetlb = backing && backing->hugetlb;
        a->tmpfs = root_fd >= 0;
        a->root_fd = TAKE_FD(root_fd);
        a->pick_fd = TAKE_FD(pick_fd);
        a->size_pages = size_pages;
        a->slack_pages = backing ? backing->slack_pages : 0;
        *ret = a;
        return 0;
}

int arena_new(const char *name, uint64_t npages, uint64_t page_size, const struct arena_backing *backing,
              struct arena **ret) {
        return arena_create(name, npages, page_size, -1, 0, backing, ret);
}

int arena_new_shared(const char *name, uint64_t npages, uint64_t page_size, int owner_fd, uint64_t owner_offset,
                     const struct arena_backing *backing, struct arena **ret) {
        if (owner_fd < 0)
                return -EBADF;
        return arena_create(name, npages, page_size, owner_fd, owner_offset, backing, ret);
}

void arena_free(struct arena *a) {
        if (!a)
                return;
        if (a->fd >= 0)
                close(a->fd);
        if (a->root_fd >= 0)
                close(a->root_fd);
        if (a->pick_fd >= 0)
                close(a->pick_fd);
        if (a->owner_fd >= 0)
                close(a->owner_fd);
        if (a->meta && a->meta != MAP_FAILED)
                munmap(a->meta, a->meta_bytes);
        if (a->owner_map)
                munmap(a->owner_map, a->owner_map_bytes);
        pthread_mutex_destroy(&a->lock);
        pthread_mutex_destroy(&a->size_lock);
        free(a->free_owners);
        free(a);
}

int arena_owner_new(struct arena *a, uint32_t *ret) {
        int r = 0;

        pthread_mutex_lock(&a->lock);
        if (a->n_free_owners > 0)
                *ret = a->free_owners[--a->n_free_owners];
        else if (a->next_owner <= ARENA_OWNER_MAX)
                *ret = a->next_owner++;
        else
                r = -ENOSPC;
        pthread_mutex_unlock(&a->lock);
        return r;
}

void arena_owner_free(struct arena *a, uint32_t owner) {
        pthread_mutex_lock(&a->lock);
        if (a->n_free_owners == a->free_owners_alloc) {
                size_t n = MB_MAX(a->free_owners_alloc * 2, (size_t) 16);
                uint32_t *p = realloc(a->free_owners, n * sizeof(uint32_t));
                if (!p) {
                        /* Leak the id rather than fail: ids are plentiful. */
                        pthread_mutex_unlock(&a->lock);
                        return;
                }
                a->free_owners = p;
                a->free_owners_alloc = n;
        }
        a->free_owners[a->n_free_owners++] = owner;
        pthread_mutex_unlock(&a->lock);
}

/* Mask of @count bits starting at bit @shift (count 1..64, shift+count <= 64). */
static inline uint64_t bits_mask(unsigned shift, unsigned count) {
        uint64_t m = count >= BITS_PER_WORD ? ~UINT64_C(0) : (UINT64_C(1) << count) - 1;
        return m << shift;
}

/* Mark [start, start+count) used.  Lock held. */
static void mark_used_locked(struct arena *a, uint64_t start, uint64_t count) {
        while (count > 0) {
                uint64_t w = start / BITS_PER_WORD;
                unsigned shift = start % BITS_PER_WORD;
                unsigned k = (unsigned) MB_MIN(count, (uint64_t) (BITS_PER_WORD - shift));

                a->used[w] |= bits_mask(shift, k);
                if (a->used[w] == ~UINT64_C(0))
                        a->full[w / BITS_PER_WORD] |= UINT64_C(1) << (w % BITS_PER_WORD);
                start += k;
                count -= k;
        }
}

/* Mark [start, start+count) free.  Lock held. */
static void mark_free_locked(struct arena *a, uint64_t start, uint64_t count) {
        uint64_t fw = start / BITS_PER_WORD / BITS_PER_WORD;

        if (fw < a->hint)
                a->hint = fw;
        while (count > 0) {
                uint64_t w = start / BITS_PER_WORD;
                unsigned shift = start % BITS_PER_WORD;
                unsigned k = (unsigned) MB_MIN(count, (uint64_t) (BITS_PER_WORD - shift));

                a->used[w] &= ~bits_mask(shift, k);
                a->full[w / BITS_PER_WORD] &= ~(UINT64_C(1) << (w % BITS_PER_WORD));
                start += k;
                count -= k;
        }
}

/* Lowest run of @len free pages, or UINT64_MAX.  Lock held.  Only used when
 * the lowest free pages are too fragmented for one Grant. */
static uint64_t find_free_run_locked(struct arena *a, uint64_t len) {
        uint64_t run_start = 0, run_len = 0;

        for (uint64_t w = 0; w < a->nwords; w++) {
                uint64_t u = a->used[w];

                if (u == 0) {
                        if (run_len == 0)
                                run_start = w * BITS_PER_WORD;
                        run_len += BITS_PER_WORD;
                } else if (u == ~UINT64_C(0)) {
                        run_len = 0;
                } else {
                        for (unsigned b = 0; b < BITS_PER_WORD; b++) {
                                if (u & (UINT64_C(1) << b)) {
                                        run_len = 0;
                                        continue;
                                }
                                if (run_len == 0)
                                        run_start = w * BITS_PER_WORD + b;
                                run_len++;
                                if (run_len >= len)
                                        return run_start;
                        }
                }
                if (run_len >= len)
                        return run_start;
        }
        return UINT64_MAX;
}

int arena_alloc(struct arena *a, uint32_t owner, uint32_t n, struct arena_extent *ret_extents,
                unsigned max_extents) {
        unsigned next = 0;
        uint64_t remaining = n;

        if (n == 0 || max_extents == 0 || owner == ARENA_OWNER_NONE || owner > ARENA_OWNER_MAX)
                return -EINVAL;

        pthread_mutex_lock(&a->lock);
        if (atomic_load_explicit(&a->nused, memory_order_relaxed) + n > a->npages) {
                pthread_mutex_unlock(&a->lock);
                return -ENOSPC;
        }

        /* Lowest free pages first: skip full regions through full[]. */
        for (uint64_t fw = a->hint; fw < a->nfull_words && remaining > 0; fw++) {
                uint64_t room = ~a->full[fw];

                if (room == 0) {
                        if (fw == a->hint)
                                a->hint = fw + 1;
                        continue;
                }
                while (room != 0 && remaining > 0) {
                        uint64_t w = fw * BITS_PER_WORD + (unsigned) __builtin_ctzll(room);
                        uint64_t free_bits = ~a->used[w];

                        room &= room - 1;
                        while (free_bits != 0 && remaining > 0) {
                                unsigned bit = (unsigned) __builtin_ctzll(free_bits);
                                uint64_t shifted = ~(free_bits >> bit);
                                unsigned run = shifted == 0 ? BITS_PER_WORD - bit : (unsigned) __builtin_ctzll(shifted);
                                uint64_t start = w * BITS_PER_WORD + bit;
                                unsigned k = (unsigned) MB_MIN((uint64_t) run, remaining);

                                if (next > 0 && ret_extents[next - 1].start + ret_extents[next - 1].count == start) {
                                        ret_extents[next - 1].count += k;
                                } else {
                                        if (next + 1 == max_extents && k < remaining)
                                                goto fragmented;
                                        ret_extents[next].start = start;
                                        ret_extents[next].count = k;
                                        next++;
                                }
                                mark_used_locked(a, start, k);
                                remaining -= k;
                                free_bits = ~a->used[w];
                        }
                }
        }
        goto done;

fragmented: {
        /* The last extent must hold all that is left: the lowest free run
         * long enough (the pages taken so far are already marked used). */
        uint64_t start = find_free_run_locked(a, remaining);

        if (start == UINT64_MAX) {
                for (unsigned i = 0; i < next; i++)
                        mark_free_locked(a, ret_extents[i].start, ret_extents[i].count);
                pthread_mutex_unlock(&a->lock);
                return -ENOSPC;
        }
        ret_extents[next].start = start;
        ret_extents[next].count = (uint32_t) remaining;
        next++;
        mark_used_locked(a, start, remaining);
        remaining = 0;
}

done:
        if (remaining > 0) {
                /* Cannot happen while nused is exact; undo and fail safely. */
                for (unsigned i = 0; i < next; i++)
                        mark_free_locked(a, ret_extents[i].start, ret_extents[i].count);
                pthread_mutex_unlock(&a->lock);
                return -ENOSPC;
        }
        for (unsigned i = 0; i < next; i++) {
                uint64_t end = ret_extents[i].start + ret_extents[i].count;
                if (end > a->top)
                        a->top = end;
        }
        atomic_fetch_add_explicit(&a->nused, n, memory_order_relaxed);
        pthread_mutex_unlock(&a->lock);

        /* The pages are marked used: nobody else touches their owner slots. */
        for (unsigned i = 0; i < next; i++)
                for (uint64_t p = ret_extents[i].start; p < ret_extents[i].start + ret_extents[i].count; p++)
                        owner_store(a, p, owner);
        return (int) next;
}

static bool extent_in_range(const struct arena *a, const struct arena_extent *e) {
        return e->start < a->npages && e->count <= a->npages - e->start;
}

bool arena_check_owned(struct arena *a, uint32_t owner, const struct arena_extent *extents, size_t n,
                       uint64_t *ret_bad_page) {
        uint64_t bad = 0;
        bool ok = true;
        size_t i;

        /* Mark each page as seen so that a page named twice is caught; only
         * this owner's thread writes its pages' slots, so this is safe. */
        for (i = 0; i < n && ok; i++) {
                if (!extent_in_range(a, &extents[i])) {
                        /* The first page of the extent outside the arena. */
                        bad = extents[i].start < a->npages ? a->npages : extents[i].start;
                        ok = false;
                        break;
                }
                for (uint64_t p = extents[i].start; p < extents[i].start + extents[i].count; p++) {
                        if (owner_load(a, p) != owner) {
                                bad = p;
                                ok = false;
                                break;
                        }
                        owner_store(a, p, ARENA_OWNER_MARK);
                }
        }

        /* Undo the marks (in every extent the check looked at). */
        for (size_t j = 0; j < n && j <= i; j++) {
                if (!extent_in_range(a, &extents[j]))
                        break;
                for (uint64_t q = extents[j].start; q < extents[j].start + extents[j].count; q++)
                        if (owner_load(a, q) == ARENA_OWNER_MARK)
                                owner_store(a, q, owner);
        }

        if (!ok && ret_bad_page)
                *ret_bad_page = bad;
        return ok;
}

/* Hole-punch [start, start+count): the contents are destroyed and the memory
 * returned to the system; the arena keeps its size. */
static void punch(struct arena *a, uint64_t start, uint64_t count) {
        (void) fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t) (start * a->page_size),
                         (off_t) (count * a->page_size));
}

static int arena_fit(struct arena *a, bool grant);

static void release_run(struct arena *a, uint64_t start, uint64_t count) {
        punch(a, start, count);
        for (uint64_t p = start; p < start + count; p++)
                owner_store(a, p, ARENA_OWNER_NONE);

        pthread_mutex_lock(&a->lock);
        mark_free_locked(a, start, count);
        atomic_fetch_sub_explicit(&a->nused, count, memory_order_relaxed);
        pthread_mutex_unlock(&a->lock);
}

/* Call @fn once per run of adjacent extents of @extents (coalesced: one
 * punch for neighbours); returns the pages of all runs. */
static uint64_t for_each_run(struct arena *a, const struct arena_extent *extents, size_t n,
                             void (*fn)(struct arena *a, uint64_t start, uint64_t count)) {
        uint64_t total = 0, run_start = 0, run_len = 0;

        for (size_t i = 0; i < n; i++) {
                if (extents[i].count == 0)
                        continue;
                if (run_len > 0 && run_start + run_len == extents[i].start) {
                        run_len += extents[i].count;
                        continue;
                }
                if (run_len > 0)
                        fn(a, run_start, run_len);
                total += run_len;
                run_start = extents[i].start;
                run_len = extents[i].count;
        }
        if (run_len > 0)
                fn(a, run_start, run_len);
        return total + run_len;
}

uint64_t arena_release(struct arena *a, uint32_t owner, const struct arena_extent *extents, size_t n) {
        uint64_t released;

        (void) owner;
        released = for_each_run(a, extents, n, release_run);
        (void) arena_fit(a, false);
        return released;
}

int arena_release_begin(struct arena *a, const struct arena_extent *extents, size_t n, uint64_t *ret_released) {
        uint64_t released = 0, pending;

        for (size_t i = 0; i < n; i++)
                released += extents[i].count;
        /* At most one slack of pages waits for its punch: they are backed
         * but no longer in nused, and arena_fit() keeps the instance at
         * nused + slack at least, room for them without growing for them. */
        pending = atomic_load_explicit(&a->npending, memory_order_relaxed);
        do {
                if (pending + released > a->slack_pages)
                        return -ENOSPC;
        } while (!atomic_compare_exchange_weak_explicit(&a->npending, &pending, pending + released,
                                                        memory_order_relaxed, memory_order_relaxed));

        /* Only this owner's thread writes its pages' slots: no lock. */
        for (size_t i = 0; i < n; i++)
                for (uint64_t p = extents[i].start; p < extents[i].start + extents[i].count; p++)
                        owner_store(a, p, ARENA_OWNER_PENDING);
        /* Counted as pending before nused drops: the audit never sees the
         * pages in neither. */
        atomic_fetch_sub_explicit(&a->nused, released, memory_order_relaxed);
        *ret_released = released;
        return 0;
}

static void finish_run(struct arena *a, uint64_t start, uint64_t count) {
        punch(a, start, count);
        for (uint64_t p = start; p < start + count; p++)
                owner_store(a, p, ARENA_OWNER_NONE);

        pthread_mutex_lock(&a->lock);
        mark_free_locked(a, start, count);
        pthread_mutex_unlock(&a->lock);
        atomic_fetch_sub_explicit(&a->npending, count, memory_order_relaxed);
}

void arena_release_finish(struct arena *a, const struct arena_extent *extents, size_t n) {
        (void) for_each_run(a, extents, n, finish_run);
        (void) arena_fit(a, false);
}

uint64_t arena_release_owner(struct arena *a, uint32_t owner, uint64_t held) {
        uint64_t released = 0, top;

        if (held == 0)
                return 0;

        pthread_mutex_lock(&a->lock);
        top = a->top;
        pthread_mutex_unlock(&a->lock);

        for (uint64_t p = 0; p < top && released < held;) {
                uint64_t q;

                if (owner_load(a, p) != owner) {
                        p++;
                        continue;
                }
                for (q = p + 1; q < top && owner_load(a, q) == owner; q++)
                        ;
                release_run(a, p, q - p);
                released += q - p;
                p = q;
        }
        (void) arena_fit(a, false);
        return released;
}

uint64_t arena_used(const struct arena *a) {
        return atomic_load_explicit(&((struct arena *) a)->nused, memory_order_relaxed);
}

int arena_backed_bytes(const struct arena *a, uint64_t *ret) {
        struct stat st;

        if (fstat(a->fd, &st) < 0)
                return -errno;
        *ret = (uint64_t) st.st_blocks * 512;
        return 0;
}

/* ---- the bound on the backing ---- */

/*
 * Resize the tmpfs instance to what is charged: below nused + slack it grows
 * to nused + 2 x slack; above nused + 2 x slack it shrinks to nused + slack
 * (hysteresis: most grants and releases resize nothing).  A shrink the
 * kernel refuses (a client backed pages beyond what is charged) is left to
 * the audit.  Returns 0 or the negative errno of a failed grow.
 *
 * A grant (@grant) always decides under size_lock, after its pages were
 * counted in nused: a shrink either saw them or is seen by it.  A release
 * first looks without the lock: a shrink it misses is only late (the audit
 * fits every arena too).
 */
static int arena_fit(struct arena *a, bool grant) {
        uint64_t nused, want;
        int r = 0;

        if (a->pick_fd < 0)
                return 0;
        /* Pages whose punch is pending (arena_release_begin()) are not
         * counted: at most one slack of them, the room this leaves above
         * nused holds them, and the bound stays nused + 2 x slack. */
        if (!grant && atomic_load_explicit(&a->size_pages, memory_order_relaxed) <=
                              atomic_load_explicit(&a->nused, memory_order_relaxed) + 2 * a->slack_pages)
                return 0;
        pthread_mutex_lock(&a->size_lock);
        nused = atomic_load_explicit(&a->nused, memory_order_relaxed);
        want = a->size_pages;
        if (a->size_pages < nused + a->slack_pages)
                want = nused + 2 * a->slack_pages;
        else if (a->size_pages > nused + 2 * a->slack_pages)
                want = nused + a->slack_pages;
        want = MB_MAX(want, (uint64_t) 1); /* tmpfs size=0 means unlimited */
        if (want < a->size_pages) {
                struct stat st;

                /* The kernel would refuse (shmem_reconfigure()): leave that
                 * to the audit rather than fail a reconfiguration. */
                if (fstat(a->fd, &st) < 0 || (uint64_t) st.st_blocks * 512 > want * a->page_size)
                        want = a->size_pages;
        }
        if (want != a->size_pages) {
                r = arena_tmpfs_resize(a->pick_fd, want * a->page_size);
                if (r < 0) {
                        /* A failed reconfiguration leaves the fs_context
                         * failed (-EBUSY ever after): pick the instance
                         * again, and try once more. */
                        int pick;

                        if (arena_tmpfs_pick(a->root_fd, &pick) >= 0) {
                                close(a->pick_fd);
                                a->pick_fd = pick;
                                r = arena_tmpfs_resize(a->pick_fd, want * a->page_size);
                        }
                }
                if (r >= 0)
                        a->size_pages = want;
                else if (want < a->size_pages)
                        r = 0;
        }
        pthread_mutex_unlock(&a->size_lock);
        return r;
}

/* Pages of [first, last) backed by memory (SEEK_DATA/SEEK_HOLE). */
static uint64_t backed_pages_in(struct arena *a, uint64_t first, uint64_t last) {
        off_t end = (off_t) (last * a->page_size), pos = (off_t) (first * a->page_size);
        uint64_t n = 0;

        while (pos < end) {
                off_t data = lseek(a->fd, pos, SEEK_DATA), hole;

                if (data < 0 || data >= end)
                        break;
                hole = lseek(a->fd, data, SEEK_HOLE);
                if (hole < 0 || hole > end)
                        hole = end;
                n += DIV_ROUND_UP((uint64_t) hole, a->page_size) - (uint64_t) data / a->page_size;
                pos = (off_t) (DIV_ROUND_UP((uint64_t) hole, a->page_size) * a->page_size);
        }
        return n;
}

int arena_grant_prepare(struct arena *a, const struct arena_extent *extents, size_t n) {
        uint64_t dirty = 0;

        if (a->hugetlb)
                return arena_hugetlb_grant_prepare(a, extents, n);

        /* Pages handed out are zero: a page a client wrote into while it
         * was free still holds that data (the punch at release came first). */
        for (size_t i = 0; i < n; i++) {
                off_t start = (off_t) (extents[i].start * a->page_size);
                off_t data = lseek(a->fd, start, SEEK_DATA);
                uint64_t k;

                if (data < 0 || (uint64_t) data >= (extents[i].start + extents[i].count) * a->page_size)
                        continue;
                k = backed_pages_in(a, extents[i].start, extents[i].start + extents[i].count);
                punch(a, extents[i].start, extents[i].count);
                dirty += MB_MAX(k, (uint64_t) 1);
        }
        if (dirty > 0)
                atomic_fetch_add_explicit(&a->dirty_at_grant, dirty, memory_order_relaxed);
        return arena_fit(a, true);
}

static inline bool page_used_locked(const struct arena *a, uint64_t p) {
        return a->used[p / BITS_PER_WORD] & (UINT64_C(1) << (p % BITS_PER_WORD));
}

/* Punch the backed free pages of [first, last); returns how many.  Lock
 * held: a free page cannot be handed out meanwhile, and a released page was
 * punched before it became free, so what is backed here nobody holds. */
static uint64_t punch_unheld_locked(struct arena *a, uint64_t first, uint64_t last) {
        uint64_t p = first, n = 0;

        while (p < last) {
                uint64_t q, k;

                if (page_used_locked(a, p)) {
                        p++;
                        continue;
                }
                for (q = p + 1; q < last && !page_used_locked(a, q); q++)
                        ;
                /* hugetlbfs has no SEEK_DATA: every free run is punched,
                 * and the caller counts what that freed. */
                k = a->hugetlb ? 0 : backed_pages_in(a, p, q);
                if (k > 0 || a->hugetlb) {
                        punch(a, p, q - p);
                        n += k;
                }
                p = q;
        }
        return n;
}

int arena_audit(struct arena *a, struct arena_audit *ret) {
        uint64_t size_bytes = a->npages * a->page_size, nused, tmpfs_bytes = 0;
        off_t end = (off_t) size_bytes, pos = 0;
        struct stat st;

        *ret = (struct arena_audit) {
                .overrun_pages = atomic_exchange_explicit(&a->dirty_at_grant, 0, memory_order_relaxed),
        };
        if (fstat(a->fd, &st) < 0)
                return -errno;
        nused = arena_used(a) + atomic_load_explicit(&a->npending, memory_order_relaxed);
        if (a->pick_fd >= 0)
                tmpfs_bytes = atomic_load(&a->size_pages) * a->page_size;
        ret->found_bytes = ret->backed_bytes = (uint64_t) st.st_blocks * 512;
        if (ret->backed_bytes <= nused * a->page_size && (uint64_t) st.st_size == size_bytes &&
            (tmpfs_bytes == 0 || ret->backed_bytes < tmpfs_bytes)) {
                (void) arena_fit(a, false); /* a shrink a release left late */
                return 0;
        }

        /* A tmpfs file is not sealed: a client may have resized it. */
        if ((uint64_t) st.st_size != size_bytes) {
                (void) ftruncate(a->fd, (off_t) size_bytes);
                ret->size_restored = true;
        }

        while (pos < end) {
                off_t data = lseek(a->fd, pos, SEEK_DATA), hole;
                uint64_t first, last;

                if (data < 0 || data >= end)
                        break;
                hole = lseek(a->fd, data, SEEK_HOLE);
                if (hole < 0 || hole > end)
                        hole = end;
                first = (uint64_t) data / a->page_size;
                last = DIV_ROUND_UP((uint64_t) hole, a->page_size);
                /* One backed run at a time: allocation waits for one run. */
                pthread_mutex_lock(&a->lock);
                ret->overrun_pages += punch_unheld_locked(a, first, last);
                pthread_mutex_unlock(&a->lock);
                pos = (off_t) (last * a->page_size);
        }
        (void) arena_fit(a, false);
        if (fstat(a->fd, &st) == 0)
                ret->backed_bytes = (uint64_t) st.st_blocks * 512;
        /* hugetlb: the backing found beyond what is held, in pages. */
        if (a->hugetlb && ret->found_bytes > nused * a->page_size)
                ret->overrun_pages += DIV_ROUND_UP(ret->found_bytes - nused * a->page_size, a->page_size);
        return 0;
}

/* ---- restart (restart.h) ---- */

/* Punch the free pages in [start, end) (page indices).  Single-threaded. */
static void punch_free_in(struct arena *a, uint64_t start, uint64_t end) {
        uint64_t p = start;

        while (p < end) {
                uint64_t q;

                if (a->used[p / BITS_PER_WORD] & (UINT64_C(1) << (p % BITS_PER_WORD))) {
                        p++;
                        continue;
                }
                for (q = p + 1; q < end && !(a->used[q / BITS_PER_WORD] & (UINT64_C(1) << (q % BITS_PER_WORD))); q++)
                        ;
                punch(a, p, q - p);
                p = q;
        }
}

int arena_restore(int fd, int root_fd, uint64_t page_size, uint64_t slack_pages, int owner_fd, uint64_t owner_offset,
                  const char *name, struct arena **ret) {
        _cleanup_(freep) uint8_t *seen = NULL;
        struct arena *a;
        struct stat st;
        uint32_t max_owner = 0;
        off_t pos;
        int r;

        (void) name;
        if (owner_fd < 0 || page_size == 0)
                return -EBADF;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size <= 0 || (uint64_t) st.st_size % page_size != 0)
                return -EINVAL;
        r = arena_alloc_meta((uint64_t) st.st_size / page_size, page_size, owner_fd, owner_offset, &a);
        if (r < 0)
                return r;

        /* owner[] is the truth (used[] was private to the previous daemon):
         * read only its backed parts, holes are all ARENA_OWNER_NONE. */
        pos = (off_t) owner_offset;
        for (;;) {
                off_t data = lseek(owner_fd, pos, SEEK_DATA), hole;
                uint64_t first, last;

                if (data < 0)
                        break; /* ENXIO: no more data */
                hole = lseek(owner_fd, data, SEEK_HOLE);
                if (hole < 0)
                        hole = (off_t) (owner_offset + a->npages * sizeof(uint32_t));
                first = ((uint64_t) data - owner_offset) / sizeof(uint32_t);
                last = MB_MIN(DIV_ROUND_UP((uint64_t) hole - owner_offset, sizeof(uint32_t)), a->npages);
                for (uint64_t p = first; p < last; p++) {
                        uint32_t o = owner_load(a, p);

                        if (o == ARENA_OWNER_NONE)
                                continue;
                        if (o > ARENA_OWNER_MAX) {
                                /* Being checked or returned when the daemon
                                 * died: the client gave it up. */
                                owner_store(a, p, ARENA_OWNER_NONE);
                                continue;
                        }
                        a->used[p / BITS_PER_WORD] |= UINT64_C(1) << (p % BITS_PER_WORD);
                        a->nused++;
                        a->top = p + 1;
                        max_owner = MB_MAX(max_owner, o);
                }
                if ((uint64_t) hole >= owner_offset + a->npages * sizeof(uint32_t))
                        break;
                pos = hole;
        }
        for (uint64_t w = 0; w < a->nwords; w++)
                if (a->used[w] == ~UINT64_C(0))
                        a->full[w / BITS_PER_WORD] |= UINT64_C(1) << (w % BITS_PER_WORD);

        /* Ids in use: those holding pages; the others are free again. */
        a->next_owner = max_owner + 1;
        if (max_owner > 0) {
                seen = calloc((size_t) max_owner + 1, 1);
                if (!seen) {
                        arena_free(a);
                        return -ENOMEM;
                }
                for (uint64_t p = 0; p < a->top; p++)
                        if (a->used[p / BITS_PER_WORD] & (UINT64_C(1) << (p % BITS_PER_WORD)))
                                seen[owner_load(a, p)] = 1;
                for (uint32_t o = max_owner; o >= 1; o--)
                        if (!seen[o])
                                arena_owner_free(a, o);
        }

        /* Memory nobody holds goes back: walk the backed parts of the arena.
         * From here on nothing fails: the arena owns @fd and @root_fd. */
        a->fd = fd;
        a->hugetlb = arena_fd_is_hugetlb(fd);
        if (root_fd >= 0) {
                struct statfs sf;

                a->tmpfs = true;
                a->root_fd = root_fd;
                a->slack_pages = slack_pages;
                if (fstatfs(fd, &sf) == 0 && arena_tmpfs_pick(root_fd, &a->pick_fd) >= 0)
                        a->size_pages = (uint64_t) sf.f_blocks * (uint64_t) sf.f_bsize / page_size;
        } else {
                /* A tmpfs file whose instance's root was lost: not resizable,
                 * only the audit bounds it. */
                int seals = fcntl(fd, F_GET_SEALS);

                a->tmpfs = seals >= 0 && !(seals & F_SEAL_GROW);
        }
        pos = 0;
        for (;;) {
                off_t data = lseek(fd, pos, SEEK_DATA), hole;
                uint64_t first, last;

                if (data < 0)
                        break;
                hole = lseek(fd, data, SEEK_HOLE);
                if (hole < 0)
                        hole = st.st_size;
                first = (uint64_t) data / page_size;
                last = MB_MIN(DIV_ROUND_UP((uint64_t) hole, page_size), a->npages);
                punch_free_in(a, first, last);
                if (hole >= st.st_size)
                        break;
                pos = hole;
        }
        (void) arena_fit(a, false);

        *ret = a;
        return 0;
}

int arena_transfer(struct arena *a, const uint32_t *from, size_t nfrom, uint32_t to,
                   const struct arena_extent *extents, size_t n, uint64_t *ret_moved, uint64_t *ret_bad_page) {
        uint64_t prev_end = 0;

        if (to == ARENA_OWNER_NONE || to > ARENA_OWNER_MAX)
                return -EINVAL;
        for (size_t j = 0; j < nfrom; j++)
                ret_moved[j] = 0;

        /* Check everything first. */
        for (size_t i = 0; i < n; i++) {
                if (!extent_in_range(a, &extents[i]) || (i > 0 && extents[i].start < prev_end)) {
                        *ret_bad_page = extents[i].start;
                        return -EINVAL;
                }
                prev_end = extents[i].start + extents[i].count;
                for (uint64_t p = extents[i].start; p < prev_end; p++) {
                        uint32_t o = owner_load(a, p);
                        bool ok = false;

                        for (size_t j = 0; j < nfrom && !ok; j++)
                                ok = o == from[j];
                        if (!ok) {
                                *ret_bad_page = p;
                                return -EINVAL;
                        }
                }
        }
        for (size_t i = 0; i < n; i++)
                for (uint64_t p = extents[i].start; p < extents[i].start + extents[i].count; p++) {
                        uint32_t o = owner_load(a, p);

                        for (size_t j = 0; j < nfrom; j++)
                                if (o == from[j]) {
                                        ret_moved[j]++;
                                        break;
                                }
                        owner_store(a, p, to);
                }
        return 0;
}
