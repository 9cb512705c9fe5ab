/* SPDX-License-Identifier: MIT */
/*
 * tenant_map.h - path -> tenant hash map, internal to the tenant module.
 *
 * Chained hashing through an intrusive link embedded in struct tenant
 * (`map_node`, a struct tenant_map_node), so an insert never allocates per
 * entry and a remove is O(chain).  The map knows only its nodes, never the
 * tenant around them (the tenant module includes this header, not the
 * reverse), the way the kernel's hlist_node knows nothing of its owner.  The
 * bucket array doubles when the load passes 1 (and never shrinks), so
 * lookups stay O(1) on average with 10,000+ tenants.  Paths are hashed with
 * FNV-1a (64 bit) mixed with a per-map random seed: only uid 0 may create
 * tenants, but the seed keeps chains short even for adversarial names.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct tenant_map;

/* The link an object in the map embeds.  Written by the map only. */
struct tenant_map_node {
        struct tenant_map_node *next; /* the bucket's chain */
        uint64_t hash;                /* tenant_map_hash() of key */
        const char *key;              /* the normalised path, NUL-terminated */
};

/* A new, empty map.  Returns 0 or -ENOMEM. */
int tenant_map_new(struct tenant_map **ret);
/* Frees the map (not the tenants).  NULL is fine. */
void tenant_map_free(struct tenant_map *m);

/* Hash of a normalised path, as stored in tenant_map_node.hash. */
uint64_t tenant_map_hash(const struct tenant_map *m, const char *path, size_t len);

/* Insert @n under @key (caller guarantees the key is not present and that
 * @key outlives the entry).  Returns 0 or -ENOMEM (then nothing changed). */
int tenant_map_put(struct tenant_map *m, struct tenant_map_node *n, const char *key);
/* Remove @n; no-op when absent. */
void tenant_map_remove(struct tenant_map *m, struct tenant_map_node *n);
/* The node whose key is the first @len bytes of @path, or NULL. */
struct tenant_map_node *tenant_map_get(const struct tenant_map *m, const char *path, size_t len);
/* Number of entries. */
size_t tenant_map_size(const struct tenant_map *m);
