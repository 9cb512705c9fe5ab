/* SPDX-License-Identifier: MIT */
/*
 * test-protection.c - effective memory.min / memory.low, as the kernel's
 * effective_protection() and page_counter_calculate_protection(): the
 * kernel selftest tree, proportional distribution, capping by ancestors,
 * and hand-worked memory_recursiveprot cases.  Sizes are in 4 KiB pages.
 */
#include <check.h>
#include <stdlib.h>

#include "page_counter.h"
#include "protection.h"

#define PAGE_BYTES 4096UL
#define ELEMENTS(x) (sizeof(x) / sizeof((x)[0]))
#define MB_PAGES(mb) ((unsigned long) (mb) * (1024UL * 1024 / PAGE_BYTES)) /* 256 pages per MiB */

static unsigned long emin(struct page_counter *c) {
        return atomic_load(&c->emin);
}

static unsigned long elow(struct page_counter *c) {
        return atomic_load(&c->elow);
}

/* Pre-order walk, as mem_cgroup_iter() gives shrink_node_memcgs(): @nodes
 * lists the reclaim root's subtree with parents before children. */
static void walk(struct page_counter *root, struct page_counter **nodes, size_t n, bool recursive) {
        for (size_t i = 0; i < n; i++)
                page_counter_calculate_protection(root, nodes[i], recursive);
}

/* |pages - expected_mib| within one page. */
static void assert_about_mib(unsigned long pages, double expected_mib) {
        double got_mib = (double) pages * PAGE_BYTES / (1024.0 * 1024.0);
        double diff = got_mib > expected_mib ? got_mib - expected_mib : expected_mib - got_mib;

        ck_assert_msg(diff <= (double) PAGE_BYTES / (1024.0 * 1024.0),
                      "%lu pages = %.4f MiB, expected about %.4f MiB", pages, got_mib, expected_mib);
}

START_TEST(test_effective_protection_function) {
        /* Undercommitted: own protected usage, min(usage, setting). */
        ck_assert_uint_eq(effective_protection(50, 100, 10, 100, 30, false), 10);
        ck_assert_uint_eq(effective_protection(5, 100, 10, 100, 30, false), 5);
        /* Overcommitted: protected * parent_effective / siblings_protected,
         * 40 * 30 / 60 = 20. */
        ck_assert_uint_eq(effective_protection(40, 90, 40, 30, 60, false), 20);
        ck_assert_uint_eq(effective_protection(40, 90, 40, 30, 60, true), 20);
        /* Recursive: 10 + (100 - 30) * (50 - 10) / (100 - 30) = 10 + 40. */
        ck_assert_uint_eq(effective_protection(50, 100, 10, 100, 30, true), 50);
        /* Recursive, but the parent's usage is all protected already: the
         * division guard (parent_usage > siblings_protected) leaves ep. */
        ck_assert_uint_eq(effective_protection(50, 30, 10, 100, 30, true), 10);
        /* No protection anywhere. */
        ck_assert_uint_eq(effective_protection(50, 100, 0, 0, 0, true), 0);
}
END_TEST

/*
 * The tree of test_memcg_min() / test_memcg_low() in the kernel's
 * tools/testing/selftests/cgroup/test_memcontrol.c:
 *
 *   R (tree root)
 *   `- A        max = 200M
 *      |- B     min = 50M (or low)
 *      |  |- C  min = 75M,  usage 50M
 *      |  |- D  min = 25M,  usage 50M
 *      |  |- E  min = 0,    usage 50M
 *      |  `- F  min = 500M, usage 0
 *      `- G     usage 25M (the memory hog that drives A into reclaim)
 */
struct selftest_tree {
        struct page_counter r, a, b, c, d, e, f, g;
};

static void selftest_tree_init(struct selftest_tree *t, bool use_low) {
        int (*set)(struct page_counter *, unsigned long) = use_low ? page_counter_set_low : page_counter_set_min;

        page_counter_init(&t->r, NULL, true);
        page_counter_init(&t->a, &t->r, true);
        page_counter_init(&t->b, &t->a, true);
        page_counter_init(&t->c, &t->b, true);
        page_counter_init(&t->d, &t->b, true);
        page_counter_init(&t->e, &t->b, true);
        page_counter_init(&t->f, &t->b, true);
        page_counter_init(&t->g, &t->a, true);
        ck_assert_int_eq(page_counter_set_max(&t->a, MB_PAGES(200)), 0);
        ck_assert_int_eq(set(&t->b, MB_PAGES(50)), 0);
        ck_assert_int_eq(set(&t->c, MB_PAGES(75)), 0);
        ck_assert_int_eq(set(&t->d, MB_PAGES(25)), 0);
        ck_assert_int_eq(set(&t->e, 0), 0);
        ck_assert_int_eq(set(&t->f, MB_PAGES(500)), 0);
        ck_assert(page_counter_try_charge(&t->c, MB_PAGES(50), NULL));
        ck_assert(page_counter_try_charge(&t->d, MB_PAGES(50), NULL));
        ck_assert(page_counter_try_charge(&t->e, MB_PAGES(50), NULL));
        ck_assert(page_counter_try_charge(&t->g, MB_PAGES(25), NULL));
}

/*
 * Reclaim rooted at A (A is at its max).  B is a child of the root: B.emin
 * is its own 50M.  B's children claim min(50,75) + min(50,25) + 0 + 0 = 75M
 * of protected usage, more than B's 50M, so B's 50M is shared in proportion:
 *   C = 50M * 50M / 75M = 33.3M  (12800 * 12800 / 19200 = 8533 pages)
 *   D = 25M * 50M / 75M = 16.7M  ( 6400 * 12800 / 19200 = 4266 pages)
 *   E = 0 (claims nothing), F = 0 (no usage).
 */
static void check_selftest_tree(bool use_low, bool recursive) {
        unsigned long (*eff)(struct page_counter *) = use_low ? elow : emin;
        struct selftest_tree t;
        struct page_counter *order[] = { &t.a, &t.b, &t.c, &t.d, &t.e, &t.f, &t.g };

        selftest_tree_init(&t, use_low);
        walk(&t.a, order, ELEMENTS(order), recursive);

        ck_assert_uint_eq(eff(&t.b), MB_PAGES(50));
        assert_about_mib(eff(&t.c), 50.0 * 50.0 / 75.0);
        assert_about_mib(eff(&t.d), 25.0 * 50.0 / 75.0);
        ck_assert_uint_eq(eff(&t.e), 0);
        ck_assert_uint_eq(eff(&t.f), 0);
        ck_assert_uint_le(eff(&t.c) + eff(&t.d), eff(&t.b));
        /* The other kind of protection was never set. */
        ck_assert_uint_eq(use_low ? emin(&t.c) : elow(&t.c), 0);
}

START_TEST(test_selftest_tree_min) {
        check_selftest_tree(false, false);
}
END_TEST

START_TEST(test_selftest_tree_low) {
        check_selftest_tree(true, false);
}
END_TEST

/* Overcommitted at B: memory_recursiveprot changes nothing there. */
START_TEST(test_selftest_tree_recursiveprot) {
        check_selftest_tree(false, true);
        check_selftest_tree(true, true);
}
END_TEST

/*
 * The same tree under global reclaim (rooted at R).  A has no protection of
 * its own, so nothing below it is protected: effective protection is capped
 * by the parent's (B: 50M claimed, 0 afforded -> 50M * 0 / 50M = 0).  Giving
 * A 200M of min restores B's 50M and the proportional split below it.
 */
START_TEST(test_protection_capped_by_ancestor) {
        struct selftest_tree t;
        struct page_counter *order[] = { &t.r, &t.a, &t.b, &t.c, &t.d, &t.e, &t.f, &t.g };

        selftest_tree_init(&t, false);
        walk(&t.r, order, ELEMENTS(order), false);
        ck_assert_uint_eq(emin(&t.a), 0);
        ck_assert_uint_eq(emin(&t.b), 0);
        ck_assert_uint_eq(emin(&t.c), 0);
        ck_assert_uint_eq(emin(&t.d), 0);

        ck_assert_int_eq(page_counter_set_min(&t.a, MB_PAGES(200)), 0);
        walk(&t.r, order, ELEMENTS(order), false);
        ck_assert_uint_eq(emin(&t.a), MB_PAGES(200));
        /* A's children claim min(150M, 50M) = 50M <= 200M: B keeps 50M. */
        ck_assert_uint_eq(emin(&t.b), MB_PAGES(50));
        assert_about_mib(emin(&t.c), 50.0 * 50.0 / 75.0);
        assert_about_mib(emin(&t.d), 25.0 * 50.0 / 75.0);
}
END_TEST

/*
 * The reclaim root's own protection does not apply, and its stale values
 * from an earlier walk from higher up are neither rewritten nor used.
 */
START_TEST(test_reclaim_root_is_unprotected) {
        struct selftest_tree t;
        struct page_counter *from_r[] = { &t.r, &t.a, &t.b, &t.c, &t.d, &t.e, &t.f, &t.g };
        struct page_counter *from_b[] = { &t.b, &t.c, &t.d, &t.e, &t.f };
        unsigned long min, low;

        selftest_tree_init(&t, false);
        ck_assert_int_eq(page_counter_set_min(&t.a, MB_PAGES(200)), 0);
        walk(&t.r, from_r, ELEMENTS(from_r), false);
        ck_assert_uint_eq(emin(&t.b), MB_PAGES(50));

        /* B has 150M, 50M of it protected; as the target of its own reclaim
         * none of it is.  Lower B's min: a walk from higher up would now give
         * it 40M, but the walk from B leaves B's stale value alone. */
        ck_assert_int_eq(page_counter_set_min(&t.b, MB_PAGES(40)), 0);
        walk(&t.b, from_b, ELEMENTS(from_b), false);
        ck_assert_uint_eq(emin(&t.b), MB_PAGES(50)); /* not written */
        page_counter_protection(&t.b, &t.b, &min, &low);
        ck_assert_uint_eq(min, 0);
        ck_assert_uint_eq(low, 0);
        ck_assert(!page_counter_below_min(&t.b, &t.b));
        ck_assert(!page_counter_below_low(&t.b, &t.b));

        /* Children of the reclaim root get their own settings as they are. */
        ck_assert_uint_eq(emin(&t.c), MB_PAGES(75));
        ck_assert_uint_eq(emin(&t.d), MB_PAGES(25));
        page_counter_protection(&t.b, &t.c, &min, &low);
        ck_assert_uint_eq(min, MB_PAGES(75));
        ck_assert(page_counter_below_min(&t.b, &t.c)); /* 50M used <= 75M */
        ck_assert(!page_counter_below_min(&t.b, &t.d)); /* 50M used > 25M */

        /* The root of the whole tree is never protected either. */
        ck_assert(!page_counter_below_min(&t.b, &t.r));
}
END_TEST

/* A counter without usage is skipped, as the kernel does: nothing of it can
 * be reclaimed, and its old values are left alone. */
START_TEST(test_no_usage_is_skipped) {
        struct page_counter r, p, x;

        page_counter_init(&r, NULL, true);
        page_counter_init(&p, &r, true);
        page_counter_init(&x, &p, true);
        ck_assert_int_eq(page_counter_set_min(&p, 10), 0);
        ck_assert_int_eq(page_counter_set_min(&x, 10), 0);
        page_counter_charge(&x, 4);

        page_counter_calculate_protection(&r, &p, false);
        page_counter_calculate_protection(&r, &x, false);
        ck_assert_uint_eq(emin(&x), 4); /* min(usage 4, min 10) */

        ck_assert(page_counter_uncharge(&x, 4));
        ck_assert_int_eq(page_counter_set_min(&x, 0), 0);
        page_counter_calculate_protection(&r, &p, false);
        page_counter_calculate_protection(&r, &x, false);
        ck_assert_uint_eq(emin(&x), 4); /* untouched */
        ck_assert(page_counter_below_min(&r, &x)); /* 0 pages: nothing to take */
}
END_TEST

/*
 * Undercommitted parent, without and with memory_recursiveprot.
 *
 *   R -> P (min 100) -> Q1 (min 10, usage 50), Q2 (min 20, usage 50)
 *
 * P.emin = 100 (child of the root).  The children claim 10 + 20 = 30 <= 100.
 * Without recursion each keeps its own claim: Q1 = 10, Q2 = 20.
 * With it, the unclaimed 100 - 30 = 70 is shared by unprotected usage,
 * (50 - 10) + (50 - 20) = 70 = P.usage 100 - 30:
 *   Q1 = 10 + 70 * 40 / 70 = 50,  Q2 = 20 + 70 * 30 / 70 = 50.
 */
START_TEST(test_undercommitted_and_recursiveprot) {
        struct page_counter r, p, q1, q2;
        struct page_counter *order[] = { &p, &q1, &q2 };

        page_counter_init(&r, NULL, true);
        page_counter_init(&p, &r, true);
        page_counter_init(&q1, &p, true);
        page_counter_init(&q2, &p, true);
        ck_assert_int_eq(page_counter_set_min(&p, 100), 0);
        ck_assert_int_eq(page_counter_set_min(&q1, 10), 0);
        ck_assert_int_eq(page_counter_set_min(&q2, 20), 0);
        page_counter_charge(&q1, 50);
        page_counter_charge(&q2, 50);

        walk(&r, order, ELEMENTS(order), false);
        ck_assert_uint_eq(emin(&p), 100);
        ck_assert_uint_eq(emin(&q1), 10);
        ck_assert_uint_eq(emin(&q2), 20);
        ck_assert(!page_counter_below_min(&r, &q1));

        walk(&r, order, ELEMENTS(order), true);
        ck_assert_uint_eq(emin(&q1), 50);
        ck_assert_uint_eq(emin(&q2), 50);
        ck_assert(page_counter_below_min(&r, &q1));
        ck_assert(page_counter_below_min(&r, &q2));
}
END_TEST

/*
 * Floating protection over two levels with memory_recursiveprot (low).
 *
 *   R -> P (low 100)
 *        |- X (low 0)  -> X1 (low 0,  usage 30)
 *        |              `- X2 (low 10, usage 30)
 *        |- Y (low 0,  usage 40)
 *        `- Z (low 20, usage 50)
 *
 * P.elow = 100; P.usage = 60 + 40 + 50 = 150; P's children claim
 * min(60,0) + min(40,0) + min(50,20) = 20.  Unclaimed: 100 - 20 = 80, shared
 * by unprotected usage, 150 - 20 = 130:
 *   X = 0  + 80 * 60 / 130           = 4800 / 130 = 36 (36.9)
 *   Y = 0  + 80 * 40 / 130           = 3200 / 130 = 24 (24.6)
 *   Z = 20 + 80 * (50 - 20) / 130    = 20 + 2400 / 130 = 20 + 18 = 38
 * One level down, X.elow = 36, X.usage = 60, X's children claim 0 + 10:
 *   X1 = 0  + (36 - 10) * 30 / (60 - 10)        = 780 / 50 = 15 (15.6)
 *   X2 = 10 + (36 - 10) * (30 - 10) / (60 - 10) = 10 + 520 / 50 = 20
 * Without memory_recursiveprot only explicit claims count: X = Y = 0,
 * Z = 20, and below X (X.elow = 0 < 10 claimed): X1 = 0, X2 = 10 * 0 / 10 = 0.
 */
START_TEST(test_recursiveprot_floating_two_levels) {
        struct page_counter r, p, x, x1, x2, y, z;
        struct page_counter *order[] = { &p, &x, &x1, &x2, &y, &z };

        page_counter_init(&r, NULL, true);
        page_counter_init(&p, &r, true);
        page_counter_init(&x, &p, true);
        page_counter_init(&x1, &x, true);
        page_counter_init(&x2, &x, true);
        page_counter_init(&y, &p, true);
        page_counter_init(&z, &p, true);
        ck_assert_int_eq(page_counter_set_low(&p, 100), 0);
        ck_assert_int_eq(page_counter_set_low(&x2, 10), 0);
        ck_assert_int_eq(page_counter_set_low(&z, 20), 0);
        page_counter_charge(&x1, 30);
        page_counter_charge(&x2, 30);
        page_counter_charge(&y, 40);
        page_counter_charge(&z, 50);

        walk(&r, order, ELEMENTS(order), true);
        ck_assert_uint_eq(elow(&p), 100);
        ck_assert_uint_eq(elow(&x), 36);
        ck_assert_uint_eq(elow(&y), 24);
        ck_assert_uint_eq(elow(&z), 38);
        ck_assert_uint_eq(elow(&x1), 15);
        ck_assert_uint_eq(elow(&x2), 20);
        ck_assert_uint_eq(emin(&x1), 0); /* no min anywhere */

        walk(&r, order, ELEMENTS(order), false);
        ck_assert_uint_eq(elow(&x), 0);
        ck_assert_uint_eq(elow(&y), 0);
        ck_assert_uint_eq(elow(&z), 20);
        ck_assert_uint_eq(elow(&x1), 0);
        ck_assert_uint_eq(elow(&x2), 0);
}
END_TEST

/*
 * memory_recursiveprot under a parent whose low is "max".  P.elow =
 * PAGE_COUNTER_MAX = 2^51 - 1 = 2251799813685247; children X (usage 10000),
 * Y (usage 30000), no claims of their own:
 *   X = MAX * 10000 / 40000 = floor(2251799813685247 / 4)     = 562949953421311
 *   Y = MAX * 30000 / 40000 = floor(6755399441055741 / 4)     = 1688849860263935
 * Both are fully protected.  The kernel's 64-bit product MAX * 10000 wraps
 * here; the 128-bit product gives the exact quotient.
 */
START_TEST(test_recursiveprot_parent_max) {
        struct page_counter r, p, x, y;
        struct page_counter *order[] = { &p, &x, &y };

        page_counter_init(&r, NULL, true);
        page_counter_init(&p, &r, true);
        page_counter_init(&x, &p, true);
        page_counter_init(&y, &p, true);
        ck_assert_int_eq(page_counter_set_low(&p, PAGE_COUNTER_MAX), 0);
        page_counter_charge(&x, 10000);
        page_counter_charge(&y, 30000);

        walk(&r, order, ELEMENTS(order), true);
        ck_assert_uint_eq(PAGE_COUNTER_MAX, 2251799813685247UL);
        ck_assert_uint_eq(elow(&x), 562949953421311UL);
        ck_assert_uint_eq(elow(&y), 1688849860263935UL);
        ck_assert(page_counter_below_low(&r, &x));
        ck_assert(page_counter_below_low(&r, &y));
}
END_TEST

static Suite *protection_suite(void) {
        Suite *s = suite_create("protection");
        TCase *tc = tcase_create("protection");

        tcase_add_test(tc, test_effective_protection_function);
        tcase_add_test(tc, test_selftest_tree_min);
        tcase_add_test(tc, test_selftest_tree_low);
        tcase_add_test(tc, test_selftest_tree_recursiveprot);
        tcase_add_test(tc, test_protection_capped_by_ancestor);
        tcase_add_test(tc, test_reclaim_root_is_unprotected);
        tcase_add_test(tc, test_no_usage_is_skipped);
        tcase_add_test(tc, test_undercommitted_and_recursiveprot);
        tcase_add_test(tc, test_recursiveprot_floating_two_levels);
        tcase_add_test(tc, test_recursiveprot_parent_max);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(protection_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
