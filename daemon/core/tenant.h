/* SPDX-License-Identifier: MIT */
/*
 * tenant.h - the tenant tree.
 *
 * A tenant is a node of the hierarchy (docs/design.md), like a memory cgroup:
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
#include "rightsize.h"
#include "psi.h"
#include "rstat.h"
#include "tenant_map.h"

#define TENANT_MAX_DEPTH 16
#define TENANT_PATH_MAX 4096    /* bytes, including the NUL */
#define TENANT_NAME_MAX 255     /* bytes per component, like NAME_MAX */

/* memory.events (enum memcg_memory_event). */
enum mb_event {
        MB_EVENT_LOW = 0,
        MB_EVENT_HIGH,
        MB_EVENT_MAX,
        MB_EVENT_OOM,
        MB_EVENT_OOM_KILL,
        MB_EVENT_OVERRUN, /* a client backed arena pages beyond its charge */
        MB_EVENT_OOM_GROUP_KILL, /* MEMCG_OOM_GROUP_KILL: OOMGroup=yes killed the tenant's clients */
        _MB_EVENT_NR,
};

enum mb_oom_policy {
        MB_OOM_FAIL = 0,
        MB_OOM_KILL,
};

/* OverrunPolicy=: what an overrun costs the tenant's clients besides the
 * punched pages. */
enum mb_overrun_policy {
        MB_OVERRUN_PUNCH = 0,
        MB_OVERRUN_KILL, /* SIGKILL every connected client of the tenant */
};

/* "low", "high", "max", "oom", "oom_kill", "overrun", "oom_group_kill"
 * (the memory.events keys, overrun being membroker's own); NULL
 * when out of range. */
const char *mb_event_to_string(enum mb_event e);
/* "pages", "stock", "slab_reclaimable", "slab_unreclaimable", "pgalloc",
 * "pgfree", "charge_requests", "uncharge_requests", "pgscan", "pgsteal",
 * "throttle_usec"; NULL when out of range. */
const char *mb_stat_item_to_string(enum mb_stat_item i);

struct tenant_tree;

/* Delegate=: the users and groups who may manage the subtree below a tenant
 * (daemon/core/delegate.h). */
struct mb_delegate {
        uid_t *users;
        size_t n_users;
        gid_t *groups;
        size_t n_groups;
        unsigned max_descendants; /* DelegateMaxDescendants=, 0: the default */
};

struct tenant {
        struct page_counter memory; /* first: cache-line aligned */
        struct rstat_node rstat;

        char *path;       /* "db/cache"; "/" for the root */
        const char *name; /* last component, points into path */
        unsigned depth;   /* root 0 */

        struct tenant_tree *tree;
        struct tenant *parent;
        struct tenant *children; /* first child (children in creation order) */
        struct tenant *last_child;
        struct tenant *next_sibling;
        struct tenant *prev_sibling;
        unsigned nchildren;

        /* tenant_map.c: the link of the path -> tenant map (key = path). */
        struct tenant_map_node map_node;

        /* memcg_memory_event(): local counts only here, hierarchical counts
         * here and in every ancestor. */
        _Atomic uint64_t events[_MB_EVENT_NR];
        _Atomic uint64_t events_local[_MB_EVENT_NR];

        _Atomic unsigned nclients;

        /* memory.pressure: stall of the clients of the subtree (psi.h);
         * tenant_pressure_*() keep it hierarchical. */
        struct psi_group psi;

        /* Settings (from configuration or D-Bus). */
        unsigned charge_batch; /* 0: inherit the broker's ChargeBatch */
        enum mb_oom_policy oom_policy;
        enum mb_overrun_policy overrun_policy;
        bool oom_group; /* OOMGroup= (memory.oom.group) */
        struct rightsize_target pressure_target; /* MemoryPressureTarget= (daemon/core/rightsize.h) */
        unsigned pressure_target_gen; /* bumped whenever the target is set (even to the same) */
        uid_t *allow_users;
        size_t n_allow_users;
        gid_t *allow_groups;
        size_t n_allow_groups;
        char *cgroup; /* Cgroup= prefix, NULL when unset */
        struct mb_delegate delegate; /* Delegate= (files only) */
        bool from_config;  /* defined by a file (vs. created at run time) */
        /* Gone from the files but still in use: admits no new client and
         * goes with its last one, like a removed systemd unit that is still
         * active.  Written under the daemon's tree lock (for writing). */
        _Atomic bool draining;
        unsigned mark;     /* scratch of the daemon's walks under the tree lock */

        void *userdata; /* the daemon's per-tenant state (arena, clients) */
};

struct tenant_tree {
        struct tenant *root;
        unsigned ntenants; /* including the root */
        struct rstat_tree rstat;
        bool recursive_protection; /* memory_recursiveprot */
        struct tenant_map *map;    /* path -> tenant */
};

/* A tree with just the root; @capacity_pages is the root's max, @ncpus sizes
 * the rstat flush threshold.  Returns 0, -ENOMEM, or -EINVAL when
 * @capacity_pages > PAGE_COUNTER_MAX. */
int tenant_tree_new(unsigned long capacity_pages, unsigned ncpus, struct tenant_tree **ret);
/* Free the tree and every tenant (no rstat flush, no checks; stats sources
 * still attached are freed without reading their slots).  NULL is fine. */
void tenant_tree_free(struct tenant_tree *tree);

/* Syntax check of a path (docs/design.md): "/" is the root; otherwise 1 to
 * TENANT_MAX_DEPTH components of 1 to TENANT_NAME_MAX characters out of
 * [A-Za-z0-9_.-], neither "." nor "..", separated by single '/'; one
 * leading and one trailing '/' are allowed ("/a/b/" is "a/b"). */
bool tenant_path_is_valid(const char *path);

/* Normalise "/a/b/" to "a/b" (the root stays "/") into a new string.
 * -EINVAL when invalid, -ENOMEM. */
int tenant_path_normalize(const char *path, char **ret);

/* The tenant at @path (any accepted spelling, "/a/b/" finds "a/b"); NULL when
 * it does not exist or @path is invalid.  O(length of @path). */
struct tenant *tenant_lookup(struct tenant_tree *tree, const char *path);

/**
 * tenant_create - create @path, and any missing ancestors (like systemd
 * slices); new tenants have no limits, no protection and inherit the charge
 * batch.  -EEXIST if it exists (also for "/"), -EINVAL for a bad path or
 * depth > 16, -EBUSY when the deepest existing ancestor (the would-be parent
 * of the first new level) has clients attached (no internal processes),
 * -ENOMEM.  Nothing is created on error.  *@ret (may be NULL) gets the new
 * tenant.
 */
int tenant_create(struct tenant_tree *tree, const char *path, struct tenant **ret);

/* Remove a leaf without clients: -EBUSY with children, clients or pages still
 * charged, -EPERM for the root.  Its statistics are flushed into the parent
 * first (cgroup_rstat_exit()), so the ancestors' counters keep what it
 * counted; the caller holds what serialises rstat (the daemon's stats_lock)
 * as well as the tree lock.  Frees @t. */
int tenant_remove(struct tenant_tree *tree, struct tenant *t);

/* Settings: replace the admission lists with copies.  @cgroup may be NULL.
 * -ENOMEM (then nothing changed). */
int tenant_set_allow(struct tenant *t, const uid_t *uids, size_t nu, const gid_t *gids, size_t ng,
                     const char *cgroup);

/* Leaf-only rule for clients: count one more client on @t; -EBUSY when @t has
 * children.  The caller serialises against tenant_create() (tree lock). */
int tenant_attach_client(struct tenant *t);
/* One client less. */
void tenant_detach_client(struct tenant *t);

/* memcg_memory_event(): count @event in @t's local counts, and in the
 * hierarchical counts of @t and every ancestor below the root (the root
 * counts only its own events, as in the kernel).  Thread-safe. */
void tenant_memory_event(struct tenant *t, enum mb_event event);

/* Read one event count (memory.events / memory.events.local). */
uint64_t tenant_event_count(const struct tenant *t, enum mb_event event, bool local);

/* Pre-order walk of @t's subtree (@t first, children in creation order);
 * stop early when @cb returns non-zero and return that value.  @cb must not
 * add or remove tenants. */
int tenant_walk(struct tenant *t, int (*cb)(struct tenant *t, void *userdata), void *userdata);

/* Effective charge batch for the tenant: own setting, else nearest ancestor's,
 * else @broker_default. */
unsigned tenant_charge_batch(const struct tenant *t, unsigned broker_default);

/* True when neither @t nor any ancestor up to (excluding) the root has any
 * limit (max/high) or protection (min/low): the unlimited fast path. */
bool tenant_is_unlimited(const struct tenant *t);

/**
 * tenant_effective_protection - @t's effective memory.min and memory.low in
 * pages relative to the root tenant, the reclaim root of broker-wide
 * pressure: the kernel's page_counter_calculate_protection() applied
 * top-down along the path from the root to @t, as shrink_node_memcgs()
 * would, but into locals (the counters' emin/elow are not written).  A
 * child of the root gets its own min/low; deeper levels get
 * effective_protection() of their parent's result (@recursive:
 * memory_recursiveprot); no usage means no protection; the root has none.
 * The caller keeps the tree from changing shape (tree lock or main thread).
 */
void tenant_effective_protection(struct tenant *t, bool recursive, unsigned long *ret_emin, unsigned long *ret_elow);

/* ---- pressure: memory.pressure of the subtree (psi.h) ---- */

/**
 * tenant_pressure_change - a client of @t joins (@d_members = 1), leaves
 * (-1), starts to stall on memory (@d_stalled = 1: an application thread
 * waits for a charge the daemon holds) or stops (-1), counted in @t and in
 * every ancestor up to and including the root (psi_task_change() over the
 * cgroup and its ancestors), at the monotonic clock's now.  A stalled
 * client that leaves passes -1, -1.  Thread-safe (each group's own lock,
 * one at a time); @t stays valid during the call (its client holds it).
 */
void tenant_pressure_change(struct tenant *t, int d_members, int d_stalled);
/* The same at @now_usec (psi_now_usec()'s clock), for tests. */
void tenant_pressure_change_at(struct tenant *t, int d_members, int d_stalled, uint64_t now_usec);

/**
 * tenant_pressure_read - the @kind line of @t's memory.pressure now: the
 * cumulative stall of the subtree in microseconds, the stall in progress
 * included, and avg10/avg60/avg300 in hundredths of a percent (averages
 * updated first when a 2 s period has passed).  Thread-safe (main thread,
 * bus, tools); @t must stay valid (tree lock or main thread).
 */
void tenant_pressure_read(struct tenant *t, enum psi_kind kind, struct psi_reading *ret);
/* The same at @now_usec, for tests. */
void tenant_pressure_read_at(struct tenant *t, enum psi_kind kind, uint64_t now_usec, struct psi_reading *ret);
