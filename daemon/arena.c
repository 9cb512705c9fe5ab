/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "macros.h"

#define ARENA_OWNER_MARK UINT32_MAX /* arena_check_owned(): page seen once */
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

int arena_new(const char *name, uint64_t npages, uint64_t page_size, struct arena **ret) {
        _cleanup_(closep) int fd = -1;
        char memfd_name[ARENA_NAME_MAX_BYTES];
        struct arena *a;
        size_t owner_bytes, used_bytes, full_bytes;
        uint64_t tail;
        int r;

        if (npages == 0 || page_size == 0 || npages > UINT64_MAX / page_size || npages > (uint64_t) SIZE_MAX / 8)
                return -EINVAL;

        snprintf(memfd_name, sizeof(memfd_name), "membroker-arena:%s", name);
        fd = memfd_create(memfd_name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t) (npages * page_size)) < 0)
                return -errno;
        /* Clients map the whole arena; they must not be able to resize it
         * (and nobody may add or remove seals afterwards). */
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
                return -errno;

        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->npages = npages;
        a->page_size = page_size;
        a->nwords = DIV_ROUND_UP(npages, BITS_PER_WORD);
        a->nfull_words = DIV_ROUND_UP(a->nwords, BITS_PER_WORD);
        a->next_owner = 1;

        owner_bytes = round_up8((size_t) npages * sizeof(uint32_t));
        used_bytes = (size_t) a->nwords * sizeof(uint64_t);
        full_bytes = (size_t) a->nfull_words * sizeof(uint64_t);
        a->meta_bytes = owner_bytes + used_bytes + full_bytes;
        /* Anonymous and NORESERVE: untouched parts stay unbacked zero pages,
         * so a large arena with few pages in use costs what it uses. */
        a->meta = mmap(NULL, a->meta_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (a->meta == MAP_FAILED) {
                r = -errno;
                free(a);
                return r;
        }
        a->owner = a->meta;
        a->used = (uint64_t *) ((char *) a->meta + owner_bytes);
        a->full = (uint64_t *) ((char *) a->meta + owner_bytes + used_bytes);

        /* Bits past the end are permanently "used" so they are never picked. */
        tail = npages % BITS_PER_WORD;
        if (tail != 0)
                a->used[a->nwords - 1] = ~((UINT64_C(1) << tail) - 1);
        tail = a->nwords % BITS_PER_WORD;
        if (tail != 0)
                a->full[a->nfull_words - 1] = ~((UINT64_C(1) << tail) - 1);

        r = pthread_mutex_init(&a->lock, NULL);
        if (r != 0) {
                munmap(a->meta, a->meta_bytes);
                free(a);
                return -r;
        }
        a->fd = TAKE_FD(fd);
        *ret = a;
        return 0;
}

void arena_free(struct arena *a) {
        if (!a)
                return;
        if (a->fd >= 0)
                close(a->fd);
        if (a->meta && a->meta != MAP_FAILED)
                munmap(a->meta, a->meta_bytes);
        pthread_mutex_destroy(&a->lock);
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

static void release_run(struct arena *a, uint64_t start, uint64_t count) {
        punch(a, start, count);
        for (uint64_t p = start; p < start + count; p++)
                owner_store(a, p, ARENA_OWNER_NONE);

        pthread_mutex_lock(&a->lock);
        mark_free_locked(a, start, count);
        atomic_fetch_sub_explicit(&a->nused, count, memory_order_relaxed);
        pthread_mutex_unlock(&a->lock);
}

uint64_t arena_release(struct arena *a, uint32_t owner, const struct arena_extent *extents, size_t n) {
        uint64_t released = 0, run_start = 0, run_len = 0;

        (void) owner;
        for (size_t i = 0; i < n; i++) {
                if (extents[i].count == 0)
                        continue;
                /* Coalesce adjacent extents into one punch. */
                if (run_len > 0 && run_start + run_len == extents[i].start) {
                        run_len += extents[i].count;
                        continue;
                }
                if (run_len > 0)
                        release_run(a, run_start, run_len);
                released += run_len;
                run_start = extents[i].start;
                run_len = extents[i].count;
        }
        if (run_len > 0)
                release_run(a, run_start, run_len);
        released += run_len;
        return released;
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
