/* SPDX-License-Identifier: MIT */
/*
 * tcache.h - the shim's per-thread cache of small blocks (not installed).
 *
 * In front of the per-CPU lists of mb_malloc()'s size classes, every thread
 * of the program keeps, per class, a short LIFO list of blocks it freed,
 * linked through their first word (tcmalloc's thread caches, glibc's
 * tcache, mimalloc's per-thread free lists): a malloc() that finds one is a
 * pop off a thread-local list, a free() of a class block a push, with no
 * restartable sequence, lock word or CPU number, which is half of what the
 * per-CPU path costs.  To the slab layer the cached blocks are allocated
 * (charged, in `slab`), as blocks in a program's own free list are.
 *
 * Bounds: a class's list starts at SHIM_TC_START blocks and doubles each
 * time a free finds it full, up to SHIM_TC_CLASS_BYTES of blocks, while the
 * bounds of all of the thread's lists stay within SHIM_TC_THREAD_BYTES
 * (tcmalloc's slow start of max_length, and its per-thread cache size); a
 * free past the bound goes to the per-CPU list.  So an idle thread holds
 * what it last freed, at most SHIM_TC_THREAD_BYTES, and the daemon's reclaim cannot reach it
 * (a thread at its tenant's limit first gives its own back).  A thread's
 * lists go back when it exits (a key destructor).  Off in a fork() child,
 * when the session is lost, for debug caches (MEMBROKER_SLAB_DEBUG, whose
 * checks need every free) and with MEMBROKER_TCACHE=0.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "malloc/kmalloc.h"

_Static_assert(KM_MAX_CLASSES <= 32, "shim_tcache.full has a bit per class");

/* A list holds lim - room blocks. */
#define shim_tc_count(ci) (shim_tc.lim[ci] - shim_tc.room[ci])

#define SHIM_TC_START 16u                  /* blocks a class's list may hold at first */
#define SHIM_TC_CLASS_BYTES (512u * 1024u) /* ... at most (and 16 blocks) */
#define SHIM_TC_THREAD_BYTES (2u << 20)    /* all of a thread's lists' bounds together */
#define SHIM_TC_ENV "MEMBROKER_TCACHE"

struct shim_tcache {
        unsigned depth;                    /* shim_depth (preload.h): one TLS block for both */
        uint32_t room[KM_MAX_CLASSES];     /* pushes left before a list is full (0: also
                                            * when not set up: the slow path sets it) */
        void *head[KM_MAX_CLASSES];
        uint32_t lim[KM_MAX_CLASSES];      /* the list's bound now */
        size_t lim_bytes;                  /* the bounds' bytes together */
        uint32_t full;                     /* bit ci: lim[ci] may not grow any more */
        bool registered;                   /* the exit destructor knows this thread */
        bool dead;                         /* the destructor ran: no cache any more */
};

extern __thread struct shim_tcache shim_tc __attribute__((tls_model("initial-exec")));

/* A pop off this thread's list of class @ci, or NULL. */
static inline __attribute__((always_inline)) void *shim_tc_pop(unsigned ci) {
        void *p = shim_tc.head[ci];

        if (_likely_(p)) {
                void *next = *(void **) p;

                shim_tc.head[ci] = next;
                shim_tc.room[ci]++;
                /* The next pop reads its link: fetch it now (tcmalloc's
                 * free lists do the same). */
                __builtin_prefetch(next, 1, 3);
        }
        return p;
}

/* Push @p (a block of class @ci); false when the list is full or not set
 * up, or @p is on top already (a double free, which would make the list a
 * loop that hands @p out forever: it takes the per-CPU path instead, as
 * before this cache). */
static inline __attribute__((always_inline)) bool shim_tc_push(unsigned ci, void *p) {
        void *h = shim_tc.head[ci];

        if (_likely_(shim_tc.room[ci] != 0) && _likely_(p != h)) {
                *(void **) p = h;
                shim_tc.head[ci] = p;
                shim_tc.room[ci]--;
                return true;
        }
        return false;
}

/* A free of @p of class @ci whose push failed: a list that may not grow
 * passes it to the per-CPU list inline (a thread that only frees, the
 * consumer of a producer), anything else takes the slow path. */
static inline __attribute__((always_inline)) bool shim_tc_pass(struct kmalloc_ctx *k, unsigned ci, void *p) {
        return (shim_tc.full >> ci) & 1u && slab_cache_free_fast(k->cache[ci], p) == SLAB_RSEQ_DONE;
}

/* tcache.c: set up the cache for @k's classes (once the shim uses them). */
void shim_tc_enable(struct kmalloc_ctx *k);
/* A free of @p of class @ci found its list full or not set up: grow it,
 * or free @p past the cache. */
void shim_tc_overflow(struct kmalloc_ctx *k, unsigned ci, void *p);
/* Give every block of this thread's lists back (before failing at a
 * limit).  Returns how many. */
size_t shim_tc_flush_all(struct kmalloc_ctx *k);
