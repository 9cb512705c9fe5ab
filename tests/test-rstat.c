/* SPDX-License-Identifier: MIT */
/*
 * test-rstat.c - daemon/core/rstat.c: flushes visit only updated nodes,
 * local and hierarchical values stay exact, pending counts propagate, a
 * poll walks a region's slots only when its dirty word says so.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rstat.h"

#define NCPUS 2

/* A node with one source of NCPUS slots, as a client region would be. */
struct tnode {
        struct rstat_node node;
        struct mb_stat_slot slots[NCPUS];
        struct rstat_source *src;
};

static void tnode_init(struct tnode *t, struct tnode *parent) {
        memset(t, 0, sizeof(*t));
        rstat_node_init(&t->node, parent ? &parent->node : NULL);
        ck_assert_int_eq(rstat_source_attach(&t->node, t->slots, NCPUS, &t->src), 0);
}

/* Write like a client, then let the daemon notice it. */
static void tnode_write(struct rstat_tree *tree, struct tnode *t, unsigned cpu, enum mb_stat_item item,
                        int64_t delta) {
        mb_stat_slot_add(&t->slots[cpu], item, delta);
        rstat_poll_source(tree, &t->node, t->src);
}

static void tnode_done(struct rstat_tree *tree, struct tnode *t) {
        rstat_node_destroy(tree, &t->node);
}

START_TEST(test_flush_visits_only_updated_nodes) {
        /*        root
         *       /    \
         *      a      b
         *     / \      \
         *   a1   a2     b1          only a1 is written */
        struct rstat_tree tree;
        struct tnode root, a, b, a1, a2, b1;

        rstat_tree_init(&tree, NCPUS);
        tnode_init(&root, NULL);
        tnode_init(&a, &root);
        tnode_init(&b, &root);
        tnode_init(&a1, &a);
        tnode_init(&a2, &a);
        tnode_init(&b1, &b);

        ck_assert_uint_eq(rstat_flush(&tree, &root.node), 0);
        ck_assert_uint_eq(tree.flushes, 0);
        ck_assert_uint_eq(tree.flushed_nodes, 0);

        tnode_write(&tree, &a1, 0, MB_STAT_PAGES, 4);
        ck_assert(rstat_node_is_updated(&a1.node));
        ck_assert(rstat_node_is_updated(&a.node));
        ck_assert(rstat_node_is_updated(&root.node));
        ck_assert(!rstat_node_is_updated(&a2.node));
        ck_assert(!rstat_node_is_updated(&b.node));

        /* a1, a and root: three visits, not six. */
        ck_assert_uint_eq(rstat_flush(&tree, &root.node), 3);
        ck_assert_uint_eq(tree.flushes, 1);
        ck_assert_uint_eq(tree.flushed_nodes, 3);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], 4);
        ck_assert(!rstat_node_is_updated(&root.node));

        /* Nothing pending: a flush does no work and is not counted. */
        ck_assert_uint_eq(rstat_flush(&tree, &root.node), 0);
        ck_assert_uint_eq(tree.flushes, 1);
        ck_assert_uint_eq(tree.flushed_nodes, 3);

        /* Two leaves in different branches: the subtree of b sees only b1
         * and b; the rest waits for the root's flush. */
        tnode_write(&tree, &a2, 1, MB_STAT_PGALLOC, 1);
        tnode_write(&tree, &b1, 0, MB_STAT_PGALLOC, 1);
        ck_assert_uint_eq(rstat_flush(&tree, &b.node), 2);
        ck_assert_uint_eq(rstat_flush(&tree, &root.node), 3); /* a2, a, root */
        ck_assert_uint_eq(tree.flushes, 3);
        ck_assert_uint_eq(tree.flushed_nodes, 8);
        ck_assert_int_eq(root.node.value[MB_STAT_PGALLOC], 2);

        tnode_done(&tree, &b1);
        tnode_done(&tree, &a2);
        tnode_done(&tree, &a1);
        tnode_done(&tree, &b);
        tnode_done(&tree, &a);
        tnode_done(&tree, &root);
}
END_TEST

START_TEST(test_local_and_hierarchical_values) {
        /*        root
         *       /    \
         *      m      o
         *     / \
         *   l1   l2        m has a source of its own too */
        struct rstat_tree tree;
        struct tnode root, m, o, l1, l2;

        rstat_tree_init(&tree, NCPUS);
        tnode_init(&root, NULL);
        tnode_init(&m, &root);
        tnode_init(&o, &root);
        tnode_init(&l1, &m);
        tnode_init(&l2, &m);

        tnode_write(&tree, &l1, 0, MB_STAT_PAGES, 5);
        tnode_write(&tree, &l2, 1, MB_STAT_PAGES, 7);
        tnode_write(&tree, &m, 0, MB_STAT_PAGES, 3);
        tnode_write(&tree, &o, 1, MB_STAT_PAGES, 11);

        /* Flush the middle subtree only. */
        ck_assert_uint_eq(rstat_flush(&tree, &m.node), 3);
        ck_assert_int_eq(l1.node.value[MB_STAT_PAGES], 5);
        ck_assert_int_eq(l1.node.local[MB_STAT_PAGES], 5);
        ck_assert_int_eq(l2.node.value[MB_STAT_PAGES], 7);
        ck_assert_int_eq(l2.node.local[MB_STAT_PAGES], 7);
        ck_assert_int_eq(m.node.value[MB_STAT_PAGES], 15);
        ck_assert_int_eq(m.node.local[MB_STAT_PAGES], 3);
        /* Above and beside the flushed subtree nothing was folded yet; the
         * root holds m's delta as pending. */
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], 0);
        ck_assert_int_eq(root.node.pending[MB_STAT_PAGES], 15);
        ck_assert_int_eq(o.node.value[MB_STAT_PAGES], 0);
        ck_assert_int_eq(o.node.local[MB_STAT_PAGES], 0);

        /* The root's flush visits root and o, not m's subtree again. */
        ck_assert_uint_eq(rstat_flush(&tree, &root.node), 2);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], 26);
        ck_assert_int_eq(root.node.local[MB_STAT_PAGES], 0);
        ck_assert_int_eq(root.node.pending[MB_STAT_PAGES], 0);
        ck_assert_int_eq(o.node.value[MB_STAT_PAGES], 11);
        ck_assert_int_eq(o.node.local[MB_STAT_PAGES], 11);

        /* A deep update, flushed at the leaf, then at the root. */
        tnode_write(&tree, &l1, 1, MB_STAT_PAGES, -2);
        tnode_write(&tree, &l1, 0, MB_STAT_PGFREE, 2);
        ck_assert_uint_eq(rstat_flush(&tree, &l1.node), 1);
        ck_assert_int_eq(l1.node.value[MB_STAT_PAGES], 3);
        ck_assert_int_eq(l1.node.value[MB_STAT_PGFREE], 2);
        ck_assert_int_eq(m.node.value[MB_STAT_PAGES], 15);
        ck_assert_uint_eq(rstat_flush(&tree, &root.node), 2); /* m, root */
        ck_assert_int_eq(m.node.value[MB_STAT_PAGES], 13);
        ck_assert_int_eq(m.node.local[MB_STAT_PAGES], 3);
        ck_assert_int_eq(m.node.value[MB_STAT_PGFREE], 2);
        ck_assert_int_eq(m.node.local[MB_STAT_PGFREE], 0);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], 24);
        ck_assert_int_eq(root.node.value[MB_STAT_PGFREE], 2);

        /* Hierarchical = local + children's hierarchical, everywhere. */
        ck_assert_int_eq(m.node.value[MB_STAT_PAGES],
                         m.node.local[MB_STAT_PAGES] + l1.node.value[MB_STAT_PAGES] + l2.node.value[MB_STAT_PAGES]);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES],
                         root.node.local[MB_STAT_PAGES] + m.node.value[MB_STAT_PAGES] + o.node.value[MB_STAT_PAGES]);

        tnode_done(&tree, &l2);
        tnode_done(&tree, &l1);
        tnode_done(&tree, &o);
        tnode_done(&tree, &m);
        tnode_done(&tree, &root);
}
END_TEST

START_TEST(test_slots_fold_as_deltas) {
        /* Pages allocated on CPU 0 and freed on CPU 1: slot values of
         * opposite sign sum to the truth; a slot that did not move is not
         * read again and does not count twice. */
        struct rstat_tree tree;
        struct tnode root, a;

        rstat_tree_init(&tree, NCPUS);
        tnode_init(&root, NULL);
        tnode_init(&a, &root);

        tnode_write(&tree, &a, 0, MB_STAT_PAGES, 10);
        tnode_write(&tree, &a, 1, MB_STAT_PAGES, -4);
        rstat_flush(&tree, &root.node);
        ck_assert_int_eq(a.node.local[MB_STAT_PAGES], 6);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], 6);

        tnode_write(&tree, &a, 1, MB_STAT_PAGES, -1);
        rstat_flush(&tree, &root.node);
        ck_assert_int_eq(a.node.local[MB_STAT_PAGES], 5);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], 5);

        /* A write that nobody polled is still folded when the node is
         * flushed for another reason. */
        mb_stat_slot_add(&a.slots[0], MB_STAT_STOCK, 64);
        rstat_updated(&tree, &a.node, 1);
        rstat_flush(&tree, &root.node);
        ck_assert_int_eq(root.node.value[MB_STAT_STOCK], 64);
        /* ...and the next poll does not report it again. */
        ck_assert_uint_eq(rstat_poll_source(&tree, &a.node, a.src), 0);

        tnode_done(&tree, &a);
        tnode_done(&tree, &root);
}
END_TEST

START_TEST(test_pending_updates_propagate) {
        struct rstat_tree tree;
        struct tnode root, m, o, l;

        rstat_tree_init(&tree, NCPUS);
        ck_assert_uint_eq(tree.flush_threshold, RSTAT_UPDATES_PER_CPU * NCPUS);
        tnode_init(&root, NULL);
        tnode_init(&m, &root);
        tnode_init(&o, &root);
        tnode_init(&l, &m);

        rstat_updated(&tree, &l.node, tree.flush_threshold);
        ck_assert_uint_eq(l.node.stats_updates, tree.flush_threshold);
        ck_assert_uint_eq(m.node.stats_updates, tree.flush_threshold);
        ck_assert_uint_eq(root.node.stats_updates, tree.flush_threshold);
        ck_assert_uint_eq(o.node.stats_updates, 0);
        /* memcg_vmstats_needs_flush() is "more than": not yet. */
        ck_assert(!rstat_needs_flush(&tree, &l.node));
        ck_assert(!rstat_needs_flush(&tree, &root.node));
        ck_assert_uint_eq(rstat_flush_if_needed(&tree, &root.node), 0);

        rstat_updated(&tree, &l.node, 1);
        ck_assert(rstat_needs_flush(&tree, &l.node));
        ck_assert(rstat_needs_flush(&tree, &m.node));
        ck_assert(rstat_needs_flush(&tree, &root.node));
        ck_assert(!rstat_needs_flush(&tree, &o.node));

        /* Updates of a sibling add up at the common ancestors only. */
        rstat_updated(&tree, &o.node, 5);
        ck_assert_uint_eq(o.node.stats_updates, 5);
        ck_assert_uint_eq(m.node.stats_updates, tree.flush_threshold + 1);
        ck_assert_uint_eq(root.node.stats_updates, tree.flush_threshold + 6);

        /* Flushing m resets m's subtree; the root still has them pending
         * because its hierarchical values do not include them yet. */
        ck_assert_uint_eq(rstat_flush_if_needed(&tree, &m.node), 2);
        ck_assert_uint_eq(l.node.stats_updates, 0);
        ck_assert_uint_eq(m.node.stats_updates, 0);
        ck_assert(!rstat_needs_flush(&tree, &m.node));
        ck_assert(rstat_needs_flush(&tree, &root.node));
        ck_assert_uint_eq(rstat_flush_if_needed(&tree, &m.node), 0);

        ck_assert_uint_eq(rstat_flush_if_needed(&tree, &root.node), 2); /* o, root */
        ck_assert_uint_eq(root.node.stats_updates, 0);
        ck_assert_uint_eq(o.node.stats_updates, 0);
        ck_assert(!rstat_needs_flush(&tree, &root.node));

        /* A custom threshold. */
        tree.flush_threshold = 0;
        ck_assert(!rstat_needs_flush(&tree, &l.node));
        tnode_write(&tree, &l, 0, MB_STAT_PGALLOC, 1);
        ck_assert(rstat_needs_flush(&tree, &l.node));

        tnode_done(&tree, &l);
        tnode_done(&tree, &o);
        tnode_done(&tree, &m);
        tnode_done(&tree, &root);
}
END_TEST

START_TEST(test_poll_source) {
        struct rstat_tree tree;
        struct tnode root, a;

        rstat_tree_init(&tree, NCPUS);
        tnode_init(&root, NULL);
        tnode_init(&a, &root);

        ck_assert_uint_eq(rstat_poll_source(&tree, &a.node, a.src), 0);
        ck_assert(!rstat_node_is_updated(&a.node));

        mb_stat_slot_add(&a.slots[0], MB_STAT_PGALLOC, 1);
        mb_stat_slot_add(&a.slots[1], MB_STAT_PGALLOC, 1);
        mb_stat_slot_add(&a.slots[1], MB_STAT_PAGES, 2);
        ck_assert_uint_eq(rstat_poll_source(&tree, &a.node, a.src), 3);
        ck_assert(rstat_node_is_updated(&a.node));
        ck_assert_uint_eq(a.node.stats_updates, 3);
        ck_assert_uint_eq(root.node.stats_updates, 3);
        ck_assert_uint_eq(rstat_poll_source(&tree, &a.node, a.src), 0);

        rstat_flush(&tree, &root.node);
        ck_assert_int_eq(root.node.value[MB_STAT_PGALLOC], 2);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], 2);

        tnode_done(&tree, &a);
        tnode_done(&tree, &root);
}
END_TEST

START_TEST(test_source_attach_counts_existing_contents) {
        /* A region that already holds figures (a client that survived a
         * daemon restart) is accounted in full. */
        struct rstat_tree tree;
        struct tnode root;
        struct mb_stat_slot slots[NCPUS] = {};
        struct rstat_source *src;

        rstat_tree_init(&tree, NCPUS);
        tnode_init(&root, NULL);
        mb_stat_slot_add(&slots[1], MB_STAT_PAGES, 9);

        ck_assert_int_eq(rstat_source_attach(&root.node, slots, 0, &src), -EINVAL);
        ck_assert_int_eq(rstat_source_attach(&root.node, slots, NCPUS, &src), 0);
        ck_assert_uint_eq(rstat_poll_source(&tree, &root.node, src), 1);
        rstat_flush(&tree, &root.node);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], 9);

        rstat_source_detach(&tree, &root.node, src, true);
        rstat_flush(&tree, &root.node);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], 0);
        tnode_done(&tree, &root);
}
END_TEST

/* A departing writer's counters weigh what they moved (memcg_rstat_updated()
 * adds abs(val)): 256 allocations past the threshold make the next read
 * flush, so a leaf's hierarchical pgalloc does not lag its local one. */
START_TEST(test_source_detach_weighs_counters) {
        struct rstat_tree tree;
        struct tnode root, a;
        struct mb_stat_slot s[NCPUS] = {};
        struct rstat_source *src;

        rstat_tree_init(&tree, NCPUS);
        tnode_init(&root, NULL);
        tnode_init(&a, &root);
        ck_assert_int_eq(rstat_source_attach(&a.node, s, NCPUS, &src), 0);
        ck_assert_uint_lt(tree.flush_threshold, 256);

        mb_stat_slot_add(&s[0], MB_STAT_PGALLOC, 256);
        ck_assert(!rstat_needs_flush(&tree, &root.node));
        rstat_source_detach(&tree, &a.node, src, false);
        ck_assert(rstat_needs_flush(&tree, &root.node));
        ck_assert_int_eq(rstat_flush_if_needed(&tree, &root.node) > 0, 1);
        ck_assert_int_eq(root.node.value[MB_STAT_PGALLOC], 256);
        ck_assert_int_eq(a.node.value[MB_STAT_PGALLOC], a.node.local[MB_STAT_PGALLOC]);

        tnode_done(&tree, &a);
        tnode_done(&tree, &root);
}
END_TEST

START_TEST(test_source_detach) {
        struct rstat_tree tree;
        struct tnode root, a;
        struct mb_stat_slot s1[NCPUS] = {}, s2[NCPUS] = {};
        struct rstat_source *src1, *src2;

        rstat_tree_init(&tree, NCPUS);
        tnode_init(&root, NULL);
        tnode_init(&a, &root);
        ck_assert_int_eq(rstat_source_attach(&a.node, s1, NCPUS, &src1), 0);
        ck_assert_int_eq(rstat_source_attach(&a.node, s2, NCPUS, &src2), 0);

        /* Client 1 holds 10 pages and 4 stocked, client 2 holds 3. */
        mb_stat_slot_add(&s1[0], MB_STAT_PAGES, 12);
        mb_stat_slot_add(&s1[1], MB_STAT_PAGES, -2);
        mb_stat_slot_add(&s1[0], MB_STAT_STOCK, 4);
        mb_stat_slot_add(&s1[0], MB_STAT_PGALLOC, 12);
        mb_stat_slot_add(&s1[1], MB_STAT_PGFREE, 2);
        mb_stat_slot_add(&s2[1], MB_STAT_PAGES, 3);
        mb_stat_slot_add(&s2[1], MB_STAT_PGALLOC, 3);
        rstat_poll_source(&tree, &a.node, src1);
        rstat_poll_source(&tree, &a.node, src2);
        rstat_flush(&tree, &root.node);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], 13);
        ck_assert_int_eq(root.node.value[MB_STAT_STOCK], 4);

        /* Client 1 frees one more page without anyone polling, then dies:
         * its last writes are folded, its gauges retired, its counters
         * stay. */
        mb_stat_slot_add(&s1[1], MB_STAT_PAGES, -1);
        mb_stat_slot_add(&s1[1], MB_STAT_PGFREE, 1);
        ck_assert(!rstat_needs_flush(&tree, &root.node));
        rstat_source_detach(&tree, &a.node, src1, true);
        ck_assert(rstat_node_is_updated(&a.node));
        /* Its pages left at once: a read of any ancestor must flush them
         * rather than serve totals that still include the departed client. */
        ck_assert(rstat_needs_flush(&tree, &a.node));
        ck_assert(rstat_needs_flush(&tree, &root.node));
        ck_assert_int_eq(a.node.local[MB_STAT_PAGES], 3);
        ck_assert_int_eq(a.node.local[MB_STAT_STOCK], 0);
        ck_assert_int_eq(a.node.local[MB_STAT_PGALLOC], 15);
        ck_assert_int_eq(a.node.local[MB_STAT_PGFREE], 3);
        rstat_flush(&tree, &root.node);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], 3);
        ck_assert_int_eq(root.node.value[MB_STAT_STOCK], 0);
        ck_assert_int_eq(root.node.value[MB_STAT_PGALLOC], 15);
        ck_assert_int_eq(root.node.value[MB_STAT_PGFREE], 3);

        /* Without retire_gauges the gauges stay as last folded. */
        mb_stat_slot_add(&s2[0], MB_STAT_PAGES, 2);
        rstat_source_detach(&tree, &a.node, src2, false);
        rstat_flush(&tree, &root.node);
        ck_assert_int_eq(a.node.local[MB_STAT_PAGES], 5);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], 5);
        ck_assert_ptr_eq(a.node.sources, a.src);

        tnode_done(&tree, &a);
        tnode_done(&tree, &root);
}
END_TEST

START_TEST(test_node_destroy_keeps_counts_in_ancestors) {
        struct rstat_tree tree;
        struct tnode root, a, b;

        rstat_tree_init(&tree, NCPUS);
        tnode_init(&root, NULL);
        tnode_init(&a, &root);
        tnode_init(&b, &a);

        tnode_write(&tree, &b, 0, MB_STAT_PGALLOC, 7);
        rstat_flush(&tree, &b.node); /* b's delta waits in a's pending */
        mb_stat_slot_add(&b.slots[1], MB_STAT_PGALLOC, 1); /* never polled */
        tnode_done(&tree, &b);

        ck_assert(rstat_node_is_updated(&a.node));
        rstat_flush(&tree, &root.node);
        ck_assert_int_eq(a.node.value[MB_STAT_PGALLOC], 8);
        ck_assert_int_eq(a.node.local[MB_STAT_PGALLOC], 0);
        ck_assert_int_eq(root.node.value[MB_STAT_PGALLOC], 8);

        tnode_done(&tree, &a);
        tnode_done(&tree, &root);
}
END_TEST

/* ---- the region's dirty word (mb_stats_abi.h) ---- */

/* A stats region of NCPUS slots, as the daemon creates it for a client. */
static struct mb_stats_region *region_new(void) {
        size_t bytes = (size_t) mb_stats_region_bytes(NCPUS);
        struct mb_stats_region *r = aligned_alloc(64, bytes);

        ck_assert_ptr_nonnull(r);
        memset(r, 0, bytes);
        r->magic = MB_STATS_MAGIC;
        r->version = MB_STATS_VERSION;
        r->nslots = NCPUS;
        r->nitems = _MB_STAT_NR;
        return r;
}

/* A node with one region source, polled once so that the fresh source's
 * first walk is behind us. */
static struct rstat_source *region_attach(struct rstat_tree *tree, struct rstat_node *node,
                                          struct mb_stats_region *r) {
        struct rstat_source *src;

        ck_assert_int_eq(rstat_source_attach_region(node, r, NCPUS, &src), 0);
        ck_assert_ptr_eq(src->slots, r->slot);
        (void) rstat_poll_source(tree, node, src);
        rstat_flush(tree, node);
        return src;
}

START_TEST(test_region_layout) {
        struct mb_stats_region *r = region_new();

        ck_assert_uint_eq(sizeof(struct mb_stats_region), 128);
        ck_assert_uint_eq((uintptr_t) &r->dirty - (uintptr_t) r, 64);
        ck_assert_uint_eq((uintptr_t) &r->writer_flags - (uintptr_t) r, 16);
        ck_assert_ptr_eq(mb_stats_region_of_slot(&r->slot[0], 0), r);
        ck_assert_ptr_eq(mb_stats_region_of_slot(&r->slot[NCPUS - 1], NCPUS - 1), r);

        /* The writer's promise: dirty first, then the flag. */
        ck_assert(!mb_stats_region_marks_dirty(r));
        mb_stats_region_writer_attach(r);
        ck_assert(mb_stats_region_marks_dirty(r));
        ck_assert_uint_eq(r->dirty, 1);
        ck_assert_uint_eq(r->writer_flags, MB_STATS_WRITER_MARKS_DIRTY);
        ck_assert(mb_stats_region_test_and_clear_dirty(r));
        ck_assert(!mb_stats_region_test_and_clear_dirty(r));
        mb_stats_region_mark_dirty(r);
        mb_stats_region_mark_dirty(r);
        ck_assert_uint_eq(r->dirty, 1);
        free(r);
}
END_TEST

/* The common set-up of the region tests: root <- a, one region source on
 * a (its writer maintaining the dirty word when @writer), polled once. */
struct region_fx {
        struct rstat_tree tree;
        struct rstat_node root, a;
        struct mb_stats_region *r;
        struct rstat_source *src;
};

static void region_fx_init(struct region_fx *f, bool writer) {
        f->r = region_new();
        rstat_tree_init(&f->tree, NCPUS);
        rstat_node_init(&f->root, NULL);
        rstat_node_init(&f->a, &f->root);
        if (writer)
                mb_stats_region_writer_attach(f->r);
        f->src = region_attach(&f->tree, &f->a, f->r);
}

static void region_fx_fini(struct region_fx *f) {
        rstat_node_destroy(&f->tree, &f->a);
        rstat_node_destroy(&f->tree, &f->root);
        free(f->r);
}

START_TEST(test_clean_region_is_not_walked) {
        /* The writer promised to mark the region and left it clean: a poll
         * must not look at the slots (so a write behind the daemon's back
         * goes unseen), a full poll must. */
        struct region_fx f;

        region_fx_init(&f, true);
        ck_assert_uint_eq(f.r->dirty, 0);

        mb_stat_slot_add(&f.r->slot[1], MB_STAT_PGALLOC, 5); /* not marked */
        ck_assert_uint_eq(rstat_poll_source(&f.tree, &f.a, f.src), 0);
        ck_assert(!rstat_node_is_updated(&f.a));
        ck_assert_uint_eq(rstat_poll_source(&f.tree, &f.a, f.src), 0);

        ck_assert_uint_eq(rstat_poll_source_full(&f.tree, &f.a, f.src), 1);
        ck_assert(rstat_node_is_updated(&f.a));
        rstat_flush(&f.tree, &f.root);
        ck_assert_int_eq(f.root.value[MB_STAT_PGALLOC], 5);
        ck_assert_uint_eq(f.r->dirty, 0);

        region_fx_fini(&f);
}
END_TEST

START_TEST(test_dirty_region_is_walked_and_cleared) {
        struct region_fx f;

        region_fx_init(&f, true);

        mb_stat_slot_add(&f.r->slot[0], MB_STAT_PAGES, 3);
        mb_stat_slot_add(&f.r->slot[1], MB_STAT_PGALLOC, 3);
        mb_stats_region_mark_dirty(f.r);
        ck_assert_uint_eq(rstat_poll_source(&f.tree, &f.a, f.src), 2);
        ck_assert_uint_eq(f.r->dirty, 0);
        ck_assert(rstat_node_is_updated(&f.a));
        ck_assert_uint_eq(rstat_poll_source(&f.tree, &f.a, f.src), 0);
        rstat_flush(&f.tree, &f.root);
        ck_assert_int_eq(f.root.value[MB_STAT_PAGES], 3);
        ck_assert_int_eq(f.a.local[MB_STAT_PGALLOC], 3);

        /* Marked again by the next write: seen again. */
        mb_stat_slot_add(&f.r->slot[0], MB_STAT_PAGES, -1);
        mb_stats_region_mark_dirty(f.r);
        ck_assert_uint_eq(rstat_poll_source(&f.tree, &f.a, f.src), 1);
        ck_assert_uint_eq(f.r->dirty, 0);
        rstat_flush(&f.tree, &f.root);
        ck_assert_int_eq(f.root.value[MB_STAT_PAGES], 2);

        region_fx_fini(&f);
}
END_TEST

START_TEST(test_region_without_writer_flag_is_always_walked) {
        /* An older client never sets the flag nor the word: every poll
         * walks its slots, as before the word existed. */
        struct region_fx f;

        region_fx_init(&f, false);

        mb_stat_slot_add(&f.r->slot[1], MB_STAT_PGALLOC, 2);
        ck_assert_uint_eq(rstat_poll_source(&f.tree, &f.a, f.src), 1);
        ck_assert(rstat_node_is_updated(&f.a));
        mb_stat_slot_add(&f.r->slot[0], MB_STAT_PGALLOC, 2);
        ck_assert_uint_eq(rstat_poll_source(&f.tree, &f.a, f.src), 1);
        rstat_flush(&f.tree, &f.root);
        ck_assert_int_eq(f.root.value[MB_STAT_PGALLOC], 4);
        ck_assert_uint_eq(f.r->dirty, 0);

        region_fx_fini(&f);
}
END_TEST

START_TEST(test_region_fresh_source_and_late_writer_flag) {
        /* A fresh source is walked once whatever the word says (its
         * contents count as new); a writer that sets the flag after the
         * daemon started polling is walked for what it wrote before. */
        struct rstat_tree tree;
        struct rstat_node root, a;
        struct mb_stats_region *r = region_new();
        struct rstat_source *src;

        rstat_tree_init(&tree, NCPUS);
        rstat_node_init(&root, NULL);
        rstat_node_init(&a, &root);
        mb_stat_slot_add(&r->slot[0], MB_STAT_PAGES, 7);
        r->writer_flags = MB_STATS_WRITER_MARKS_DIRTY; /* flag set, word clear */
        ck_assert_int_eq(rstat_source_attach_region(&a, r, NCPUS, &src), 0);
        ck_assert_uint_eq(rstat_poll_source(&tree, &a, src), 1);
        ck_assert_uint_eq(rstat_poll_source(&tree, &a, src), 0);
        rstat_flush(&tree, &root);
        ck_assert_int_eq(root.value[MB_STAT_PAGES], 7);
        rstat_source_detach(&tree, &a, src, true);
        rstat_flush(&tree, &root);
        ck_assert_int_eq(root.value[MB_STAT_PAGES], 0);

        memset(r, 0, (size_t) mb_stats_region_bytes(NCPUS));
        src = region_attach(&tree, &a, r);
        mb_stat_slot_add(&r->slot[1], MB_STAT_PAGES, 4); /* before the promise */
        mb_stats_region_writer_attach(r);
        ck_assert_uint_eq(rstat_poll_source(&tree, &a, src), 1);
        ck_assert_uint_eq(r->dirty, 0);
        rstat_flush(&tree, &root);
        ck_assert_int_eq(root.value[MB_STAT_PAGES], 4);
        mb_stat_slot_add(&r->slot[1], MB_STAT_PAGES, 1); /* not marked */
        ck_assert_uint_eq(rstat_poll_source(&tree, &a, src), 0);
        ck_assert(!rstat_node_is_updated(&a));

        rstat_source_detach(&tree, &a, src, true);
        rstat_node_destroy(&tree, &a);
        rstat_node_destroy(&tree, &root);
        free(r);
}
END_TEST

START_TEST(test_nsources_subtree) {
        struct rstat_tree tree;
        struct tnode root, a, b;
        struct mb_stat_slot s[NCPUS] = {};
        struct rstat_source *src;

        rstat_tree_init(&tree, NCPUS);
        tnode_init(&root, NULL);
        tnode_init(&a, &root);
        tnode_init(&b, &a);
        ck_assert_uint_eq(b.node.nsources_subtree, 1);
        ck_assert_uint_eq(a.node.nsources_subtree, 2);
        ck_assert_uint_eq(root.node.nsources_subtree, 3);

        ck_assert_int_eq(rstat_source_attach(&b.node, s, NCPUS, &src), 0);
        ck_assert_uint_eq(b.node.nsources_subtree, 2);
        ck_assert_uint_eq(root.node.nsources_subtree, 4);
        rstat_source_detach(&tree, &b.node, src, true);
        ck_assert_uint_eq(b.node.nsources_subtree, 1);
        ck_assert_uint_eq(a.node.nsources_subtree, 2);

        tnode_done(&tree, &b);
        ck_assert_uint_eq(a.node.nsources_subtree, 1);
        ck_assert_uint_eq(root.node.nsources_subtree, 2);
        tnode_done(&tree, &a);
        ck_assert_uint_eq(root.node.nsources_subtree, 1);
        tnode_done(&tree, &root);
}
END_TEST

/* 10,000 nodes: root -> 100 groups -> 99 leaves each (10,001 nodes). */
#define BIG_GROUPS 100
#define BIG_LEAVES 99

START_TEST(test_big_tree_flush_cost_follows_updates) {
        struct rstat_tree tree;
        struct rstat_node *root, *groups, *leaves;
        struct mb_stat_slot *slots;
        struct rstat_source **srcs;
        uint64_t visited, expect_root = 0;
        size_t nleaves = (size_t) BIG_GROUPS * BIG_LEAVES;

        rstat_tree_init(&tree, NCPUS);
        root = calloc(1, sizeof(*root));
        groups = calloc(BIG_GROUPS, sizeof(*groups));
        leaves = calloc(nleaves, sizeof(*leaves));
        slots = calloc(nleaves * NCPUS, sizeof(*slots));
        srcs = calloc(nleaves, sizeof(*srcs));
        ck_assert(root && groups && leaves && slots && srcs);

        rstat_node_init(root, NULL);
        for (size_t g = 0; g < BIG_GROUPS; g++) {
                rstat_node_init(&groups[g], root);
                for (size_t l = 0; l < BIG_LEAVES; l++) {
                        size_t i = g * BIG_LEAVES + l;

                        rstat_node_init(&leaves[i], &groups[g]);
                        ck_assert_int_eq(rstat_source_attach(&leaves[i], &slots[i * NCPUS], NCPUS, &srcs[i]), 0);
                }
        }

        /* 1% of the tenants change: 10 leaves in each of the first 10
         * groups. */
        for (size_t g = 0; g < 10; g++)
                for (size_t l = 0; l < 10; l++) {
                        size_t i = g * BIG_LEAVES + l * 7;

                        mb_stat_slot_add(&slots[i * NCPUS + (l % NCPUS)], MB_STAT_PAGES, (int64_t) (i + 1));
                        expect_root += i + 1;
                }
        /* The daemon polls every source (cost per client, not per flush). */
        for (size_t i = 0; i < nleaves; i++)
                rstat_poll_source(&tree, &leaves[i], srcs[i]);

        /* Reading group 3 flushes its 10 updated leaves and itself. */
        visited = rstat_flush(&tree, &groups[3]);
        ck_assert_uint_eq(visited, 11);
        ck_assert_uint_eq(tree.flushed_nodes, 11);
        {
                int64_t expect = 0;

                for (size_t l = 0; l < 10; l++)
                        expect += (int64_t) (3 * BIG_LEAVES + l * 7 + 1);
                ck_assert_int_eq(groups[3].value[MB_STAT_PAGES], expect);
        }

        /* A group that did not change costs nothing. */
        ck_assert_uint_eq(rstat_flush(&tree, &groups[50]), 0);

        /* The root's flush visits the 9 other updated groups, their 90
         * leaves and the root: 100 of 10,001 nodes. */
        visited = rstat_flush(&tree, root);
        ck_assert_uint_eq(visited, 100);
        ck_assert_uint_eq(tree.flushed_nodes, 111);
        ck_assert_uint_eq(tree.flushes, 2);
        ck_assert_int_eq(root->value[MB_STAT_PAGES], (int64_t) expect_root);

        for (size_t i = 0; i < nleaves; i++)
                rstat_node_destroy(&tree, &leaves[i]);
        for (size_t g = 0; g < BIG_GROUPS; g++)
                rstat_node_destroy(&tree, &groups[g]);
        rstat_node_destroy(&tree, root);
        free(srcs);
        free(slots);
        free(leaves);
        free(groups);
        free(root);
}
END_TEST

/* One writer thread per slot (like two clients' CPUs) while the main thread
 * polls and flushes: nothing is lost or counted twice. */
#define WRITES_PER_THREAD 200000

struct writer {
        struct mb_stat_slot *slot;
};

static void *writer_thread(void *arg) {
        struct writer *w = arg;

        for (int i = 0; i < WRITES_PER_THREAD; i++) {
                mb_stat_slot_add(w->slot, MB_STAT_PGALLOC, 1);
                mb_stat_slot_add(w->slot, MB_STAT_PAGES, (i & 1) ? -1 : 2);
        }
        return NULL;
}

START_TEST(test_concurrent_writers_and_flushes) {
        struct rstat_tree tree;
        struct tnode root, a;
        pthread_t th[NCPUS];
        struct writer w[NCPUS];
        int64_t expect_pages = 0;

        rstat_tree_init(&tree, NCPUS);
        tnode_init(&root, NULL);
        tnode_init(&a, &root);

        for (unsigned i = 0; i < NCPUS; i++) {
                w[i].slot = &a.slots[i];
                ck_assert_int_eq(pthread_create(&th[i], NULL, writer_thread, &w[i]), 0);
        }
        for (int i = 0; i < 2000; i++) {
                rstat_poll_source(&tree, &a.node, a.src);
                rstat_flush(&tree, &root.node);
        }
        for (unsigned i = 0; i < NCPUS; i++)
                pthread_join(th[i], NULL);
        rstat_poll_source(&tree, &a.node, a.src);
        rstat_flush(&tree, &root.node);

        for (int i = 0; i < WRITES_PER_THREAD; i++)
                expect_pages += (i & 1) ? -1 : 2;
        ck_assert_int_eq(root.node.value[MB_STAT_PGALLOC], (int64_t) NCPUS * WRITES_PER_THREAD);
        ck_assert_int_eq(a.node.local[MB_STAT_PGALLOC], (int64_t) NCPUS * WRITES_PER_THREAD);
        ck_assert_int_eq(root.node.value[MB_STAT_PAGES], NCPUS * expect_pages);

        tnode_done(&tree, &a);
        tnode_done(&tree, &root);
}
END_TEST

/* The same with a region whose writers mark it dirty and a daemon that
 * polls by the word: at the end, after a full poll (the periodic flush),
 * nothing is lost or counted twice. */
struct dirty_writer {
        struct mb_stats_region *region;
        unsigned index;
};

static void *dirty_writer_thread(void *arg) {
        struct dirty_writer *w = arg;
        struct mb_stat_slot *slot = &w->region->slot[w->index];

        for (int i = 0; i < WRITES_PER_THREAD; i++) {
                mb_stat_slot_add(slot, MB_STAT_PGALLOC, 1);
                mb_stats_region_mark_dirty(mb_stats_region_of_slot(slot, w->index));
        }
        return NULL;
}

START_TEST(test_concurrent_writers_dirty_word) {
        struct region_fx f;
        pthread_t th[NCPUS];
        struct dirty_writer w[NCPUS];
        uint64_t seen = 0;

        region_fx_init(&f, true);

        for (unsigned i = 0; i < NCPUS; i++) {
                w[i] = (struct dirty_writer) { .region = f.r, .index = i };
                ck_assert_int_eq(pthread_create(&th[i], NULL, dirty_writer_thread, &w[i]), 0);
        }
        for (int i = 0; i < 2000; i++) {
                seen += rstat_poll_source(&f.tree, &f.a, f.src);
                rstat_flush(&f.tree, &f.root);
        }
        for (unsigned i = 0; i < NCPUS; i++)
                pthread_join(th[i], NULL);
        seen += rstat_poll_source_full(&f.tree, &f.a, f.src);
        rstat_flush(&f.tree, &f.root);

        /* A flush folds what the writers added after the last poll, and
         * that fold counts as seen (rstat_source_fold()), so the polls may
         * report fewer updates than were made, never more; the values must
         * be exact. */
        ck_assert_uint_le(seen, (uint64_t) NCPUS * WRITES_PER_THREAD);
        ck_assert_uint_gt(seen, 0);
        ck_assert_int_eq(f.root.value[MB_STAT_PGALLOC], (int64_t) NCPUS * WRITES_PER_THREAD);
        ck_assert_uint_eq(rstat_poll_source(&f.tree, &f.a, f.src), 0);

        region_fx_fini(&f);
}
END_TEST

START_TEST(test_item_kinds) {
        ck_assert(rstat_item_is_gauge(MB_STAT_PAGES));
        ck_assert(rstat_item_is_gauge(MB_STAT_STOCK));
        ck_assert(rstat_item_is_gauge(MB_STAT_SLAB_RECLAIMABLE));
        ck_assert(rstat_item_is_gauge(MB_STAT_SLAB_UNRECLAIMABLE));
        ck_assert(!rstat_item_is_gauge(MB_STAT_PGALLOC));
        ck_assert(!rstat_item_is_gauge(MB_STAT_PGFREE));
        ck_assert(!rstat_item_is_gauge(MB_STAT_THROTTLE_USEC));
}
END_TEST

static Suite *rstat_suite(void) {
        Suite *s = suite_create("rstat");
        TCase *tc = tcase_create("core");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_flush_visits_only_updated_nodes);
        tcase_add_test(tc, test_local_and_hierarchical_values);
        tcase_add_test(tc, test_slots_fold_as_deltas);
        tcase_add_test(tc, test_pending_updates_propagate);
        tcase_add_test(tc, test_poll_source);
        tcase_add_test(tc, test_source_attach_counts_existing_contents);
        tcase_add_test(tc, test_source_detach);
        tcase_add_test(tc, test_source_detach_weighs_counters);
        tcase_add_test(tc, test_node_destroy_keeps_counts_in_ancestors);
        tcase_add_test(tc, test_big_tree_flush_cost_follows_updates);
        tcase_add_test(tc, test_concurrent_writers_and_flushes);
        tcase_add_test(tc, test_item_kinds);
        tcase_add_test(tc, test_region_layout);
        tcase_add_test(tc, test_clean_region_is_not_walked);
        tcase_add_test(tc, test_dirty_region_is_walked_and_cleared);
        tcase_add_test(tc, test_region_without_writer_flag_is_always_walked);
        tcase_add_test(tc, test_region_fresh_source_and_late_writer_flag);
        tcase_add_test(tc, test_nsources_subtree);
        tcase_add_test(tc, test_concurrent_writers_dirty_word);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(rstat_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
