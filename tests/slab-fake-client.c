/* SPDX-License-Identifier: MIT */
/* slab-fake-client.c - see slab-fake-client.h. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/mb_internal.h"
#include "slab-fake-client.h"

struct mb_client {
        char *base;
        size_t npages;
        size_t page_size;
        unsigned ncpus;
        pthread_mutex_t lock;
        size_t *free_idx; /* stack of free page indices */
        size_t nfree;
        size_t in_use;
        size_t limit;
        int64_t stat[_MB_STAT_NR];
        const struct mb_shrinker *shrinkers[16];
        size_t nshrinkers;
};

static __thread int fake_cpu = -1;

mb_client *fake_client_new(size_t npages, size_t page_size, unsigned ncpus) {
        mb_client *c = calloc(1, sizeof(*c));

        if (!c)
                abort();
        c->base = mmap(NULL, npages * page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (c->base == MAP_FAILED)
                abort();
        c->npages = npages;
        c->page_size = page_size;
        c->ncpus = ncpus;
        c->limit = npages;
        pthread_mutex_init(&c->lock, NULL);
        c->free_idx = malloc(npages * sizeof(size_t));
        if (!c->free_idx)
                abort();
        /* Lowest index on top, like the daemon's pool. */
        for (size_t i = 0; i < npages; i++)
                c->free_idx[i] = npages - 1 - i;
        c->nfree = npages;
        return c;
}

void fake_client_free(mb_client *c) {
        munmap(c->base, c->npages * c->page_size);
        pthread_mutex_destroy(&c->lock);
        free(c->free_idx);
        free(c);
}

size_t fake_client_pages_in_use(mb_client *c) {
        size_t n;

        pthread_mutex_lock(&c->lock);
        n = c->in_use;
        pthread_mutex_unlock(&c->lock);
        return n;
}

void fake_client_set_page_limit(mb_client *c, size_t max) {
        pthread_mutex_lock(&c->lock);
        c->limit = max;
        pthread_mutex_unlock(&c->lock);
}

int64_t fake_client_stat(mb_client *c, enum mb_stat_item item) {
        return __atomic_load_n(&c->stat[item], __ATOMIC_RELAXED);
}

void fake_client_set_cpu(int cpu) {
        fake_cpu = cpu;
}

size_t fake_client_nshrinkers(mb_client *c) {
        return c->nshrinkers;
}

const struct mb_shrinker *fake_client_shrinker(mb_client *c, size_t i) {
        return i < c->nshrinkers ? c->shrinkers[i] : NULL;
}

/* ---- the part of the library the slab caches use ---- */

void *mb_page_alloc(mb_client *c) {
        void *p = NULL;

        pthread_mutex_lock(&c->lock);
        if (c->nfree > 0 && c->in_use < c->limit) {
                p = c->base + c->free_idx[--c->nfree] * c->page_size;
                c->in_use++;
        }
        pthread_mutex_unlock(&c->lock);
        if (!p) {
                mb_set_error("fake: no page");
                errno = ENOMEM;
                return NULL;
        }
        mb_client_stat_add(c, MB_STAT_PAGES, 1);
        return p;
}

int mb_page_free(mb_client *c, void *page) {
        size_t off = (size_t) ((char *) page - c->base);

        if ((char *) page < c->base || off >= c->npages * c->page_size || off % c->page_size)
                abort(); /* the slab caches must never do that */
        /* Like hole punching, forget the contents. */
        memset(page, 0x5a, c->page_size);
        pthread_mutex_lock(&c->lock);
        c->free_idx[c->nfree++] = off / c->page_size;
        c->in_use--;
        pthread_mutex_unlock(&c->lock);
        mb_client_stat_add(c, MB_STAT_PAGES, -1);
        return 0;
}

mb_handle_t mb_page_to_handle(const mb_client *c, const void *page) {
        size_t off = (size_t) ((const char *) page - c->base);

        if ((const char *) page < c->base || off >= c->npages * c->page_size)
                return UINT64_MAX; /* MB_HANDLE_INVALID */
        return off / c->page_size;
}

size_t mb_page_size(const mb_client *c) {
        return c->page_size;
}

unsigned mb_client_cpu(const mb_client *c) {
        int cpu = fake_cpu;

        if (cpu >= 0 && (unsigned) cpu < c->ncpus)
                return (unsigned) cpu;
        cpu = sched_getcpu();
        return cpu < 0 ? 0 : (unsigned) cpu % c->ncpus;
}

/* The tests choose the CPU (fake_client_set_cpu()): never read inline. */
ptrdiff_t mb_client_cpu_offset(const mb_client *c) {
        (void) c;
        return -1;
}

unsigned mb_client_ncpus(const mb_client *c) {
        return c->ncpus;
}

void mb_client_stat_add(mb_client *c, enum mb_stat_item item, int64_t delta) {
        __atomic_fetch_add(&c->stat[item], delta, __ATOMIC_RELAXED);
}

static __thread char fake_error[256];

void mb_set_error(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(fake_error, sizeof(fake_error), fmt, ap);
        va_end(ap);
}

const char *mb_last_error(void) {
        return fake_error;
}

int mb_register_shrinker(mb_client *c, const struct mb_shrinker *s) {
        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < c->nshrinkers; i++)
                if (c->shrinkers[i] == s) {
                        pthread_mutex_unlock(&c->lock);
                        return -EEXIST;
                }
        if (c->nshrinkers == sizeof(c->shrinkers) / sizeof(c->shrinkers[0])) {
                pthread_mutex_unlock(&c->lock);
                return -ENOMEM;
        }
        c->shrinkers[c->nshrinkers++] = s;
        pthread_mutex_unlock(&c->lock);
        return 0;
}

int mb_unregister_shrinker(mb_client *c, const struct mb_shrinker *s) {
        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < c->nshrinkers; i++)
                if (c->shrinkers[i] == s) {
                        memmove(c->shrinkers + i, c->shrinkers + i + 1, (c->nshrinkers - i - 1) * sizeof(void *));
                        c->nshrinkers--;
                        pthread_mutex_unlock(&c->lock);
                        return 0;
                }
        pthread_mutex_unlock(&c->lock);
        return -ENOENT;
}
