/* SPDX-License-Identifier: MIT */
/*
 * mmap.c - the program's own private anonymous mappings, charged to its
 * tenant (membroker-run(1), docs/malloc.md).
 *
 * Runtimes that manage their own heap map it with mmap(): Python's pymalloc
 * arenas, GCC's garbage-collected pages, a JVM's or a GC's heap.  The
 * kernel's memory controller charges every anonymous page a task faults
 * (mem_cgroup_charge() from do_anonymous_page()); a preloaded library sees
 * no faults, so it charges what the kernel's commit accounting charges, at
 * mmap() time: a private writable mapping that is not MAP_NORESERVE or
 * hugetlb (accountable_mapping()), a private mapping made writable later by
 * mprotect() (mprotect_fixup()), the growth of such a mapping by mremap()
 * (vma_to_resize() and its vm_acct_memory()), uncharged when the mapping
 * goes (munmap(), a MAP_FIXED mapping over it, the old range of a moving
 * mremap()).  The pages are charged to the tenant as pages outside the
 * arena (Charge.flags OUTSIDE): they count in MemoryCurrent, MemoryPeak and
 * the stat key anon_mmap, against MemoryHigh= (throttled) and MemoryMax=
 * (after reclaim, mmap() fails with ENOMEM, or OOMPolicy=kill kills), as
 * under OVERCOMMIT_NEVER __vm_enough_memory() refuses the mapping.
 *
 * The shim keeps a table of the private anonymous mappings it saw (sorted,
 * split and merged as the kernel splits VMAs), each charged or not, under
 * one lock held across the system call so that an address the kernel
 * reuses is never mistaken for the old mapping.  The tenant is charged in
 * its own pages: ceil(bytes charged / page size) pages, adjusted after each
 * change (a mapping smaller than a broker page is rounded up once, not per
 * mapping).
 *
 * Not seen, so not charged: mappings glibc makes internally (thread stacks
 * of pthread_create(), glibc malloc's own arenas, which the shim replaces
 * anyway, the loader's), raw system calls (Go), brk(); not charged by
 * choice: shared and file mappings (shared memory is its creator's page
 * cache, and a file's pages the page cache's), MAP_NORESERVE (the program
 * asked for no commitment), read-only and PROT_NONE reservations until they
 * become writable.  MADV_DONTNEED and MADV_FREE keep the charge until the
 * mapping goes, as the commit charge does.  In a fork() child (which
 * allocates from glibc, preload.c) the mappings are not charged: the child
 * that execs connects a session of its own.  After a reconnection to a
 * restarted daemon, which never had these charges, the next charge asks
 * for all the mappings still there.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/client.h"
#include "preload/preload.h"
#include "session/session.h"
#include "mb_limits.h"

/* One mapping (or a part of one) the shim saw: [start, end), page aligned. */
struct shim_map {
        uintptr_t start, end;
        bool charged;   /* counted in mm_charged_bytes */
        bool noreserve; /* MAP_NORESERVE: never charged */
};

static pthread_mutex_t mm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shim_map *mm_maps; /* sorted by start, disjoint */
static size_t mm_nmaps, mm_alloc;
static uint64_t mm_charged_bytes;  /* bytes of the charged entries */
static uint64_t mm_charged_pages;  /* broker pages charged for them */
static uint64_t mm_gen;            /* the connection they were charged on (c->conn_gen) */
static size_t mm_sys_page = 4096;
static size_t mm_broker_page = 4096;
static bool mm_on;                 /* the daemon takes outside charges */

static inline uintptr_t mm_round(size_t len) {
        return ((uintptr_t) len + mm_sys_page - 1) & ~(uintptr_t) (mm_sys_page - 1);
}

/* The system calls themselves, past any interposer (this one included). */
static void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
        return (void *) syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static int sys_munmap(void *addr, size_t len) {
        return (int) syscall(SYS_munmap, addr, len);
}

static void *sys_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr) {
        return (void *) syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}

static int sys_mprotect(void *addr, size_t len, int prot) {
        return (int) syscall(SYS_mprotect, addr, len, prot);
}

void shim_mmap_init(mb_client *c) {
        const char *e = getenv("MEMBROKER_PRELOAD_MMAP");
        long ps = sysconf(_SC_PAGESIZE);

        if (ps > 0)
                mm_sys_page = (size_t) ps;
        mm_broker_page = mb_page_size(c);
        mm_gen = c->session.conn_gen;
        /* MEMBROKER_PRELOAD_MMAP=0: the program's own mappings are left
         * alone (for measurements and as a way out). */
        mm_on = c->session.outside_ok && !(e && strcmp(e, "0") == 0);
}

/* Whether this call's mappings are the tenant's. */
static inline bool mm_active(void) {
        return mm_on && shim_active();
}

/* ---- the table (mm_lock held) ---- */

/* Room for @more entries. */
static bool mm_reserve(size_t more) {
        size_t want = mm_nmaps + more, a, bytes;
        void *p;

        if (want <= mm_alloc)
                return true;
        a = mm_alloc ? mm_alloc * 2 : 256;
        while (a < want)
                a *= 2;
        bytes = mm_round(a * sizeof(*mm_maps));
        if (!mm_maps)
                p = sys_mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        else
                p = sys_mremap(mm_maps, mm_round(mm_alloc * sizeof(*mm_maps)), bytes, MREMAP_MAYMOVE, NULL);
        if (p == MAP_FAILED)
                return false;
        mm_maps = p;
        mm_alloc = bytes / sizeof(*mm_maps);
        return true;
}

/* The first entry that ends after @addr. */
static size_t mm_find(uintptr_t addr) {
        size_t lo = 0, hi = mm_nmaps;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (mm_maps[mid].end <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

/* No entry straddles @addr (one more entry at most: mm_reserve(1) first). */
static void mm_split(uintptr_t addr) {
        size_t i = mm_find(addr);

        if (i == mm_nmaps || mm_maps[i].start >= addr)
                return;
        memmove(&mm_maps[i + 1], &mm_maps[i], (mm_nmaps - i) * sizeof(*mm_maps));
        mm_nmaps++;
        mm_maps[i].end = addr;
        mm_maps[i + 1].start = addr;
}

/* Bytes of [start, end) in entries with charged == @charged (and, for
 * uncharged ones, not MAP_NORESERVE). */
static uint64_t mm_bytes_in(uintptr_t start, uintptr_t end, bool charged) {
        uint64_t n = 0;

        for (size_t i = mm_find(start); i < mm_nmaps && mm_maps[i].start < end; i++) {
                const struct shim_map *m = &mm_maps[i];

                if (m->charged == charged && (charged || !m->noreserve))
                        n += MB_MIN(m->end, end) - MB_MAX(m->start, start);
        }
        return n;
}

/* Drop [start, end) from the table (mm_reserve(2) first); the charged
 * bytes go from mm_charged_bytes. */
static void mm_remove(uintptr_t start, uintptr_t end) {
        size_t i, j;

        mm_split(start);
        mm_split(end);
        i = mm_find(start);
        for (j = i; j < mm_nmaps && mm_maps[j].start < end; j++)
                if (mm_maps[j].charged)
                        mm_charged_bytes -= mm_maps[j].end - mm_maps[j].start;
        memmove(&mm_maps[i], &mm_maps[j], (mm_nmaps - j) * sizeof(*mm_maps));
        mm_nmaps -= j - i;
}

/* Merge entry @i with its neighbours when they touch and agree. */
static void mm_merge(size_t i) {
        if (i + 1 < mm_nmaps && mm_maps[i].end == mm_maps[i + 1].start &&
            mm_maps[i].charged == mm_maps[i + 1].charged && mm_maps[i].noreserve == mm_maps[i + 1].noreserve) {
                mm_maps[i].end = mm_maps[i + 1].end;
                memmove(&mm_maps[i + 1], &mm_maps[i + 2], (mm_nmaps - i - 2) * sizeof(*mm_maps));
                mm_nmaps--;
        }
        if (i > 0 && mm_maps[i - 1].end == mm_maps[i].start && mm_maps[i - 1].charged == mm_maps[i].charged &&
            mm_maps[i - 1].noreserve == mm_maps[i].noreserve) {
                mm_maps[i - 1].end = mm_maps[i].end;
                memmove(&mm_maps[i], &mm_maps[i + 1], (mm_nmaps - i - 1) * sizeof(*mm_maps));
                mm_nmaps--;
        }
}

/* Add [start, end) (free in the table: mm_remove() first, mm_reserve(1)). */
static void mm_insert(uintptr_t start, uintptr_t end, bool charged, bool noreserve) {
        size_t i = mm_find(start);

        memmove(&mm_maps[i + 1], &mm_maps[i], (mm_nmaps - i) * sizeof(*mm_maps));
        mm_maps[i] = (struct shim_map) { .start = start, .end = end, .charged = charged, .noreserve = noreserve };
        mm_nmaps++;
        if (charged)
                mm_charged_bytes += end - start;
        mm_merge(i);
}

/* Mark the uncharged, reservable parts of [start, end) charged
 * (mm_reserve(2) first). */
static void mm_mark_charged(uintptr_t start, uintptr_t end) {
        mm_split(start);
        mm_split(end);
        for (size_t i = mm_find(start); i < mm_nmaps && mm_maps[i].start < end; i++)
                if (!mm_maps[i].charged && !mm_maps[i].noreserve) {
                        mm_maps[i].charged = true;
                        mm_charged_bytes += mm_maps[i].end - mm_maps[i].start;
                }
        for (size_t i = mm_find(start ? start - 1 : 0); i < mm_nmaps && mm_maps[i].start <= end;) {
                size_t before = mm_nmaps;

                mm_merge(i);
                if (mm_nmaps == before)
                        i++;
        }
}

/* ---- the charge (mm_lock held) ---- */

/* After a reconnection to a restarted daemon: the new one never had our
 * outside charges, so none are charged; the next charge asks for all the
 * mappings again (mm_charge_to() charges the whole total). */
static void mm_sync_gen(void) {
        uint64_t g = __atomic_load_n(&shim_client->session.conn_gen, __ATOMIC_ACQUIRE);

        if (g != mm_gen) {
                mm_gen = g;
                mm_charged_pages = 0;
        }
}

static uint64_t mm_pages_for(uint64_t bytes) {
        return (bytes + mm_broker_page - 1) / mm_broker_page;
}

/* Charge the tenant for @bytes of mappings in all: 0, or -ENOMEM when a
 * limit refused the rest (what was charged on the way stays, for
 * mm_settle() to undo), or the error that ended the session. */
static int mm_charge_to(uint64_t bytes) {
        mb_client *c = shim_client;
        uint64_t want = mm_pages_for(bytes);
        int r = 0;

        mm_sync_gen();
        if (want <= mm_charged_pages)
                return 0;
        shim_depth++;
        pthread_mutex_lock(&c->session.conn_lock);
        while (mm_charged_pages < want) {
                uint32_t n = (uint32_t) MB_MIN(want - mm_charged_pages, (uint64_t) MB_OUTSIDE_MAX_PAGES);

                r = session_charge_outside_locked(c, n, 0);
                if (r < 0)
                        break;
                mm_charged_pages += n;
        }
        pthread_mutex_unlock(&c->session.conn_lock);
        shim_depth--;
        return r;
}

/* Give back what is charged beyond mm_charged_bytes. */
static void mm_settle(void) {
        uint64_t want = mm_pages_for(mm_charged_bytes);

        mm_sync_gen();
        if (mm_charged_pages <= want)
                return;
        shim_depth++;
        if (session_uncharge_outside(shim_client, mm_charged_pages - want) == 0)
                mm_charged_pages = want;
        shim_depth--;
}

/* Charge @add more bytes before a call; on a refusal report it (@what,
 * @len) and return false with errno ENOMEM. */
static bool mm_precharge(uint64_t add, const char *what, size_t len) {
        int r;

        if (add == 0)
                return true;
        r = mm_charge_to(mm_charged_bytes + add);
        if (r == 0)
                return true;
        mm_settle();
        if (r != -ENOMEM) {
                /* The session is over: the mapping goes uncharged. */
                shim_check_lost();
                return true;
        }
        shim_report_refused(what, len);
        errno = ENOMEM;
        return false;
}

/* ---- the calls ---- */

static void *mm_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
        bool anon = (flags & MAP_ANONYMOUS) && (flags & MAP_TYPE) == MAP_PRIVATE;
        bool fixed = (flags & MAP_FIXED) != 0; /* MAP_FIXED_NOREPLACE replaces nothing */
        bool charge = anon && (prot & PROT_WRITE) && !(flags & (MAP_NORESERVE | MAP_HUGETLB));
        uintptr_t start, end;
        uint64_t old = 0;
        void *p;
        int e;

        if (!(anon || fixed) || len == 0 || !mm_active())
                return sys_mmap(addr, len, prot, flags, fd, off);
        pthread_mutex_lock(&mm_lock);
        if (!mm_reserve(3)) {
                pthread_mutex_unlock(&mm_lock);
                return sys_mmap(addr, len, prot, flags, fd, off);
        }
        start = (uintptr_t) addr;
        end = start + mm_round(len);
        /* MAP_FIXED replaces what was there: only the difference is charged. */
        if (fixed)
                old = mm_bytes_in(start, end, true);
        if (charge && !mm_precharge(mm_round(len) > old ? mm_round(len) - old : 0, "mmap", len)) {
                pthread_mutex_unlock(&mm_lock);
                return MAP_FAILED;
        }
        p = sys_mmap(addr, len, prot, flags, fd, off);
        e = errno;
        if (p != MAP_FAILED) {
                start = (uintptr_t) p;
                end = start + mm_round(len);
                /* Anything the table still had there is gone (MAP_FIXED,
                 * or a mapping that went without us seeing it). */
                mm_remove(start, end);
                if (anon)
                        mm_insert(start, end, charge, (flags & MAP_NORESERVE) != 0);
        }
        mm_settle();
        pthread_mutex_unlock(&mm_lock);
        errno = e;
        return p;
}

EXPORT void *shim_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) __asm__("mmap");
EXPORT void *shim_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
        return mm_mmap(addr, len, prot, flags, fd, off);
}

/* mmap() under _FILE_OFFSET_BITS=64 (Python's): the same on 64-bit systems. */
EXPORT void *shim_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __asm__("mmap64");
EXPORT void *shim_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
        return mm_mmap(addr, len, prot, flags, fd, off);
}

EXPORT int shim_munmap(void *addr, size_t len) __asm__("munmap");
EXPORT int shim_munmap(void *addr, size_t len) {
        int r, e;

        if (len == 0 || !mm_active())
                return sys_munmap(addr, len);
        pthread_mutex_lock(&mm_lock);
        r = sys_munmap(addr, len);
        e = errno;
        if (r == 0 && mm_reserve(2)) {
                mm_remove((uintptr_t) addr, (uintptr_t) addr + mm_round(len));
                mm_settle();
        }
        pthread_mutex_unlock(&mm_lock);
        errno = e;
        return r;
}

/* mprotect_fixup(): a private mapping that becomes writable is charged
 * then; one that stops being writable keeps its charge. */
EXPORT int shim_mprotect(void *addr, size_t len, int prot) __asm__("mprotect");
EXPORT int shim_mprotect(void *addr, size_t len, int prot) {
        uintptr_t start = (uintptr_t) addr, end;
        uint64_t add;
        int r, e;

        if (!(prot & PROT_WRITE) || len == 0 || !mm_active())
                return sys_mprotect(addr, len, prot);
        pthread_mutex_lock(&mm_lock);
        end = start + mm_round(len);
        add = mm_bytes_in(start, end, false);
        if (add == 0 || !mm_reserve(2)) {
                pthread_mutex_unlock(&mm_lock);
                return sys_mprotect(addr, len, prot);
        }
        if (!mm_precharge(add, "mprotect", len)) {
                pthread_mutex_unlock(&mm_lock);
                return -1;
        }
        r = sys_mprotect(addr, len, prot);
        e = errno;
        if (r == 0)
                mm_mark_charged(start, end);
        mm_settle();
        pthread_mutex_unlock(&mm_lock);
        errno = e;
        return r;
}

EXPORT void *shim_mremap(void *old, size_t old_len, size_t new_len, int flags, ...) __asm__("mremap");
EXPORT void *shim_mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
        uintptr_t o = (uintptr_t) old, olde, ne;
        void *new_addr = NULL, *p;
        struct shim_map m;
        size_t i;
        int e;

        if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)) {
                va_list ap;

                va_start(ap, flags);
                new_addr = va_arg(ap, void *);
                va_end(ap);
        }
        if (old_len == 0 || new_len == 0 || !mm_active())
                return sys_mremap(old, old_len, new_len, flags, new_addr);
        pthread_mutex_lock(&mm_lock);
        olde = o + mm_round(old_len);
        i = mm_find(o);
        if (i == mm_nmaps || mm_maps[i].start > o || !mm_reserve(4)) {
                /* Not a mapping of ours: only what it lands on goes. */
                p = sys_mremap(old, old_len, new_len, flags, new_addr);
                e = errno;
                if (p != MAP_FAILED && (flags & MREMAP_FIXED) && mm_reserve(2)) {
                        mm_remove((uintptr_t) p, (uintptr_t) p + mm_round(new_len));
                        mm_settle();
                }
                pthread_mutex_unlock(&mm_lock);
                errno = e;
                return p;
        }
        /* The kernel moves one VMA: the entry at @old says what it is. */
        m = mm_maps[i];
        if (m.charged && mm_round(new_len) > mm_round(old_len) &&
            !mm_precharge(mm_round(new_len) - mm_round(old_len), "mremap", new_len)) {
                pthread_mutex_unlock(&mm_lock);
                return MAP_FAILED;
        }
        p = sys_mremap(old, old_len, new_len, flags, new_addr);
        e = errno;
        if (p != MAP_FAILED) {
                /* MREMAP_DONTUNMAP leaves the old range mapped (empty) and
                 * charged, as the kernel keeps its accounting. */
                if (!(flags & MREMAP_DONTUNMAP))
                        mm_remove(o, olde);
                else if (mm_round(new_len) < mm_round(old_len))
                        mm_remove(o + mm_round(new_len), olde);
                ne = (uintptr_t) p + mm_round(new_len);
                mm_remove((uintptr_t) p, ne);
                mm_insert((uintptr_t) p, ne, m.charged, m.noreserve);
        }
        mm_settle();
        pthread_mutex_unlock(&mm_lock);
        errno = e;
        return p;
}
