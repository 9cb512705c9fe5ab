/* SPDX-License-Identifier: MIT */
/*
 * preload.c - libmembroker-preload.so: malloc() and friends of an unmodified
 * program served from its tenant (membroker-run(1) sets it up).
 *
 * At load (a constructor) the shim connects to $MEMBROKER_SOCKET as
 * $MEMBROKER_TENANT; from then on malloc, free, calloc, realloc,
 * reallocarray, posix_memalign, aligned_alloc, memalign, valloc, pvalloc and
 * malloc_usable_size go to mb_malloc() and friends.  glibc's allocator
 * (__libc_malloc and its siblings, which never call back into us) serves:
 *   - everything before the connection is up and when it cannot be made,
 *   - the library itself: calls made while the shim is inside libmembroker
 *     (a thread-local depth) and the library's own thread,
 *   - alignments above a page,
 *   - after the session is lost (the daemon ended it, or did not come back
 *     within MEMBROKER_RECONNECT_TIMEOUT_SEC): what the per-CPU lists and
 *     stocks still hold is served first, then glibc,
 *   - in a fork() child (below).
 * free() tells the two apart by address: inside the arena mapping it is
 * the broker's, anything else is glibc's (__libc_free).  A tenant at its
 * limit makes malloc() return NULL with errno ENOMEM (no fallback: that is
 * the limit working).
 *
 * No library thread by default (MB_CONNECT_NO_THREAD; $MEMBROKER_PRELOAD_THREAD=1
 * starts it): a second thread would cost a single-threaded program glibc's
 * single-thread fast paths.  The daemon's Reclaim and Drain are then
 * answered whenever an allocation or free talks to the daemon (and by the
 * thread that waits for a charge at the limit).
 *
 * fork(): the arena is a shared mapping, so a child writing the heap it
 * inherited would write the parent's memory.  In the child (pthread_atfork)
 * the shim copies every page the client holds into private anonymous
 * memory and moves that over the arena mapping (mremap), so the child gets
 * a private copy of its heap, as fork() promises, while the parent waits
 * (it blocks in its own after-fork handler until the child has copied; only
 * the parent's other threads may write meanwhile, as they could before any
 * fork).  The child then allocates from glibc and ignores free() of the
 * inherited broker blocks (they are its private copy); a child that execs
 * loads the shim again and connects a session of its own.
 *
 * The program's own private anonymous mappings (mmap() and its siblings)
 * are charged in mmap.c; what the tenant refused is said in report.c.
 */
#include <errno.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/client.h"
#include "malloc/kmalloc.h"
#include "preload/preload.h"
#include "preload/tcache.h"
#include "session/session.h"
#include "membroker.h"

#define PRELOAD_TENANT_ENV "MEMBROKER_TENANT"
#define PRELOAD_DEBUG_ENV "MEMBROKER_PRELOAD_DEBUG"
#define PRELOAD_THREAD_ENV "MEMBROKER_PRELOAD_THREAD"

/*
 * The entry points.  Their C names are shim_*, their symbols the C
 * library's (__asm__ labels): what the program and every other library
 * call by those names lands here, while the library's own modules, which
 * call malloc() as any C code does, depend on the C library's interface,
 * not on this file.
 */
EXPORT void *shim_malloc(size_t size) __asm__("malloc");
EXPORT void shim_free(void *p) __asm__("free");
EXPORT void *shim_calloc(size_t nmemb, size_t size) __asm__("calloc");
EXPORT void *shim_realloc(void *p, size_t size) __asm__("realloc");
EXPORT void *shim_reallocarray(void *p, size_t nmemb, size_t size) __asm__("reallocarray");
EXPORT int shim_posix_memalign(void **ret, size_t align, size_t size) __asm__("posix_memalign");
EXPORT void *shim_aligned_alloc(size_t align, size_t size) __asm__("aligned_alloc");
EXPORT void *shim_memalign(size_t align, size_t size) __asm__("memalign");
EXPORT void *shim_valloc(size_t size) __asm__("valloc");
EXPORT void *shim_pvalloc(size_t size) __asm__("pvalloc");
EXPORT size_t shim_malloc_usable_size(void *p) __asm__("malloc_usable_size");

/* glibc's own allocator. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

mb_client *shim_client;
/* mb_malloc()'s caches once they exist and while the shim may use them
 * (cleared for good when the session is lost or in a fork() child): the
 * fast paths below need nothing else. */
static struct kmalloc_ctx *shim_km;
static uintptr_t shim_base, shim_bytes;  /* the arena mapping */
static size_t shim_page_size = 4096;
bool shim_forked;
bool shim_lost;
static int shim_fork_pipe[2] = { -1, -1 };
static size_t (*glibc_usable_size)(void *);

static inline bool shim_ours(const void *p) {
        return (uintptr_t) p - shim_base < shim_bytes;
}

/* After a failure other than ENOMEM: is the session over? */
void shim_check_lost(void) {
        if (session_broken(shim_client) || shim_client->forked) {
                shim_lost = true;
                __atomic_store_n(&shim_km, NULL, __ATOMIC_RELAXED);
        }
}

/* Return what the allocation @call (an mb_* function) gave, with the
 * shim's depth raised around it, when it succeeded or the tenant refused
 * it (ENOMEM, errno kept, the refusal of @bytes reported); otherwise see
 * whether the session is over and fall through to glibc. */
#define SHIM_TRY(call, bytes)                                   \
        do {                                                    \
                void *p_;                                       \
                int e_;                                         \
                                                                \
                shim_depth++;                                   \
                p_ = (call);                                    \
                e_ = errno;                                     \
                shim_depth--;                                   \
                if (_likely_(p_ != NULL) || e_ == ENOMEM) {     \
                        if (!p_)                                \
                                shim_report_refused("malloc", (bytes)); \
                        errno = e_;                             \
                        return p_;                              \
                }                                               \
                shim_check_lost();                              \
        } while (0)

/* The caches for a fast path of this call, or NULL (see shim_active()). */
static inline struct kmalloc_ctx *shim_fast_km(void) {
        struct kmalloc_ctx *k = __atomic_load_n(&shim_km, __ATOMIC_RELAXED);

        return _likely_(k && !shim_depth && !mb_library_thread) ? k : NULL;
}

static __attribute__((noinline)) void *shim_alloc(size_t size) {
        struct kmalloc_ctx *k = __atomic_load_n(&shim_km, __ATOMIC_RELAXED);
        void *p;
        int e;

        if (_unlikely_(!k) && !shim_lost && !shim_forked) {
                k = __atomic_load_n(&shim_client->kmalloc, __ATOMIC_ACQUIRE);
                if (k) {
                        shim_tc_enable(k);
                        __atomic_store_n(&shim_km, k, __ATOMIC_RELAXED);
                }
        }
        shim_depth++;
        p = mb_malloc(shim_client, size);
        e = errno;
        shim_depth--;
        /* At a limit: this thread's own cached blocks go back first (the
         * daemon's reclaim cannot reach them), then mb_malloc() shrinks. */
        if (!p && e == ENOMEM && k && shim_tc_flush_all(k) > 0) {
                shim_depth++;
                p = mb_malloc(shim_client, size);
                e = errno;
                shim_depth--;
        }
        if (_likely_(p != NULL) || e == ENOMEM) {
                if (!p)
                        shim_report_refused("malloc", size);
                errno = e;
                return p;
        }
        shim_check_lost();
        return __libc_malloc(size);
}

void *shim_malloc(size_t size) {
        struct kmalloc_ctx *k = shim_fast_km();

        if (_likely_(k)) {
                void *p;

                if (_likely_(size <= KM_FAST_MAX)) {
                        unsigned ci = k->small_class[(size + KM_MIN_BYTES - 1) / KM_MIN_BYTES];

                        p = shim_tc_pop(ci);
                        if (_likely_(p) || _likely_(slab_cache_alloc_fast(k->cache[ci], &p) == SLAB_RSEQ_DONE))
                                return p;
                }
        }
        if (_likely_(shim_active()))
                return shim_alloc(size);
        return __libc_malloc(size);
}

static void shim_free_slow(void *p);

void shim_free(void *p) {
        struct kmalloc_ctx *k = shim_fast_km();

        if (_likely_(k)) {
                uintptr_t off = (uintptr_t) p - (uintptr_t) k->base;

                if (_likely_(off < (uintptr_t) k->npages << k->page_shift)) {
                        uint32_t ci = k->tags[off >> k->page_shift] - 1;

                        if (_likely_(ci < k->nclasses)) {
                                if (_likely_(shim_tc_push(ci, p)) || shim_tc_pass(k, ci, p))
                                        return;
                                shim_tc_overflow(k, ci, p);
                                return;
                        }
                }
        }
        shim_free_slow(p);
}

/* free() of anything but a block of a class on the fast path: out of line,
 * so that the fast path saves no registers. */
static __attribute__((noinline)) void shim_free_slow(void *p) {
        if (!p)
                return;
        if (shim_ours(p)) {
                /* A forked child's copy is private: nothing to give back. */
                if (!shim_forked) {
                        int e = errno;

                        shim_depth++;
                        mb_free(shim_client, p);
                        shim_depth--;
                        errno = e;
                }
                return;
        }
        __libc_free(p);
}

void *shim_calloc(size_t nmemb, size_t size) {
        if (_likely_(shim_active()))
                SHIM_TRY(mb_calloc(shim_client, nmemb, size), nmemb * size);
        return __libc_calloc(nmemb, size);
}

static size_t shim_usable(const void *p) {
        size_t n;

        shim_depth++;
        n = mb_malloc_usable_size(shim_client, p);
        shim_depth--;
        return n;
}

void *shim_realloc(void *p, size_t size) {
        void *n;
        size_t old;

        if (!p)
                return malloc(size);
        if (!shim_ours(p))
                return __libc_realloc(p, size);
        if (size == 0) {
                free(p);
                return NULL;
        }
        if (shim_active())
                SHIM_TRY(mb_realloc(shim_client, p, size), size);
        /* A broker block where the broker cannot serve: move it to glibc. */
        old = shim_usable(p);
        n = __libc_malloc(size);
        if (!n)
                return NULL;
        memcpy(n, p, old < size ? old : size);
        free(p);
        return n;
}

void *shim_reallocarray(void *p, size_t nmemb, size_t size) {
        size_t bytes;

        if (__builtin_mul_overflow(nmemb, size, &bytes)) {
                errno = ENOMEM;
                return NULL;
        }
        return realloc(p, bytes);
}

static void *shim_aligned(size_t align, size_t size) {
        if (shim_active() && align <= shim_page_size)
                SHIM_TRY(mb_aligned_alloc(shim_client, align, size), size);
        return __libc_memalign(align, size);
}

int shim_posix_memalign(void **ret, size_t align, size_t size) {
        void *p;

        if (align < sizeof(void *) || (align & (align - 1)))
                return EINVAL;
        p = shim_aligned(align, size);
        if (!p)
                return ENOMEM;
        *ret = p;
        return 0;
}

void *shim_aligned_alloc(size_t align, size_t size) {
        if (align == 0 || (align & (align - 1))) {
                errno = EINVAL;
                return NULL;
        }
        return shim_aligned(align, size);
}

void *shim_memalign(size_t align, size_t size) {
        if (align == 0 || (align & (align - 1))) {
                errno = EINVAL;
                return NULL;
        }
        return shim_aligned(align, size);
}

void *shim_valloc(size_t size) {
        return shim_aligned(shim_page_size, size);
}

void *shim_pvalloc(size_t size) {
        size_t ps = shim_page_size;

        if (size > SIZE_MAX - ps) {
                errno = ENOMEM;
                return NULL;
        }
        return shim_aligned(ps, size == 0 ? ps : (size + ps - 1) & ~(ps - 1));
}

size_t shim_malloc_usable_size(void *p) {
        if (!p)
                return 0;
        if (shim_ours(p))
                return shim_usable(p);
        return glibc_usable_size ? glibc_usable_size(p) : 0;
}

/* ---- fork() ---- */

static void shim_atfork_prepare(void) {
        if (!shim_client || shim_forked || pipe2(shim_fork_pipe, O_CLOEXEC) < 0)
                shim_fork_pipe[0] = shim_fork_pipe[1] = -1;
}

/* Wait until the child has its private copy (or there is no child: the
 * write end is then closed everywhere and read() sees its end). */
static void shim_atfork_parent(void) {
        char b;

        if (shim_fork_pipe[0] < 0)
                return;
        close(shim_fork_pipe[1]);
        while (read(shim_fork_pipe[0], &b, 1) < 0 && errno == EINTR)
                ;
        close(shim_fork_pipe[0]);
        shim_fork_pipe[0] = shim_fork_pipe[1] = -1;
}

/* Copy [off, off + len) of the arena into @copy. */
static void shim_copy_run(uint8_t *copy, uint64_t first, uint64_t count) {
        size_t off = (size_t) first * shim_page_size, len = (size_t) count * shim_page_size;

        memcpy(copy + off, (const uint8_t *) shim_base + off, len);
}

static void shim_atfork_child(void) {
        mb_client *c = shim_client;
        uint8_t *copy;
        int e = errno;

        if (!c || shim_forked)
                return;
        shim_forked = true;
        __atomic_store_n(&shim_km, NULL, __ATOMIC_RELAXED);
        copy = mmap(NULL, shim_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (copy != MAP_FAILED) {
                if (c->restart.held.bits) {
                        uint64_t run = 0, start = 0, npages = c->restart.held.npages;

                        /* A word at a time: the bitmap covers the whole
                         * arena (a million bits for 4 GiB), the held pages
                         * are a few runs of it. */
                        for (uint64_t i = 0; i < npages; i += 64) {
                                uint64_t w = c->restart.held.bits[i / 64];
                                unsigned nbits = (unsigned) MB_MIN((uint64_t) 64, npages - i);

                                if (nbits < 64)
                                        w &= (UINT64_C(1) << nbits) - 1;
                                if (w == 0 && run == 0)
                                        continue;
                                if (w == UINT64_MAX && run > 0) {
                                        run += 64;
                                        continue;
                                }
                                for (unsigned b = 0; b < nbits; b++) {
                                        if ((w >> b) & 1) {
                                                if (run++ == 0)
                                                        start = i + b;
                                        } else if (run > 0) {
                                                shim_copy_run(copy, start, run);
                                                run = 0;
                                        }
                                }
                        }
                        if (run > 0)
                                shim_copy_run(copy, start, run);
                } else {
                        /* No held bitmap: the pages the file has in memory. */
                        size_t npages = shim_bytes / shim_page_size;
                        unsigned char *vec = __libc_malloc(npages);

                        if (vec && mincore((void *) shim_base, shim_bytes, vec) == 0)
                                for (size_t i = 0; i < npages; i++)
                                        if (vec[i] & 1)
                                                shim_copy_run(copy, i, 1);
                        __libc_free(vec);
                }
                if (mremap(copy, shim_bytes, shim_bytes, MREMAP_MAYMOVE | MREMAP_FIXED, (void *) shim_base) ==
                    MAP_FAILED)
                        munmap(copy, shim_bytes);
        }
        if (shim_fork_pipe[1] >= 0) {
                (void) !write(shim_fork_pipe[1], "x", 1);
                close(shim_fork_pipe[1]);
                close(shim_fork_pipe[0]);
                shim_fork_pipe[0] = shim_fork_pipe[1] = -1;
        }
        errno = e;
}

/* ---- setup ---- */

__attribute__((constructor)) static void shim_init(void) {
        const char *tenant = getenv(PRELOAD_TENANT_ENV), *e;
        mb_client *c = NULL;
        int r;

        shim_depth++;
        glibc_usable_size = (size_t (*)(void *)) dlsym(RTLD_NEXT, "malloc_usable_size");
        if (!tenant || !*tenant) {
                shim_depth--;
                return;
        }
        /* No library thread unless asked for: a second thread costs a
         * single-threaded program glibc's single-thread fast paths (every
         * pthread_mutex_lock() and stdio lock becomes an atomic), more
         * than the thread saves.  The daemon's Reclaim and Drain are then
         * answered by the allocations that talk to the daemon. */
        e = getenv(PRELOAD_THREAD_ENV);
        r = mb_connect_ex(NULL, tenant, e && strcmp(e, "1") == 0 ? 0 : MB_CONNECT_NO_THREAD, &c);
        if (r < 0) {
                fprintf(stderr, "libmembroker-preload: cannot attach to tenant %s (%s): %s; glibc serves malloc\n",
                        tenant, strerror(-r), mb_last_error());
                shim_depth--;
                return;
        }
        shim_page_size = mb_page_size(c);
        shim_base = (uintptr_t) c->base;
        shim_bytes = (uintptr_t) c->arena_bytes;
        (void) pthread_atfork(shim_atfork_prepare, shim_atfork_parent, shim_atfork_child);
        shim_report_init();
        shim_mmap_init(c);
        if (getenv(PRELOAD_DEBUG_ENV))
                fprintf(stderr, "libmembroker-preload: %s, pid %d attached to %s as client %llu\n",
                        program_invocation_short_name, (int) getpid(), mb_tenant_path(c),
                        (unsigned long long) mb_client_id(c));
        __atomic_store_n(&shim_client, c, __ATOMIC_RELEASE);
        shim_depth--;
}
