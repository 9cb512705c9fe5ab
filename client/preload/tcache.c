/* SPDX-License-Identifier: MIT */
/*
 * tcache.c - the slow paths of the shim's per-thread cache (tcache.h):
 * setting a class's list up, growing it, and giving everything back when
 * the thread exits or meets its limit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "malloc/kmalloc.h"
#include "preload/preload.h"
#include "preload/tcache.h"

__thread struct shim_tcache shim_tc __attribute__((tls_model("initial-exec")));

static bool shim_tc_on;
static pthread_key_t shim_tc_key;
static uint32_t shim_tc_cap[KM_MAX_CLASSES]; /* a class's bound, in blocks */

/* Give @p (a block of class @ci) to the per-CPU list, past this cache. */
static void shim_tc_release(struct kmalloc_ctx *k, unsigned ci, void *p) {
        if (slab_cache_free_fast(k->cache[ci], p) == SLAB_RSEQ_DONE)
                return;
        shim_depth++;
        slab_cache_free_slowpath(k->cache[ci], p);
        shim_depth--;
}

/* Give class @ci's whole list back. */
static void shim_tc_drain(struct kmalloc_ctx *k, unsigned ci) {
        void *p = shim_tc.head[ci];

        shim_tc.head[ci] = NULL;
        shim_tc.room[ci] = shim_tc.lim[ci];
        while (p) {
                void *next = *(void **) p;

                shim_tc_release(k, ci, p);
                p = next;
        }
}

size_t shim_tc_flush_all(struct kmalloc_ctx *k) {
        size_t n = 0;

        for (unsigned ci = 0; ci < k->nclasses; ci++) {
                n += shim_tc_count(ci);
                shim_tc_drain(k, ci);
        }
        return n;
}

/* The thread exits: its lists go back, and its later frees (other
 * destructors) pass the cache. */
static void shim_tc_exit(void *arg) {
        struct kmalloc_ctx *k = __atomic_load_n(&shim_client->kmalloc, __ATOMIC_ACQUIRE);

        (void) arg;
        shim_tc.dead = true;
        /* A lost session or a fork() child: the blocks are not ours to give. */
        if (k && shim_active())
                (void) shim_tc_flush_all(k);
        memset(shim_tc.room, 0, sizeof(shim_tc.room));
        memset(shim_tc.lim, 0, sizeof(shim_tc.lim));
        shim_tc.lim_bytes = 0;
        shim_tc.full = 0;
}

void shim_tc_enable(struct kmalloc_ctx *k) {
        const char *e = getenv(SHIM_TC_ENV);

        if (shim_tc_on || (e && strcmp(e, "0") == 0) || k->nclasses == 0 || k->cache[0]->debug)
                return;
        for (unsigned ci = 0; ci < k->nclasses; ci++)
                shim_tc_cap[ci] = (uint32_t) MB_MAX((size_t) SHIM_TC_START, SHIM_TC_CLASS_BYTES / k->class_bytes[ci]);
        if (pthread_key_create(&shim_tc_key, shim_tc_exit) != 0)
                return;
        __atomic_store_n(&shim_tc_on, true, __ATOMIC_RELEASE);
}

void shim_tc_overflow(struct kmalloc_ctx *k, unsigned ci, void *p) {
        uint32_t lim = shim_tc.lim[ci];

        if (!__atomic_load_n(&shim_tc_on, __ATOMIC_ACQUIRE) || shim_tc.dead) {
                shim_tc_release(k, ci, p);
                return;
        }
        if (!shim_tc.registered) {
                /* The key's second level is allocated only past 32 keys; the
                 * shim's depth sends such an allocation to glibc. */
                shim_depth++;
                shim_tc.registered = pthread_setspecific(shim_tc_key, &shim_tc) == 0;
                shim_depth--;
                if (!shim_tc.registered) {
                        shim_tc_release(k, ci, p);
                        return;
                }
        }
        if (lim == 0)
                lim = SHIM_TC_START;
        else if (lim < shim_tc_cap[ci])
                lim = MB_MIN(2 * lim, shim_tc_cap[ci]);
        if (shim_tc.lim_bytes + (size_t) (lim - shim_tc.lim[ci]) * k->class_bytes[ci] > SHIM_TC_THREAD_BYTES)
                lim = shim_tc.lim[ci]; /* the thread's bound: no more growth */
        if (lim == shim_tc.lim[ci] || lim == shim_tc_cap[ci])
                shim_tc.full |= 1u << ci;
        shim_tc.lim_bytes += (size_t) (lim - shim_tc.lim[ci]) * k->class_bytes[ci];
        shim_tc.room[ci] += lim - shim_tc.lim[ci];
        shim_tc.lim[ci] = lim;
        /* At the bound the block passes the cache: the list keeps what it
         * has (a walk to its old end would touch every cold block). */
        if (!shim_tc_push(ci, p))
                shim_tc_release(k, ci, p);
}
