/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "macros.h"
#include "tenant_map.h"

#define TENANT_MAP_INITIAL_BUCKETS 64U

struct tenant_map {
        struct tenant_map_node **buckets;
        size_t nbuckets; /* a power of two */
        size_t size;
        uint64_t seed;
};

int tenant_map_new(struct tenant_map **ret) {
        _cleanup_(freep) struct tenant_map *m = NULL;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->buckets = calloc(TENANT_MAP_INITIAL_BUCKETS, sizeof(*m->buckets));
        if (!m->buckets)
                return -ENOMEM;
        m->nbuckets = TENANT_MAP_INITIAL_BUCKETS;

        if (getrandom(&m->seed, sizeof(m->seed), GRND_NONBLOCK) != sizeof(m->seed))
                /* No entropy yet (early boot): any seed works, it only
                 * spreads chains. */
                m->seed = (uint64_t) time(NULL) ^ (uint64_t) (uintptr_t) m;

        *ret = TAKE_PTR(m);
        return 0;
}

void tenant_map_free(struct tenant_map *m) {
        if (!m)
                return;
        free(m->buckets);
        free(m);
}

uint64_t tenant_map_hash(const struct tenant_map *m, const char *path, size_t len) {
        /* FNV-1a, seeded; a final avalanche (the murmur3 fmix64 constants)
         * so that the low bits used as bucket index depend on every byte. */
        uint64_t h = 0xcbf29ce484222325ULL ^ m->seed;

        for (size_t i = 0; i < len; i++) {
                h ^= (unsigned char) path[i];
                h *= 0x100000001b3ULL;
        }
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ULL;
        h ^= h >> 33;
        return h;
}

static int tenant_map_grow(struct tenant_map *m) {
        size_t n = m->nbuckets * 2;
        struct tenant_map_node **b;

        b = calloc(n, sizeof(*b));
        if (!b)
                return -ENOMEM;

        for (size_t i = 0; i < m->nbuckets; i++)
                for (struct tenant_map_node *x = m->buckets[i], *next; x; x = next) {
                        size_t j = x->hash & (n - 1);

                        next = x->next;
                        x->next = b[j];
                        b[j] = x;
                }

        free(m->buckets);
        m->buckets = b;
        m->nbuckets = n;
        return 0;
}

int tenant_map_put(struct tenant_map *m, struct tenant_map_node *n, const char *key) {
        size_t i;

        if (m->size + 1 > m->nbuckets) {
                int r = tenant_map_grow(m);
                if (r < 0)
                        return r;
        }

        n->key = key;
        n->hash = tenant_map_hash(m, key, strlen(key));
        i = n->hash & (m->nbuckets - 1);
        n->next = m->buckets[i];
        m->buckets[i] = n;
        m->size++;
        return 0;
}

void tenant_map_remove(struct tenant_map *m, struct tenant_map_node *n) {
        size_t i = n->hash & (m->nbuckets - 1);

        for (struct tenant_map_node **p = &m->buckets[i]; *p; p = &(*p)->next)
                if (*p == n) {
                        *p = n->next;
                        n->next = NULL;
                        m->size--;
                        return;
                }
}

struct tenant_map_node *tenant_map_get(const struct tenant_map *m, const char *path, size_t len) {
        uint64_t h = tenant_map_hash(m, path, len);

        for (struct tenant_map_node *x = m->buckets[h & (m->nbuckets - 1)]; x; x = x->next)
                if (x->hash == h && strncmp(x->key, path, len) == 0 && x->key[len] == '\0')
                        return x;
        return NULL;
}

size_t tenant_map_size(const struct tenant_map *m) {
        return m->size;
}
