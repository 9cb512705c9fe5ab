/* SPDX-License-Identifier: MIT */
/*
 * tenant_map.h - path -> tenant hash map, internal to the tenant module.
 *
 * Chained hashing through an intrusive link in struct tenant (`hash_next`),
 * so an insert never allocates per entry and a remove is O(chain).  The
 * bucket array doubles when the load passes 1 (and never shrinks), so
 * lookups stay O(1) on average with 10,000+ tenants.  Paths are hashed with
 * FNV-1a (64 bit) mixed with a per-map random seed: only uid 0 may create
 * tenants, but the seed keeps chains short even for adversarial names.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct tenant;
struct tenant_map;

/* A new, empty map.  Returns 0 or -ENOMEM. */
int tenant_map_new(struct tenant_map **ret);
/* Frees the map (not the tenants).  NULL is fine. */
void tenant_map_free(struct tenant_map *m);

/* Hash of a normalised path, as stored in tenant->path_hash. */
uint64_t tenant_map_hash(const struct tenant_map *m, const char *path, size_t len);

/* Insert @t under t->path (caller guarantees the path is not present).
 * Returns 0 or -ENOMEM (then nothing changed). */
int tenant_map_put(struct tenant_map *m, struct tenant *t);
/* Remove @t; no-op when absent. */
void tenant_map_remove(struct tenant_map *m, struct tenant *t);
/* The tenant whose normalised path is the first @len bytes of @path, or
 * NULL. */
struct tenant *tenant_map_get(const struct tenant_map *m, const char *path, size_t len);
/* Number of entries. */
size_t tenant_map_size(const struct tenant_map *m);
