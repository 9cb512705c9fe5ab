/* SPDX-License-Identifier: MIT */
/*
 * rstat.h - lazily flushed, hierarchical activity statistics.
 *
 * Modelled on the kernel's kernel/cgroup/rstat.c and the memcg users of it
 * (mem_cgroup_css_rstat_flush(), memcg_rstat_updated(),
 * mem_cgroup_flush_stats()):
 *
 *  - Writers count into per-CPU slots (struct mb_stat_slot, common/
 *    mb_stats_abi.h).  A node may have several *sources* of slots: one per
 *    connected client (its shared stats region) and one for the daemon's own
 *    counters.  Sources are attached/detached by the daemon.
 *  - rstat_updated() is cgroup_rstat_updated(): it links the node (and the
 *    ancestors that are not linked yet) into the "updated" tree, so a flush
 *    visits only updated nodes.  It also adds to a pending-updates count that
 *    propagates to every ancestor (memcg_rstat_updated()'s stats_updates,
 *    flush batching), so a reader can ask rstat_needs_flush() without walking.
 *  - rstat_flush(node) is cgroup_rstat_flush() for a subtree: it pops the
 *    updated subtree of @node so that every node comes after all of its
 *    descendants (post-order), folds every source slot whose `updates` moved
 *    since the last fold (delta against the last folded value), adds the
 *    delta to the node's local value, adds it plus the pending deltas from
 *    children to the hierarchical value, and pushes the sum to the parent's
 *    pending deltas (mem_cgroup_css_rstat_flush()).  Local
 *    (non-hierarchical) values are maintained counters (memcg local stats as counters), so reading
 *    them never sums per-CPU slots.
 *  - rstat_poll_source() lets the daemon notice that a client wrote its
 *    region (sum of slot `updates` moved) and mark the node updated.  For a
 *    source attached with its region header (rstat_source_attach_region())
 *    whose writer maintains the region's dirty word (mb_stats_abi.h), a
 *    poll reads (and clears) that one word and walks the slots only when it
 *    was set: O(1) per unchanged source, independent of the CPU count.
 *    Other sources cost O(slots) per poll.  rstat_poll_source_full() walks
 *    every slot regardless; the daemon's periodic flush uses it, which is
 *    what keeps the staleness bound despite the dirty word's tolerated
 *    store-buffer race (see mb_stats_abi.h).  Tenants without clients cost
 *    nothing: they have no sources, and `nsources_subtree` lets a caller
 *    skip whole subtrees without any.
 *
 * What a reader sees: after rstat_flush(N), N's `value` (hierarchical) and
 * the `local` values of every node in N's subtree include every slot write
 * that happened before the flush.  N's ancestors receive N's deltas in their
 * `pending` only; their `value` catches up when a flush of one of them runs
 * (their stats_updates keep counting N's updates until then, exactly like
 * the kernel's per-memcg stats_updates).  The root's values are at most one
 * periodic flush interval stale.
 *
 * Cost: rstat_updated() is O(depth); rstat_flush(N) is O(updated nodes in
 * N's subtree × their sources × slots), plus O(updated siblings of N) to
 * unlink N from its parent's list; nodes that were not updated are never
 * touched (rstat flush batching: "stat of 1 tenant among 10,000 with 1% changed").
 *
 * Threading: the updated tree, pending counts and values are owned by one
 * thread (the daemon's main loop, or whoever holds the daemon's stats_lock).
 * Slots may be written concurrently by other threads and processes; see
 * mb_stats_abi.h for the slot protocol.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include "mb_stats_abi.h"

/* MEMCG_CHARGE_BATCH: the default flush threshold is this many updates per
 * CPU (memcg_vmstats_needs_flush()). */
#define RSTAT_UPDATES_PER_CPU 64U

struct rstat_source {
        struct mb_stat_slot *slots; /* nslots slots, not owned */
        unsigned nslots;
        /* The header of the region @slots belong to, mapped writable (the
         * poll clears its dirty word); NULL when attached without one (then
         * every poll walks the slots).  Not owned. */
        struct mb_stats_region *region;
        bool marks_dirty;       /* region's writer flag seen set (sticky: a
                                 * writer never takes the promise back) */
        bool walk_next;         /* the next poll walks the slots whatever the
                                 * dirty word says (a new source) */
        int64_t *last;          /* nslots * _MB_STAT_NR last folded values */
        uint64_t *last_updates; /* nslots: slot.updates at the last fold */
        uint64_t seen_updates;  /* sum of slot.updates at the last poll/fold */
        struct rstat_source *next;
};

struct rstat_node {
        struct rstat_node *parent;
        struct rstat_source *sources;

        int64_t value[_MB_STAT_NR];   /* hierarchical */
        int64_t local[_MB_STAT_NR];   /* this node only */
        /* Deltas not yet folded into `value` here: pushed by children's
         * flushes, and by sources detached from this node. */
        int64_t pending[_MB_STAT_NR];

        /* Updated tree (cgroup_rstat_cpu's updated_children/updated_next,
         * but one tree, not one per CPU: slots are folded per source).
         * As in the kernel, a list of updated children is terminated by the
         * parent itself, so `updated_children == self` is the empty list and
         * `updated_next != NULL` means "linked"; a linked root points
         * updated_next at itself. */
        struct rstat_node *updated_children; /* list of updated children */
        struct rstat_node *updated_next;     /* NULL: not on parent's list */
        struct rstat_node *flush_next;       /* scratch list of one flush */

        uint64_t stats_updates; /* pending updates in this subtree */

        /* Sources attached to this node and its descendants (attach, detach
         * and destroy keep it; O(depth) each): a poller skips subtrees where
         * it is 0. */
        unsigned nsources_subtree;
};

struct rstat_tree {
        uint64_t flush_threshold; /* rstat_needs_flush() above this; default
                                   * MEMCG_CHARGE_BATCH * ncpus */
        uint64_t flushes;         /* rstat_flush() calls that did work */
        uint64_t flushed_nodes;   /* nodes visited by flushes, cumulative */
};

/* Initialise @tree: no flushes yet, threshold RSTAT_UPDATES_PER_CPU * @ncpus
 * (@ncpus 0 counts as 1).  The caller may change flush_threshold. */
void rstat_tree_init(struct rstat_tree *tree, unsigned ncpus);

/* Initialise a node under @parent (NULL for the root): all values 0, not
 * updated, no sources. */
void rstat_node_init(struct rstat_node *node, struct rstat_node *parent);

/* Fold and flush @node a last time (its deltas reach the parent's pending,
 * the parent stays marked updated), detach it from the updated tree and drop
 * all its sources (their gauges are left as they were folded, use
 * rstat_source_detach() first to retire them).  The node must have no
 * children: the caller removes leaves only (the cgroup rule), so nothing of
 * what the node counted is lost for its ancestors (cgroup_rstat_exit()). */
void rstat_node_destroy(struct rstat_tree *tree, struct rstat_node *node);

/* Free every source of @node without reading its slots (they may be
 * unmapped already) and without touching the tree: for tearing a whole tree
 * down.  The node must not be used for statistics afterwards. */
void rstat_node_forget(struct rstat_node *node);

/* Attach a source of @nslots slots at @slots.  Its current slot contents
 * count as new updates: the first poll/flush folds them (a region that
 * survived a daemon restart is accounted in full).  The caller keeps @slots
 * mapped until rstat_source_detach().  *@ret may be NULL.
 * Returns 0, -EINVAL for @nslots 0, or -ENOMEM. */
int rstat_source_attach(struct rstat_node *node, struct mb_stat_slot *slots, unsigned nslots,
                        struct rstat_source **ret);

/* rstat_source_attach() for the @nslots slots of @region (@nslots is the
 * caller's figure: the header is writable by the writer and not trusted),
 * remembering the header: when its writer sets MB_STATS_WRITER_MARKS_DIRTY,
 * rstat_poll_source() walks the slots only when the region's dirty word was
 * set.  @region must be mapped readable and writable.  Same returns. */
int rstat_source_attach_region(struct rstat_node *node, struct mb_stats_region *region, unsigned nslots,
                               struct rstat_source **ret);

/* Fold @src a last time and detach it.  With @retire_gauges, the gauge items
 * (pages, stock, slab_*) it contributed are subtracted (the writer is gone,
 * its memory was returned), counters (pgalloc, ...) stay.  The node is marked
 * updated so that the next flush carries the change up.  Frees @src. */
void rstat_source_detach(struct rstat_tree *tree, struct rstat_node *node, struct rstat_source *src,
                         bool retire_gauges);

/* cgroup_rstat_updated() + memcg_rstat_updated(): mark @node updated with
 * @nr_updates pending updates (added to @node and every ancestor).  O(depth);
 * cheap when already linked.  @nr_updates may be 0 (link only). */
void rstat_updated(struct rstat_tree *tree, struct rstat_node *node, uint64_t nr_updates);

/* Notice writes to @src since the last poll; marks @node updated when there
 * were any.  Returns the number of new updates.  When @src's region writer
 * maintains the dirty word, the word is read, and only when it was set
 * exchanged with 0 and the slots walked: O(1) for an unchanged source; a slot write
 * caught in the dirty word's store-buffer race (mb_stats_abi.h) may be
 * missed until the next write or rstat_poll_source_full().  Otherwise (no
 * region, writer without the flag, a fresh source) O(@src->nslots). */
uint64_t rstat_poll_source(struct rstat_tree *tree, struct rstat_node *node,
                           struct rstat_source *src);

/* rstat_poll_source() that walks every slot whatever the dirty word says
 * (and clears the word): sees every write that is visible in memory.  For
 * the periodic flush, which bounds staleness.  O(@src->nslots). */
uint64_t rstat_poll_source_full(struct rstat_tree *tree, struct rstat_node *node,
                                struct rstat_source *src);

/* memcg_vmstats_needs_flush(): more than tree->flush_threshold updates are
 * pending in @node's subtree.  O(1). */
bool rstat_needs_flush(const struct rstat_tree *tree, const struct rstat_node *node);

/* True when @node is linked in the updated tree (something in its subtree,
 * or a flushed child's delta, waits for a flush). */
bool rstat_node_is_updated(const struct rstat_node *node);

/* cgroup_rstat_flush(): flush the updated part of @node's subtree.  Returns
 * the number of nodes visited (0 when nothing was updated) and adds to
 * tree->flushes / tree->flushed_nodes.  rstat_flush(root) is the periodic
 * flush. */
uint64_t rstat_flush(struct rstat_tree *tree, struct rstat_node *node);

/* Flush only when rstat_needs_flush() (mem_cgroup_flush_stats()).  Returns
 * the number of nodes visited. */
uint64_t rstat_flush_if_needed(struct rstat_tree *tree, struct rstat_node *node);

/* True for the gauge items (pages, stock, slab_*), false for counters. */
bool rstat_item_is_gauge(enum mb_stat_item item);
