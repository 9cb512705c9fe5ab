/* SPDX-License-Identifier: MIT */
/*
 * test-reclaim-plan.c - daemon/core/reclaim_plan.c: whom reclaim asks for
 * how many pages (shrink_node_memcgs(), get_scan_count()), without a
 * daemon: the clients are this file's, handed over by the callback.
 */
#include <check.h>
#include <stdlib.h>

#include "reclaim_plan.h"
#include "tenant.h"

#define CAPACITY_PAGES 100000UL
#define NCPUS 2
#define MAX_CLIENTS 4

/* The clients of one leaf tenant. */
struct leaf {
        struct tenant *t;
        size_t n;
        struct reclaim_plan_client clients[MAX_CLIENTS];
        int ids[MAX_CLIENTS];
};

static struct tenant_tree *tree;
static struct leaf leaves[8];
static size_t nleaves;
static unsigned callbacks;

static void setup(void) {
        ck_assert_int_eq(tenant_tree_new(CAPACITY_PAGES, NCPUS, &tree), 0);
        nleaves = 0;
        callbacks = 0;
}

static void teardown(void) {
        tenant_tree_free(tree);
        tree = NULL;
}

/* Leaf @path with @usage pages charged, held by clients in the proportions
 * of @held (0-terminated; no client at all when @held is empty).  Limits
 * are set by the caller before calling this, so that the protected usage
 * is published by the charge. */
static struct tenant *leaf(const char *path, unsigned long min, unsigned long low, const uint64_t *held) {
        struct leaf *l = &leaves[nleaves++];
        uint64_t sum = 0;
        struct tenant *t = tenant_lookup(tree, path);

        if (!t)
                ck_assert_int_eq(tenant_create(tree, path, &t), 0);
        ck_assert_int_eq(page_counter_set_min(&t->memory, min), 0);
        ck_assert_int_eq(page_counter_set_low(&t->memory, low), 0);
        l->t = t;
        for (l->n = 0; held[l->n]; l->n++) {
                l->ids[l->n] = (int) (nleaves * 10 + l->n);
                l->clients[l->n] = (struct reclaim_plan_client) { .handle = &l->ids[l->n], .held = held[l->n] };
                sum += held[l->n];
        }
        page_counter_charge(&t->memory, sum);
        return t;
}

static int clients_cb(struct reclaim_plan *p, struct tenant *t, uint64_t offer, bool low, void *userdata) {
        callbacks++;
        for (size_t i = 0; i < nleaves; i++)
                if (leaves[i].t == t)
                        return reclaim_plan_add_clients(p, t, offer, low, leaves[i].clients, leaves[i].n);
        return 0;
}

static struct reclaim_plan plan(struct tenant *root) {
        return (struct reclaim_plan) { .root = root, .allow_low = true, .clients = clients_cb };
}

/* The sum of the asks (and caps) of @t's targets. */
static uint64_t asked_of(const struct reclaim_plan *p, const struct tenant *t, uint64_t *ret_cap) {
        uint64_t ask = 0, cap = 0;

        for (size_t i = 0; i < p->ntargets; i++)
                if (p->targets[i].tenant == t) {
                        ask += p->targets[i].ask;
                        cap += p->targets[i].cap;
                }
        if (ret_cap)
                *ret_cap = cap;
        return ask;
}

static uint64_t total_asked(const struct reclaim_plan *p) {
        uint64_t sum = 0;

        for (size_t i = 0; i < p->ntargets; i++)
                sum += p->targets[i].ask;
        return sum;
}

START_TEST(test_protection_respected) {
        struct tenant *a = leaf("a", 0, 60, (const uint64_t[]) { 100, 0 });
        struct tenant *b = leaf("b", 0, 0, (const uint64_t[]) { 100, 0 });
        struct reclaim_plan p = plan(tree->root);
        uint64_t cap;

        ck_assert_int_eq(reclaim_plan_build(&p, 1000), 0);
        /* a offers only what it has above its low. */
        ck_assert_uint_eq(asked_of(&p, a, &cap), 40);
        ck_assert_uint_eq(cap, 40);
        ck_assert_uint_eq(asked_of(&p, b, NULL), 100);
        ck_assert(!p.low_pass);
        ck_assert(!p.targets[0].low && !p.targets[1].low);
        reclaim_plan_done(&p);
}
END_TEST

START_TEST(test_proportional_split) {
        struct tenant *a = leaf("g/a", 0, 0, (const uint64_t[]) { 300, 0 });
        struct tenant *b = leaf("g/b", 0, 0, (const uint64_t[]) { 100, 0 });
        struct reclaim_plan p = plan(tenant_lookup(tree, "g"));

        /* get_scan_count(): in proportion to what each offers. */
        ck_assert_int_eq(reclaim_plan_build(&p, 40), 0);
        ck_assert_uint_eq(asked_of(&p, a, NULL), 30);
        ck_assert_uint_eq(asked_of(&p, b, NULL), 10);
        reclaim_plan_done(&p);

        /* The remainder goes to the largest offer first. */
        p = plan(tenant_lookup(tree, "g"));
        ck_assert_int_eq(reclaim_plan_build(&p, 3), 0);
        ck_assert_uint_eq(total_asked(&p), 3);
        ck_assert_uint_eq(asked_of(&p, a, NULL), 3);
        reclaim_plan_done(&p);
}
END_TEST

START_TEST(test_low_pass) {
        struct tenant *a = leaf("a", 0, 100, (const uint64_t[]) { 50, 0 });
        struct tenant *b = leaf("b", 0, 100, (const uint64_t[]) { 50, 0 });
        struct reclaim_plan p = plan(tree->root);

        /* Without the pass below low (host pressure): nobody. */
        p.allow_low = false;
        ck_assert_int_eq(reclaim_plan_build(&p, 60), 0);
        ck_assert_uint_eq(p.ntargets, 0);
        ck_assert(p.low_skipped);
        ck_assert(!p.low_pass);
        reclaim_plan_done(&p);

        /* Everything is below low: the second pass takes it, marked `low`
         * for the caller to count the event. */
        p = plan(tree->root);
        ck_assert_int_eq(reclaim_plan_build(&p, 60), 0);
        ck_assert(p.low_pass);
        ck_assert_uint_eq(p.ntargets, 2);
        ck_assert(p.targets[0].low && p.targets[1].low);
        ck_assert_uint_eq(asked_of(&p, a, NULL) + asked_of(&p, b, NULL), 60);
        reclaim_plan_done(&p);

        /* A caller whose last round got nothing may start below low. */
        p = plan(tree->root);
        p.low_first = true;
        ck_assert_int_eq(reclaim_plan_build(&p, 60), 0);
        ck_assert(p.low_pass);
        ck_assert_uint_eq(p.ntargets, 2);
        reclaim_plan_done(&p);
}
END_TEST

/* shrink_node_memcgs() counts MEMCG_LOW on every memcg it visits below its
 * low in the pass below low, intermediate ones too: the plan lists them. */
START_TEST(test_low_visited_intermediate) {
        struct tenant *p_ = NULL, *m_ = NULL, *a, *b, *c;
        struct reclaim_plan p;

        ck_assert_int_eq(tenant_create(tree, "p", &p_), 0);
        ck_assert_int_eq(page_counter_set_low(&p_->memory, 200), 0);
        ck_assert_int_eq(tenant_create(tree, "m", &m_), 0);
        ck_assert_int_eq(page_counter_set_min(&m_->memory, 200), 0);
        ck_assert_int_eq(page_counter_set_low(&m_->memory, 200), 0);
        a = leaf("p/a", 0, 100, (const uint64_t[]) { 50, 0 });
        b = leaf("p/b", 0, 100, (const uint64_t[]) { 50, 0 });
        c = leaf("m/c", 100, 100, (const uint64_t[]) { 50, 0 });

        /* The pass that respects low: nothing listed, the skip noted. */
        p = plan(tree->root);
        p.allow_low = false;
        ck_assert_int_eq(reclaim_plan_build(&p, 60), 0);
        ck_assert(p.low_skipped);
        ck_assert_uint_eq(p.nlow_visited, 0);
        reclaim_plan_done(&p);

        /* The pass below low: p (below low) is listed once, m (below min)
         * is not; the leaves are targets marked low. */
        p = plan(tree->root);
        ck_assert_int_eq(reclaim_plan_build(&p, 60), 0);
        ck_assert(p.low_pass);
        ck_assert_uint_eq(p.nlow_visited, 1);
        ck_assert_ptr_eq(p.low_visited[0], p_);
        ck_assert_uint_eq(asked_of(&p, a, NULL) + asked_of(&p, b, NULL), 60);
        ck_assert_uint_eq(asked_of(&p, c, NULL), 0);
        reclaim_plan_done(&p);
        ck_assert_uint_eq(p.nlow_visited, 0);
        ck_assert_ptr_null(p.low_visited);

        /* The reclaim root itself is never below low. */
        p = plan(p_);
        ck_assert_int_eq(reclaim_plan_build(&p, 60), 0);
        ck_assert_uint_eq(p.nlow_visited, 0);
        reclaim_plan_done(&p);
}
END_TEST

START_TEST(test_low_pass_only_when_nothing_else) {
        struct tenant *a = leaf("a", 0, 100, (const uint64_t[]) { 50, 0 });
        struct tenant *b = leaf("b", 0, 0, (const uint64_t[]) { 50, 0 });
        struct reclaim_plan p = plan(tree->root);

        /* b is unprotected: the first pass finds it, a stays untouched
         * even when b cannot give the whole goal. */
        ck_assert_int_eq(reclaim_plan_build(&p, 80), 0);
        ck_assert(!p.low_pass);
        ck_assert(p.low_skipped);
        ck_assert_uint_eq(asked_of(&p, a, NULL), 0);
        ck_assert_uint_eq(asked_of(&p, b, NULL), 50);
        reclaim_plan_done(&p);
}
END_TEST

START_TEST(test_min_never_reclaimed) {
        struct tenant *a = leaf("a", 100, 0, (const uint64_t[]) { 50, 0 });
        struct tenant *b = leaf("b", 0, 100, (const uint64_t[]) { 50, 0 });
        struct tenant *c = leaf("c", 20, 0, (const uint64_t[]) { 50, 0 });
        struct reclaim_plan p = plan(tree->root);
        uint64_t cap;

        ck_assert_int_eq(reclaim_plan_build(&p, 1000), 0);
        /* c above its min offers the rest; b is low-protected: first pass
         * finds c, so no pass below low. */
        ck_assert(!p.low_pass);
        ck_assert_uint_eq(asked_of(&p, c, &cap), 30);
        ck_assert_uint_eq(asked_of(&p, a, NULL), 0);
        ck_assert_uint_eq(asked_of(&p, b, NULL), 0);
        reclaim_plan_done(&p);

        /* Even in the pass below low (c's clients gone), a is not asked:
         * below min is never reclaimed. */
        leaves[2].n = 0;
        p = plan(tree->root);
        ck_assert_int_eq(reclaim_plan_build(&p, 1000), 0);
        ck_assert(p.low_pass);
        ck_assert_uint_eq(asked_of(&p, a, NULL), 0);
        ck_assert_uint_eq(asked_of(&p, b, NULL), 50);
        reclaim_plan_done(&p);
}
END_TEST

START_TEST(test_per_client_split_with_rounding) {
        struct tenant *a = leaf("a", 0, 0, (const uint64_t[]) { 7, 7, 7, 0 });
        struct reclaim_plan p = plan(tree->root);
        const struct reclaim_plan_client more[] = {
                { .handle = &leaves[0].ids[0], .held = 1 },
                { .handle = &leaves[0].ids[1], .held = 5 },
        };

        /* 10 of 21: 3 each by proportion, the remainder to the first. */
        ck_assert_int_eq(reclaim_plan_add_clients(&p, a, 10, false, leaves[0].clients, 3), 0);
        ck_assert_uint_eq(p.ntargets, 3);
        ck_assert_uint_eq(p.targets[0].cap, 4);
        ck_assert_uint_eq(p.targets[1].cap, 3);
        ck_assert_uint_eq(p.targets[2].cap, 3);
        ck_assert_uint_eq(p.total_cap, 10);
        ck_assert_ptr_eq(p.targets[0].handle, &leaves[0].ids[0]);
        reclaim_plan_done(&p);

        /* The remainder never asks a client for more than it holds:
         * 5 of 6 -> 0 + 4 by proportion, the remainder goes to the first,
         * which holds 1. */
        ck_assert_int_eq(reclaim_plan_add_clients(&p, a, 5, false, more, 2), 0);
        ck_assert_uint_eq(p.targets[0].cap, 1);
        ck_assert_uint_eq(p.targets[1].cap, 4);
        reclaim_plan_done(&p);

        /* An offer above what the clients hold is capped at that. */
        ck_assert_int_eq(reclaim_plan_add_clients(&p, a, 100, false, more, 2), 0);
        ck_assert_uint_eq(p.total_cap, 6);
        reclaim_plan_done(&p);

        /* A drain asks each client for everything it holds. */
        p.drain = true;
        ck_assert_int_eq(reclaim_plan_add_clients(&p, a, 1, false, more, 2), 0);
        ck_assert_uint_eq(p.targets[0].cap, 1);
        ck_assert_uint_eq(p.targets[1].cap, 5);
        reclaim_plan_done(&p);
}
END_TEST

START_TEST(test_nothing_to_reclaim) {
        struct tenant *a = leaf("a", 0, 0, (const uint64_t[]) { 0 }); /* no clients, no usage */
        struct tenant *b = leaf("b", 0, 0, (const uint64_t[]) { 0 });
        struct reclaim_plan p = plan(tree->root);

        page_counter_charge(&b->memory, 50); /* pages, but no client holds them */
        ck_assert_int_eq(reclaim_plan_build(&p, 100), 0);
        ck_assert_uint_eq(p.ntargets, 0);
        ck_assert_uint_eq(p.total_cap, 0);
        ck_assert(!p.low_pass && !p.low_skipped);
        ck_assert_uint_eq(callbacks, 1); /* b only: a has no usage */
        ck_assert_uint_eq(reclaim_plan_excess_above_low(tree->root, false), 50);
        reclaim_plan_done(&p);
        (void) a;
}
END_TEST

START_TEST(test_skip_nothing_left) {
        struct tenant *a = leaf("a", 0, 0, (const uint64_t[]) { 150, 50, 0 });
        struct tenant *b = leaf("b", 0, 0, (const uint64_t[]) { 100, 0 });
        struct reclaim_plan p = plan(tree->root);
        uint64_t cap;

        /* a's first client has nothing left (no shrinker, an empty stock):
         * it is no target, and its 150 pages take no share of a's offer,
         * as get_scan_count() leaves out anon pages without swap. */
        leaves[0].clients[0].skip = true;
        ck_assert_int_eq(reclaim_plan_build(&p, 1000), 0);
        ck_assert_uint_eq(p.ntargets, 2);
        ck_assert_uint_eq(p.nskipped, 1);
        for (size_t i = 0; i < p.ntargets; i++)
                ck_assert_ptr_ne(p.targets[i].handle, leaves[0].clients[0].handle);
        ck_assert_uint_eq(asked_of(&p, a, &cap), 50);
        ck_assert_uint_eq(cap, 50);
        ck_assert_uint_eq(asked_of(&p, b, NULL), 100);
        reclaim_plan_done(&p);
        ck_assert_uint_eq(p.nskipped, 0);

        /* A drain leaves it out too. */
        p = plan(tree->root);
        p.drain = true;
        ck_assert_int_eq(reclaim_plan_build(&p, 0), 0);
        ck_assert_uint_eq(p.ntargets, 2);
        ck_assert_uint_eq(p.nskipped, 1);
        reclaim_plan_done(&p);

        /* Everyone skipped: no target, but somebody was there -- a pass
         * that frees nothing, not "nobody to ask". */
        leaves[0].clients[1].skip = true;
        leaves[1].clients[0].skip = true;
        p = plan(tree->root);
        ck_assert_int_eq(reclaim_plan_build(&p, 1000), 0);
        ck_assert_uint_eq(p.ntargets, 0);
        ck_assert_uint_eq(p.nskipped, 3);
        ck_assert_uint_eq(p.total_cap, 0);
        reclaim_plan_done(&p);
}
END_TEST

START_TEST(test_skip_below_low) {
        struct tenant *a = leaf("a", 0, 100, (const uint64_t[]) { 50, 0 });
        struct reclaim_plan p = plan(tree->root);

        /* Below low, its only client with nothing left: the pass that
         * respects low finds nobody, the pass below low visits a and
         * counts it (low_visited) although it asks nobody. */
        leaves[0].clients[0].skip = true;
        ck_assert_int_eq(reclaim_plan_build(&p, 10), 0);
        ck_assert(p.low_pass);
        ck_assert_uint_eq(p.ntargets, 0);
        ck_assert_uint_eq(p.nskipped, 1);
        ck_assert_uint_eq(p.nlow_visited, 1);
        ck_assert_ptr_eq(p.low_visited[0], a);
        reclaim_plan_done(&p);

        /* Skipped in the pass that respects low: no pass below low in the
         * same plan (the caller's next round goes there, as after a round
         * whose clients gave nothing). */
        ck_assert_int_eq(page_counter_set_low(&a->memory, 0), 0);
        leaf("b", 0, 100, (const uint64_t[]) { 50, 0 });
        p = plan(tree->root);
        ck_assert_int_eq(reclaim_plan_build(&p, 10), 0);
        ck_assert(!p.low_pass);
        ck_assert(p.low_skipped);
        ck_assert_uint_eq(p.ntargets, 0);
        ck_assert_uint_eq(p.nskipped, 1);
        reclaim_plan_done(&p);
}
END_TEST

START_TEST(test_excess_above_low) {
        leaf("a", 0, 60, (const uint64_t[]) { 100, 0 });
        leaf("b", 30, 0, (const uint64_t[]) { 100, 0 });
        leaf("c", 0, 200, (const uint64_t[]) { 100, 0 });

        /* What host pressure may take: above max(emin, elow) only. */
        ck_assert_uint_eq(reclaim_plan_excess_above_low(tree->root, false), 40 + 70 + 0);
}
END_TEST

static Suite *reclaim_plan_suite(void) {
        Suite *s = suite_create("reclaim_plan");
        TCase *tc = tcase_create("core");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_protection_respected);
        tcase_add_test(tc, test_proportional_split);
        tcase_add_test(tc, test_low_pass);
        tcase_add_test(tc, test_low_visited_intermediate);
        tcase_add_test(tc, test_low_pass_only_when_nothing_else);
        tcase_add_test(tc, test_min_never_reclaimed);
        tcase_add_test(tc, test_per_client_split_with_rounding);
        tcase_add_test(tc, test_nothing_to_reclaim);
        tcase_add_test(tc, test_skip_nothing_left);
        tcase_add_test(tc, test_skip_below_low);
        tcase_add_test(tc, test_excess_above_low);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(reclaim_plan_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
