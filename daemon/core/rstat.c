/* SPDX-License-Identifier: MIT */
/*
 * rstat.c - lazily flushed, hierarchical activity statistics.
 *
 * See rstat.h for the model.  The kernel keeps one updated tree per CPU
 * because its writers are CPUs; ours are processes writing shared memory
 * that only the daemon reads, so there is one updated tree and the per-CPU
 * dimension lives in the sources' slots, which are folded only when their
 * `updates` counter moved.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "rstat.h"

/* Values are running sums that may wrap in theory; do the arithmetic in
 * unsigned so that wrapping is defined (and UBSan stays quiet), like the
 * kernel's long counters that are only ever compared as deltas. */
static inline int64_t wrap_add(int64_t a, int64_t b) {
        return (int64_t) ((uint64_t) a + (uint64_t) b);
}

static inline int64_t wrap_sub(int64_t a, int64_t b) {
        return (int64_t) ((uint64_t) a - (uint64_t) b);
}

bool rstat_item_is_gauge(enum mb_stat_item item) {
        switch (item) {
        case MB_STAT_PAGES:
        case MB_STAT_STOCK:
        case MB_STAT_SLAB_RECLAIMABLE:
        case MB_STAT_SLAB_UNRECLAIMABLE:
                return true;
        default:
                return false;
        }
}

void rstat_tree_init(struct rstat_tree *tree, unsigned ncpus) {
        *tree = (struct rstat_tree) {
                .flush_threshold = (uint64_t) RSTAT_UPDATES_PER_CPU * (ncpus > 0 ? ncpus : 1),
        };
}

void rstat_node_init(struct rstat_node *node, struct rstat_node *parent) {
        *node = (struct rstat_node) {
                .parent = parent,
        };
        node->updated_children = node; /* empty list: terminated by ourselves */
}

bool rstat_node_is_updated(const struct rstat_node *node) {
        return node->updated_next != NULL;
}

/*
 * Link @node and every ancestor that is not linked yet into the updated
 * tree.  Mirrors the loop of cgroup_rstat_updated(): stop at the first
 * ancestor already on its parent's list, because then the whole path above
 * it is linked as well.
 */
static void rstat_link(struct rstat_node *node) {
        for (struct rstat_node *n = node; n; n = n->parent) {
                struct rstat_node *parent = n->parent;

                if (n->updated_next)
                        break;
                if (!parent) {
                        n->updated_next = n; /* a linked root */
                        break;
                }
                n->updated_next = parent->updated_children;
                parent->updated_children = n;
        }
}

void rstat_updated(struct rstat_tree *tree, struct rstat_node *node, uint64_t nr_updates) {
        /* memcg_rstat_updated(): every ancestor's stats_updates grows, so
         * memcg_vmstats_needs_flush() is a single read at any level.  The
         * kernel batches per CPU before touching the shared atomics; we are
         * single-threaded here and add directly. */
        if (nr_updates > 0)
                for (struct rstat_node *n = node; n; n = n->parent)
                        n->stats_updates += nr_updates;

        rstat_link(node);
}

bool rstat_needs_flush(const struct rstat_tree *tree, const struct rstat_node *node) {
        return node->stats_updates > tree->flush_threshold;
}

/* Count @delta sources more (or fewer) in @node's subtree, for every
 * ancestor. */
static void rstat_nsources_add(struct rstat_node *node, int delta) {
        for (struct rstat_node *n = node; n; n = n->parent)
                n->nsources_subtree += (unsigned) delta;
}

int rstat_source_attach(struct rstat_node *node, struct mb_stat_slot *slots, unsigned nslots,
                        struct rstat_source **ret) {
        _cleanup_(freep) struct rstat_source *src = NULL;
        _cleanup_(freep) int64_t *last = NULL;
        _cleanup_(freep) uint64_t *last_updates = NULL;

        if (nslots == 0 || !slots)
                return -EINVAL;

        src = calloc(1, sizeof(*src));
        last = calloc((size_t) nslots * _MB_STAT_NR, sizeof(*last));
        last_updates = calloc(nslots, sizeof(*last_updates));
        if (!src || !last || !last_updates)
                return -ENOMEM;

        src->slots = slots;
        src->nslots = nslots;
        src->walk_next = true; /* its current contents count as new updates */
        src->last = TAKE_PTR(last);
        src->last_updates = TAKE_PTR(last_updates);
        src->next = node->sources;
        node->sources = src;
        rstat_nsources_add(node, 1);

        if (ret)
                *ret = src;
        TAKE_PTR(src);
        return 0;
}

int rstat_source_attach_region(struct rstat_node *node, struct mb_stats_region *region, unsigned nslots,
                               struct rstat_source **ret) {
        struct rstat_source *src;
        int r;

        if (!region)
                return -EINVAL;
        r = rstat_source_attach(node, region->slot, nslots, &src);
        if (r < 0)
                return r;
        src->region = region;
        if (ret)
                *ret = src;
        return 0;
}

static void rstat_source_free(struct rstat_source *src) {
        if (!src)
                return;
        free(src->last);
        free(src->last_updates);
        free(src);
}

/*
 * Fold the slots of @src whose `updates` moved since the last fold: add
 * (current - last folded) of every item to @delta.  The acquire load of
 * `updates` pairs with the writer's release store in mb_stat_slot_add(), so
 * the values read are at least as new as the `updates` recorded; a value
 * written after that is folded now or at the next fold, never twice and
 * never lost, because we always fold the difference to what we last read.
 */
static void rstat_source_fold(struct rstat_source *src, int64_t delta[static _MB_STAT_NR]) {
        uint64_t seen = 0;

        for (unsigned i = 0; i < src->nslots; i++) {
                struct mb_stat_slot *slot = &src->slots[i];
                int64_t *last = &src->last[(size_t) i * _MB_STAT_NR];
                uint64_t u = __atomic_load_n(&slot->updates, __ATOMIC_ACQUIRE);

                if (u != src->last_updates[i]) {
                        for (unsigned item = 0; item < _MB_STAT_NR; item++) {
                                int64_t v = __atomic_load_n(&slot->v[item], __ATOMIC_RELAXED);

                                delta[item] = wrap_add(delta[item], wrap_sub(v, last[item]));
                                last[item] = v;
                        }
                        src->last_updates[i] = u;
                }
                seen += src->last_updates[i];
        }

        /* What we folded needs no poll any more. */
        src->seen_updates = seen;
}

/*
 * Consume the dirty word of @src's region: true when the slots need no walk
 * (the writer maintains the word and it was clear).  The exchange happens
 * before the walk, so a write that sets the word again after it is either
 * seen by this walk or leaves the word set for the next poll.  The one
 * write that can slip through is the store-buffer race documented in
 * mb_stats_abi.h; rstat_poll_source_full() (the periodic flush) catches it.
 */
/* Whether @src's writer maintains the dirty word (remembered once seen). */
static bool rstat_source_marks_dirty(struct rstat_source *src) {
        if (!src->marks_dirty && src->region && mb_stats_region_marks_dirty(src->region))
                src->marks_dirty = true;
        return src->marks_dirty;
}

static bool rstat_source_clean(struct rstat_source *src) {
        bool dirty;

        if (!rstat_source_marks_dirty(src))
                return false;
        dirty = mb_stats_region_test_and_clear_dirty(src->region);
        if (src->walk_next) {
                src->walk_next = false;
                return false;
        }
        return !dirty;
}

static uint64_t rstat_poll_walk(struct rstat_tree *tree, struct rstat_node *node, struct rstat_source *src) {
        uint64_t sum = 0, n;

        src->walk_next = false;
        for (unsigned i = 0; i < src->nslots; i++)
                sum += __atomic_load_n(&src->slots[i].updates, __ATOMIC_RELAXED);

        n = sum - src->seen_updates;
        if (n == 0)
                return 0;

        src->seen_updates = sum;
        rstat_updated(tree, node, n);
        return n;
}

uint64_t rstat_poll_source(struct rstat_tree *tree, struct rstat_node *node,
                           struct rstat_source *src) {
        if (rstat_source_clean(src))
                return 0;
        return rstat_poll_walk(tree, node, src);
}

uint64_t rstat_poll_source_full(struct rstat_tree *tree, struct rstat_node *node,
                                struct rstat_source *src) {
        /* Clear the word too: what it announced is walked now. */
        if (rstat_source_marks_dirty(src))
                (void) mb_stats_region_test_and_clear_dirty(src->region);
        return rstat_poll_walk(tree, node, src);
}

void rstat_source_detach(struct rstat_tree *tree, struct rstat_node *node, struct rstat_source *src,
                         bool retire_gauges) {
        int64_t delta[_MB_STAT_NR] = {};

        /* Unlink from the node's list first. */
        for (struct rstat_source **p = &node->sources; *p; p = &(*p)->next)
                if (*p == src) {
                        *p = src->next;
                        rstat_nsources_add(node, -1);
                        break;
                }

        rstat_source_fold(src, delta);

        if (retire_gauges)
                for (unsigned item = 0; item < _MB_STAT_NR; item++) {
                        if (!rstat_item_is_gauge(item))
                                continue;
                        for (unsigned i = 0; i < src->nslots; i++)
                                delta[item] = wrap_sub(delta[item],
                                                       src->last[(size_t) i * _MB_STAT_NR + item]);
                }

        /* The source is gone, so its last delta cannot wait for a fold at
         * flush time: account it locally now and queue it for the
         * hierarchical values like a child's delta. */
        uint64_t nr_updates = 0;
        for (unsigned item = 0; item < _MB_STAT_NR; item++) {
                node->local[item] = wrap_add(node->local[item], delta[item]);
                node->pending[item] = wrap_add(node->pending[item], delta[item]);
                /* memcg_rstat_updated() adds abs(val): the last delta
                 * weighs what it moved, counters included. */
                nr_updates += delta[item] < 0 ? 0 - (uint64_t) delta[item] : (uint64_t) delta[item];
                /* memcg_rstat_updated() weighs an update by abs(val): a
                 * departing writer takes all its pages, stock and slab at
                 * once, so weigh it past the threshold and let the next read
                 * of this node or an ancestor flush it instead of serving
                 * totals that still include the departed client. */
                if (rstat_item_is_gauge(item) && delta[item] != 0)
                        nr_updates = MB_MAX(nr_updates, tree->flush_threshold + 1);
        }
        rstat_updated(tree, node, MB_MAX(nr_updates, (uint64_t) 1));

        rstat_source_free(src);
}

/*
 * mem_cgroup_css_rstat_flush() for one node: fold its sources into the
 * local values, add them plus what the children pushed (pending) to the
 * hierarchical values and push the sum on to the parent.
 */
static void rstat_flush_node(struct rstat_node *node) {
        int64_t own[_MB_STAT_NR] = {};

        for (struct rstat_source *src = node->sources; src; src = src->next)
                rstat_source_fold(src, own);

        for (unsigned item = 0; item < _MB_STAT_NR; item++) {
                int64_t delta = wrap_add(own[item], node->pending[item]);

                node->pending[item] = 0;
                node->local[item] = wrap_add(node->local[item], own[item]);
                if (delta == 0)
                        continue;
                node->value[item] = wrap_add(node->value[item], delta);
                if (node->parent)
                        node->parent->pending[item] = wrap_add(node->parent->pending[item], delta);
        }

        /* Like the kernel, the flushed node's count starts over; the
         * ancestors keep theirs until they are flushed themselves, because
         * their hierarchical values do not include these deltas yet. */
        node->stats_updates = 0;
}

/*
 * cgroup_rstat_updated_list(): take @root's updated subtree off the updated
 * tree and return it as a list (through flush_next) in which every node
 * comes after all of its descendants.  A depth-first walk with an explicit
 * stack (no recursion: the depth is the caller's business); each popped node
 * is prepended to the result, so the result is the reverse of a pre-order.
 * The same flush_next field serves as stack link and result link because a
 * node leaves the stack before it joins the result.
 */
static struct rstat_node *rstat_updated_list(struct rstat_node *root) {
        struct rstat_node *parent = root->parent, *stack, *head = NULL;

        if (!root->updated_next)
                return NULL;

        /* Unlink @root from its parent's singly linked list. */
        if (parent) {
                struct rstat_node **p = &parent->updated_children;

                while (*p != root && *p != parent)
                        p = &(*p)->updated_next;
                if (*p == root)
                        *p = root->updated_next;
        }
        root->updated_next = NULL;

        root->flush_next = NULL;
        stack = root;
        while (stack) {
                struct rstat_node *n = stack, *c, *next;

                stack = n->flush_next;

                for (c = n->updated_children; c != n; c = next) {
                        next = c->updated_next;
                        c->updated_next = NULL;
                        c->flush_next = stack;
                        stack = c;
                }
                n->updated_children = n;

                n->flush_next = head;
                head = n;
        }

        return head;
}

uint64_t rstat_flush(struct rstat_tree *tree, struct rstat_node *node) {
        uint64_t visited = 0;

        for (struct rstat_node *n = rstat_updated_list(node), *next; n; n = next) {
                next = n->flush_next;
                n->flush_next = NULL;
                rstat_flush_node(n);
                visited++;
        }

        if (visited > 0) {
                tree->flushes++;
                tree->flushed_nodes += visited;
        }
        return visited;
}

uint64_t rstat_flush_if_needed(struct rstat_tree *tree, struct rstat_node *node) {
        if (!rstat_needs_flush(tree, node))
                return 0;
        return rstat_flush(tree, node);
}

void rstat_node_destroy(struct rstat_tree *tree, struct rstat_node *node) {
        /* Sources may hold writes nobody polled yet: fold them too. */
        if (node->sources)
                rstat_link(node);
        rstat_flush(tree, node);

        /* What we pushed to the parent's pending must reach the
         * hierarchical values at the next flush from above. */
        if (node->parent)
                for (unsigned item = 0; item < _MB_STAT_NR; item++)
                        if (node->parent->pending[item] != 0) {
                                rstat_link(node->parent);
                                break;
                        }

        /* The sources leave with the node: the ancestors count them no
         * more (rstat_node_forget() leaves the counts alone, for a whole
         * tree torn down). */
        for (struct rstat_source *src = node->sources; src; src = src->next)
                rstat_nsources_add(node, -1);
        rstat_node_forget(node);
}

void rstat_node_forget(struct rstat_node *node) {
        struct rstat_source *src;

        while ((src = node->sources)) {
                node->sources = src->next;
                rstat_source_free(src);
        }
}
