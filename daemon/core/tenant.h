/* SPDX-License-Identifier: MIT */
/*
 * tenant.h - the tenant tree.
 *
 * A tenant is a node of the hierarchy (design.md §2), like a memory cgroup:
 * a page_counter for its usage and limits, an rstat node for its activity
 * statistics, and memory.events-style event counters.  Paths are
 * "a/b/c" (components [A-Za-z0-9_.-], at most 16 deep); the root is "/".
 * Clients attach to leaves only (the cgroup v2 no-internal-process rule).
 *
 * Threading: creation/removal/lookup are serialised by the caller (the
 * daemon holds its tree lock); charging through `memory` and bumping events
 * are safe from any thread.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "page_counter.h"
#include "rstat.h"

#define TENANT_MAX_DEPTH 16
#define TENANT_PATH_MAX 4096

/* memory.events (enum memcg_memory_event). */
enum mb_event {
        MB_EVENT_LOW = 0,
        MB_EVENT_HIGH,
        MB_EVENT_MAX,
        MB_EVENT_OOM,
        MB_EVENT_OOM_KILL,
        _MB_EVENT_NR,
};

enum mb_oom_policy {
        MB_OOM_FAIL = 0,
        MB_OOM_KILL,
};

const char *mb_event_to_string(enum mb_event e);   /* "low", "high", ... */
const char *mb_stat_item_to_string(enum mb_stat_item i); /* "pages", ... */

struct tenant {
        struct page_counter memory; /* first: cache-line aligned */
        struct rstat_node rstat;

        char *path;       /* "db/cache"; "/" for the root */
        const char *name; /* last component, points into path */
        unsigned depth;   /* root 0 */

        struct tenant *parent;
        struct tenant *children; /* first child */
        struct tenant *next_sibling;
        unsigned nchildren;

        /* memcg_memory_event(): local counts only here, hierarchical counts
         * here and in every ancestor. */
        _Atomic uint64_t events[_MB_EVENT_NR];
        _Atomic uint64_t events_local[_MB_EVENT_NR];

        _Atomic unsigned nclients;

        /* Settings (from configuration or D-Bus). */
        unsigned charge_batch; /* 0: inherit the broker's ChargeBatch */
        enum mb_oom_policy oom_policy;
        uid_t *allow_users;
        size_t n_allow_users;
        gid_t *allow_groups;
        size_t n_allow_groups;
        char *cgroup; /* Cgroup= prefix, NULL when unset */
        bool from_config;  /* defined by a file (vs. created at run time) */

        void *userdata; /* the daemon's per-tenant state (arena, clients) */
};

struct tenant_tree {
        struct tenant *root;
        unsigned ntenants; /* including the root */
        struct rstat_tree rstat;
        bool recursive_protection; /* memory_recursiveprot */
        struct tenant_map *map;    /* path -> tenant */
};

/* A tree with just the root; @capacity_pages is the root's max. */
int tenant_tree_new(unsigned long capacity_pages, unsigned ncpus, struct tenant_tree **ret);
void tenant_tree_free(struct tenant_tree *tree);

/* Syntax check of a path (design.md §2).  "/" is the root. */
bool tenant_path_is_valid(const char *path);

/* Normalise "/a/b/" to "a/b" (the root stays "/").  -EINVAL when invalid. */
int tenant_path_normalize(const char *path, char **ret);

struct tenant *tenant_lookup(struct tenant_tree *tree, const char *path);

/**
 * tenant_create - create @path, and any missing ancestors (like systemd
 * slices).  -EEXIST if it exists, -EINVAL for a bad path or depth > 16,
 * -EBUSY when an ancestor has clients attached (no internal processes).
 */
int tenant_create(struct tenant_tree *tree, const char *path, struct tenant **ret);

/* Remove a leaf without clients: -EBUSY with children or clients, -EPERM for
 * the root. */
int tenant_remove(struct tenant_tree *tree, struct tenant *t);

/* Settings */
int tenant_set_allow(struct tenant *t, const uid_t *uids, size_t nu, const gid_t *gids, size_t ng,
                     const char *cgroup);

/* memcg_memory_event() */
void tenant_memory_event(struct tenant *t, enum mb_event event);

/* Pre-order walk of @t's subtree; stop early when @cb returns non-zero and
 * return that value. */
int tenant_walk(struct tenant *t, int (*cb)(struct tenant *t, void *userdata), void *userdata);

/* Effective charge batch for the tenant: own setting, else nearest ancestor's,
 * else @broker_default. */
unsigned tenant_charge_batch(const struct tenant *t, unsigned broker_default);

/* True when neither @t nor any ancestor up to (excluding) the root has any
 * limit (max/high) or protection (min/low): the seed-003 fast path. */
bool tenant_is_unlimited(const struct tenant *t);
