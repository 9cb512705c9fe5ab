/* SPDX-License-Identifier: MIT */
/*
 * slab_page.c - slab pages of a cache (slab.h): the page->slab table, the
 * partial and empty lists, taking a page for a new slab and giving empty
 * ones back (mm/slub.c allocate_slab(), __slab_free(), get_partial()).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "core/mb_internal.h"
#include "membroker.h"
#include "slab/slab.h"

/* ---- page -> slab table (per cache; under cache->lock) ---- */

static inline uint64_t slab_page_key(const mb_cache *s, const void *ptr) {
        return ((uintptr_t) ptr - s->base) >> s->ctx->page_shift;
}

static inline size_t slab_page_hash(uint64_t key, size_t size) {
        return (size_t) ((key * UINT64_C(0x9e3779b97f4a7c15)) >> 17) & (size - 1);
}

struct mb_slab *slab_page_lookup(const mb_cache *s, const void *ptr) {
        uint64_t key;

        if (!s->table_size || !s->base_known || (uintptr_t) ptr < s->base)
                return NULL;
        key = slab_page_key(s, ptr);
        for (size_t i = slab_page_hash(key, s->table_size);; i = (i + 1) & (s->table_size - 1)) {
                struct mb_slab *slab = s->table[i];

                if (!slab)
                        return NULL;
                if (slab->key == key)
                        return slab;
        }
}

static void slab_page_table_put(struct mb_slab **table, size_t size, struct mb_slab *slab) {
        size_t i = slab_page_hash(slab->key, size);

        while (table[i])
                i = (i + 1) & (size - 1);
        table[i] = slab;
}

int slab_page_insert(mb_cache *s, struct mb_slab *slab) {
        if (!s->base_known) {
                mb_handle_t h = mb_page_to_handle(s->client, slab->page);

                s->base = (uintptr_t) slab->page - (uintptr_t) (h << s->ctx->page_shift);
                s->base_known = true;
        }
        slab->key = slab_page_key(s, slab->page);

        if ((s->table_used + 1) * 2 > s->table_size) {
                size_t size = s->table_size ? s->table_size * 2 : 16;
                struct mb_slab **t = calloc(size, sizeof(*t));

                if (!t)
                        return -ENOMEM;
                for (size_t i = 0; i < s->table_size; i++)
                        if (s->table[i])
                                slab_page_table_put(t, size, s->table[i]);
                free(s->table);
                s->table = t;
                s->table_size = size;
        }
        slab_page_table_put(s->table, s->table_size, slab);
        s->table_used++;
        return 0;
}

/* Linear-probing deletion with backward shift (no tombstones). */
static void slab_page_table_remove(mb_cache *s, struct mb_slab *slab) {
        size_t mask = s->table_size - 1, i = slab_page_hash(slab->key, s->table_size);

        while (s->table[i] != slab)
                i = (i + 1) & mask;
        for (size_t j = (i + 1) & mask; s->table[j]; j = (j + 1) & mask) {
                size_t home = slab_page_hash(s->table[j]->key, s->table_size);

                /* Move j into the hole at i unless its home lies in (i, j]. */
                if (((j - home) & mask) >= ((j - i) & mask)) {
                        s->table[i] = s->table[j];
                        i = j;
                }
        }
        s->table[i] = NULL;
        s->table_used--;
}


/* ---- slabs ---- */

struct mb_slab *slab_page_new(mb_cache *s) {
        _cleanup_(freep) struct mb_slab *slab = NULL;
        void *head = NULL;

        slab = calloc(1, sizeof(*slab));
        if (!slab) {
                mb_set_error("slab cache %s: out of memory for slab metadata", s->name);
                errno = ENOMEM;
                return NULL;
        }
        slab->page = mb_page_alloc(s->client);
        if (!slab->page)
                return NULL; /* errno and message from mb_page_alloc() */
        if (s->page_tags)
                s->page_tags[mb_page_to_handle(s->client, slab->page)] = s->page_tag;

        for (size_t i = s->objects; i-- > 0;) {
                char *obj = slab_page_object(s, slab, i);

                if (s->debug)
                        slab_debug_init_object(s, obj);
                if (s->ctor)
                        s->ctor(obj);
                slab_set_fp(s, obj, head);
                head = obj;
        }
        slab->freelist = head;
        slab->nfree = (uint32_t) s->objects;
        slab_list_init(&slab->node);
        return TAKE_PTR(slab);
}

void slab_page_move(mb_cache *s, struct mb_slab *slab, uint32_t list) {
        if (slab->list == SLAB_ON_PARTIAL) {
                slab_list_del(&slab->node);
                s->nr_partial--;
        } else if (slab->list == SLAB_ON_EMPTY) {
                slab_list_del(&slab->node);
                __atomic_store_n(&s->nr_empty, s->nr_empty - 1, __ATOMIC_RELAXED);
        }
        slab->list = (uint16_t) list;
        if (list == SLAB_ON_PARTIAL) {
                slab_list_add_tail(&s->partial[slab->cpu], &slab->node);
                s->nr_partial++;
        } else if (list == SLAB_ON_EMPTY) {
                slab_list_add_tail(&s->empty, &slab->node);
                __atomic_store_n(&s->nr_empty, s->nr_empty + 1, __ATOMIC_RELAXED);
        }
}

/* Take @slab out of the cache (cache lock held); the caller gives its page
 * back with slab_page_discard_finish() after dropping the lock.  Discarded slabs
 * are chained through node.next. */
static void slab_page_discard(mb_cache *s, struct mb_slab *slab, struct mb_slab **chain) {
        slab_page_move(s, slab, SLAB_ON_NO_LIST);
        slab_page_table_remove(s, slab);
        s->nr_slabs--;
        s->slabs_freed++;
        slab->node.next = (struct slab_list_node *) *chain;
        *chain = slab;
}

static size_t slab_page_discard_finish(mb_cache *s, struct mb_slab *chain) {
        size_t n = 0;

        while (chain) {
                struct mb_slab *next = (struct mb_slab *) chain->node.next;

                (void) mb_page_free(s->client, chain->page);
                free(chain);
                chain = next;
                n++;
        }
        return n;
}

size_t slab_page_flush_list(mb_cache *s, void *list) {
        struct mb_slab *chain = NULL;

        if (!list)
                return 0;
        pthread_mutex_lock(&s->lock);
        while (list) {
                void *obj = list, *next = slab_get_fp(s, obj);
                struct mb_slab *slab = slab_page_lookup(s, obj);
                size_t off;

                list = next;
                if (!slab) {
                        slab_debug_report(s, "free of %p: not an object of this cache; ignored", obj);
                        continue;
                }
                off = (size_t) ((char *) obj - slab->page);
                if (off < s->obj_offset || (off - s->obj_offset) % s->object_bytes != 0 ||
                    (off - s->obj_offset) / s->object_bytes >= s->objects) {
                        slab_debug_report(s, "free of %p: not the start of an object; ignored", obj);
                        continue;
                }
                slab_set_fp(s, obj, slab->freelist);
                slab->freelist = obj;
                slab->nfree++;
                if (slab->nfree == s->objects) {
                        if (s->nr_empty >= s->empty_keep)
                                slab_page_discard(s, slab, &chain);
                        else
                                slab_page_move(s, slab, SLAB_ON_EMPTY);
                } else if (slab->nfree == 1)
                        slab_page_move(s, slab, SLAB_ON_PARTIAL);
        }
        pthread_mutex_unlock(&s->lock);
        return slab_page_discard_finish(s, chain);
}

/* The next slab for CPU @cpu (take_partial()), or NULL. */
static struct slab_list_node *slab_page_next_for(mb_cache *s, unsigned cpu) {
        unsigned ncpus = s->ctx->ncpus;

        if (!slab_list_empty(&s->partial[cpu]))
                return s->partial[cpu].next;
        if (!slab_list_empty(&s->empty))
                return s->empty.next;
        if (s->nr_partial == 0)
                return NULL;
        for (unsigned k = 1; k < ncpus; k++) {
                struct slab_list_node *h = &s->partial[(cpu + k) % ncpus];

                if (!slab_list_empty(h))
                        return h->next;
        }
        return NULL;
}

bool slab_page_take_partial(mb_cache *s, unsigned cpu, void **ret_list, uint32_t *ret_count) {
        uint32_t count = 0;
        void *list = NULL;

        pthread_mutex_lock(&s->lock);
        while (count < s->cpu_max / 2) {
                struct slab_list_node *n = slab_page_next_for(s, cpu);
                struct mb_slab *slab;
                void *tail;

                if (!n)
                        break;
                slab = slab_container_of(n, struct mb_slab, node);
                slab_page_move(s, slab, SLAB_ON_NO_LIST);
                slab->cpu = (uint16_t) cpu;
                /* Chain the slab's list in front of what we have. */
                tail = slab->freelist;
                while (slab_get_fp(s, tail))
                        tail = slab_get_fp(s, tail);
                slab_set_fp(s, tail, list);
                list = slab->freelist;
                count += slab->nfree;
                slab->freelist = NULL;
                slab->nfree = 0;
        }
        pthread_mutex_unlock(&s->lock);
        *ret_list = list;
        *ret_count = count;
        return count > 0;
}


size_t slab_page_release_empty(mb_cache *s, size_t max) {
        struct mb_slab *chain = NULL;
        size_t n = 0;

        pthread_mutex_lock(&s->lock);
        while (n < max && !slab_list_empty(&s->empty)) {
                slab_page_discard(s, slab_container_of(s->empty.next, struct mb_slab, node), &chain);
                n++;
        }
        pthread_mutex_unlock(&s->lock);
        return slab_page_discard_finish(s, chain);
}
