/* SPDX-License-Identifier: MIT */
/*
 * test-charge.c - daemon/core/charge.c: the charge decision
 * (try_charge_memcg()) and the charge batch policy, without a daemon.
 */
#include <check.h>
#include <stdlib.h>

#include "charge.h"
#include "config.h"
#include "tenant.h"

#define CAPACITY_PAGES 4096UL
#define NCPUS 2
#define BROKER_BATCH 64u

static struct tenant_tree *tree;

static void setup(void) {
        ck_assert_int_eq(tenant_tree_new(CAPACITY_PAGES, NCPUS, &tree), 0);
}

static void teardown(void) {
        tenant_tree_free(tree);
        tree = NULL;
}

static struct tenant *create(const char *path) {
        struct tenant *t = NULL;

        ck_assert_int_eq(tenant_create(tree, path, &t), 0);
        return t;
}

static unsigned long usage(const struct tenant *t) {
        return page_counter_read(&t->memory);
}

/* Whether @res asks to count @event on @t. */
static bool has_event(const struct tenant_charge *res, const struct tenant *t, enum mb_event event) {
        for (size_t i = 0; i < res->nevents; i++)
                if (res->events[i].tenant == t && res->events[i].event == event)
                        return true;
        return false;
}

START_TEST(test_fails_at_the_right_ancestor) {
        struct tenant *a = create("a"), *b = create("a/b"), *c = create("a/b/c");
        struct tenant_charge res;

        ck_assert_int_eq(page_counter_set_max(&a->memory, 100), 0);
        ck_assert_int_eq(page_counter_set_max(&c->memory, 1000), 0);
        ck_assert(tenant_try_charge(c, 60, 60, 0, &res));
        ck_assert_uint_eq(res.charged, 60);

        ck_assert(!tenant_try_charge(c, 50, 50, 0, &res));
        ck_assert_ptr_eq(res.over, a); /* not c (its max is larger), not b */
        ck_assert_uint_eq(res.charged, 0);
        /* Nothing stays charged anywhere, and the events are the caller's:
         * nothing was counted yet. */
        ck_assert_uint_eq(usage(c), 60);
        ck_assert_uint_eq(usage(b), 60);
        ck_assert_uint_eq(usage(a), 60);
        ck_assert_uint_eq(usage(tree->root), 60);
        ck_assert_uint_eq(res.nevents, 1);
        ck_assert(has_event(&res, a, MB_EVENT_MAX));
        ck_assert_uint_eq(tenant_event_count(a, MB_EVENT_MAX, false), 0);

        /* The capacity is the root's max: failing there names the root. */
        page_counter_set_max(&a->memory, PAGE_COUNTER_MAX);
        page_counter_set_max(&c->memory, PAGE_COUNTER_MAX);
        ck_assert(!tenant_try_charge(c, CAPACITY_PAGES, CAPACITY_PAGES, 0, &res));
        ck_assert_ptr_eq(res.over, tree->root);
}
END_TEST

START_TEST(test_batch_falls_back_to_need) {
        struct tenant *a = create("a");
        struct tenant_charge res;

        ck_assert_int_eq(page_counter_set_max(&a->memory, 100), 0);
        ck_assert(tenant_try_charge(a, 90, 90, 0, &res));

        /* The batch does not fit, what is needed does: charged, no `max`. */
        ck_assert(tenant_try_charge(a, 64, 5, 0, &res));
        ck_assert_uint_eq(res.charged, 5);
        ck_assert_uint_eq(usage(a), 95);
        ck_assert_uint_eq(res.nevents, 0);
        ck_assert_ptr_null(res.over);

        /* Neither fits: the failure is counted once, for the charge. */
        ck_assert(!tenant_try_charge(a, 64, 6, 0, &res));
        ck_assert_uint_eq(usage(a), 95);
        ck_assert_uint_eq(res.nevents, 1);
        ck_assert(has_event(&res, a, MB_EVENT_MAX));
}
END_TEST

START_TEST(test_high_event_at_every_level_over_high) {
        struct tenant *a = create("a"), *b = create("a/b"), *c = create("a/b/c");
        struct tenant_charge res;

        ck_assert_int_eq(page_counter_set_high(&a->memory, 10), 0);
        ck_assert_int_eq(page_counter_set_high(&c->memory, 15), 0);
        ck_assert(tenant_try_charge(c, 8, 8, 0, &res));
        ck_assert(!res.over_high);
        ck_assert_uint_eq(res.nevents, 0);

        /* 16 pages: above c's high and a's, not b's (none): a high charge
         * succeeds; as in try_charge_memcg(), no `high` event yet (those
         * are reclaim_high()'s, one per reclaim pass of each level). */
        ck_assert(tenant_try_charge(c, 8, 8, 0, &res));
        ck_assert_uint_eq(res.charged, 8);
        ck_assert(res.over_high);
        ck_assert_uint_eq(res.nevents, 0);

        /* The same check alone, for a charge made by someone else. */
        res = (struct tenant_charge) {};
        tenant_charge_check_high(b, &res);
        ck_assert(res.over_high);
        ck_assert_uint_eq(res.nevents, 0);
        res = (struct tenant_charge) {};
        page_counter_uncharge(&c->memory, 8);
        tenant_charge_check_high(c, &res);
        ck_assert(!res.over_high);
}
END_TEST

START_TEST(test_retry_counts_no_second_max) {
        struct tenant *a = create("a");
        struct tenant_charge res;

        ck_assert_int_eq(page_counter_set_max(&a->memory, 10), 0);
        ck_assert(!tenant_try_charge(a, 20, 20, TENANT_CHARGE_RETRY, &res));
        ck_assert_ptr_eq(res.over, a);
        ck_assert_uint_eq(res.nevents, 0);
}
END_TEST

START_TEST(test_next_step_drain_reclaim_then_oom) {
        struct tenant *a = create("a"), *b = create("a/b");
        struct tenant_charge res;
        struct tenant_charge_retry retry = {};
        unsigned long goal;

        ck_assert_int_eq(page_counter_set_max(&a->memory, 100), 0);
        ck_assert(tenant_try_charge(b, 90, 90, 0, &res));
        ck_assert(!tenant_try_charge(b, 40, 40, 0, &res));
        ck_assert_ptr_eq(res.over, a);

        /* drain_all_stock() first. */
        ck_assert_int_eq(tenant_charge_next(&res, 40, &retry, &goal), TENANT_CHARGE_DRAIN);
        retry.drained = true;
        /* Then reclaim what is missing below a's max: 60 - (100 - 90). */
        ck_assert_int_eq(tenant_charge_next(&res, 60, &retry, &goal), TENANT_CHARGE_RECLAIM);
        ck_assert_uint_eq(goal, 50);
        /* A small shortfall still reclaims a cluster. */
        ck_assert_int_eq(tenant_charge_next(&res, 11, &retry, &goal), TENANT_CHARGE_RECLAIM);
        ck_assert_uint_eq(goal, RECLAIM_CLUSTER_PAGES);
        ck_assert_uint_eq(res.nevents, 1); /* still only the `max` */

        /* Retries exhausted: `oom` at the failing level, then ENOMEM. */
        retry.fruitless = MAX_RECLAIM_RETRIES;
        ck_assert_int_eq(tenant_charge_next(&res, 40, &retry, &goal), TENANT_CHARGE_NOMEM);
        ck_assert_uint_eq(res.nevents, 2);
        ck_assert(has_event(&res, a, MB_EVENT_MAX));
        ck_assert(has_event(&res, a, MB_EVENT_OOM));
        ck_assert(!has_event(&res, b, MB_EVENT_OOM));
}
END_TEST

START_TEST(test_next_step_oom_kill_and_limits) {
        struct tenant *a = create("a");
        struct tenant_charge res;
        struct tenant_charge_retry retry = { .drained = true };
        unsigned long goal;

        ck_assert_int_eq(page_counter_set_max(&a->memory, 10), 0);
        a->oom_policy = MB_OOM_KILL;
        ck_assert(!tenant_try_charge(a, 20, 20, 0, &res));

        /* Retries that take too long, even fruitful ones, end. */
        retry.elapsed_usec = RECLAIM_MAX_USEC;
        ck_assert_int_eq(tenant_charge_next(&res, 20, &retry, &goal), TENANT_CHARGE_OOM_KILL);
        ck_assert(has_event(&res, a, MB_EVENT_OOM));

        /* __GFP_NORETRY: after one reclaim round, ENOMEM without `oom`
         * (try_charge_memcg() gives up before mem_cgroup_oom()). */
        res.nevents = 0;
        retry = (struct tenant_charge_retry) { .drained = true, .noretry = true };
        ck_assert_int_eq(tenant_charge_next(&res, 20, &retry, &goal), TENANT_CHARGE_RECLAIM);
        retry.reclaim_rounds = 1;
        ck_assert_int_eq(tenant_charge_next(&res, 20, &retry, &goal), TENANT_CHARGE_NOMEM);
        ck_assert_uint_eq(res.nevents, 0);

        /* Nobody to ask: straight to the OOM path. */
        res.nevents = 0;
        retry = (struct tenant_charge_retry) { .drained = true, .reclaim_exhausted = true };
        ck_assert_int_eq(tenant_charge_next(&res, 20, &retry, &goal), TENANT_CHARGE_OOM_KILL);
        ck_assert_uint_eq(res.nevents, 1);
}
END_TEST

START_TEST(test_unlimited_batch) {
        struct tenant *a = create("a"), *b = create("a/b");

        /* Nothing limited, broker empty: the larger batch. */
        ck_assert_uint_eq(tenant_effective_charge_batch(b, BROKER_BATCH, 0),
                          BROKER_BATCH * TENANT_UNLIMITED_CHARGE_BATCH_FACTOR);
        /* The tenant's (or an ancestor's) ChargeBatch= is the base. */
        a->charge_batch = 16;
        ck_assert_uint_eq(tenant_effective_charge_batch(b, BROKER_BATCH, 0), 16 * TENANT_UNLIMITED_CHARGE_BATCH_FACTOR);
        /* Any limit or protection up the tree: the plain batch. */
        ck_assert_int_eq(page_counter_set_low(&a->memory, 1), 0);
        ck_assert_uint_eq(tenant_effective_charge_batch(b, BROKER_BATCH, 0), 16);
        ck_assert_int_eq(page_counter_set_low(&a->memory, 0), 0);
        ck_assert_int_eq(page_counter_set_high(&b->memory, 1000), 0);
        ck_assert_uint_eq(tenant_effective_charge_batch(b, BROKER_BATCH, 0), 16);
        /* The larger batch never passes what a Charge may carry. */
        ck_assert_uint_eq(tenant_unlimited_charge_batch(MB_CHARGE_MAX_PAGES), MB_CHARGE_MAX_PAGES);
}
END_TEST

START_TEST(test_unlimited_batch_hysteresis) {
        struct tenant *a = create("a"), *other = create("other");
        unsigned big = BROKER_BATCH * TENANT_UNLIMITED_CHARGE_BATCH_FACTOR;

        /* Below a quarter of the capacity: the larger batch. */
        page_counter_charge(&other->memory, CAPACITY_PAGES / 4 - 1);
        ck_assert_uint_eq(tenant_effective_charge_batch(a, BROKER_BATCH, 0), big);
        ck_assert_uint_eq(tenant_effective_charge_batch(a, BROKER_BATCH, BROKER_BATCH), big);

        /* Between a quarter and a half: each client keeps what it has; a
         * new one gets the plain batch. */
        page_counter_charge(&other->memory, 2);
        ck_assert_uint_eq(tenant_effective_charge_batch(a, BROKER_BATCH, big), big);
        ck_assert_uint_eq(tenant_effective_charge_batch(a, BROKER_BATCH, BROKER_BATCH), BROKER_BATCH);
        ck_assert_uint_eq(tenant_effective_charge_batch(a, BROKER_BATCH, 0), BROKER_BATCH);
        page_counter_charge(&other->memory, CAPACITY_PAGES / 4 - 1); /* exactly half */
        ck_assert_uint_eq(usage(tree->root), CAPACITY_PAGES / 2);
        ck_assert_uint_eq(tenant_effective_charge_batch(a, BROKER_BATCH, big), big);

        /* Above a half: taken back. */
        page_counter_charge(&other->memory, 1);
        ck_assert_uint_eq(tenant_effective_charge_batch(a, BROKER_BATCH, big), BROKER_BATCH);

        /* Down between the thresholds again: still the plain batch for a
         * client that has it. */
        page_counter_uncharge(&other->memory, CAPACITY_PAGES / 8);
        ck_assert_uint_eq(tenant_effective_charge_batch(a, BROKER_BATCH, BROKER_BATCH), BROKER_BATCH);
}
END_TEST

static Suite *charge_suite(void) {
        Suite *s = suite_create("charge");
        TCase *tc = tcase_create("core");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_fails_at_the_right_ancestor);
        tcase_add_test(tc, test_batch_falls_back_to_need);
        tcase_add_test(tc, test_high_event_at_every_level_over_high);
        tcase_add_test(tc, test_retry_counts_no_second_max);
        tcase_add_test(tc, test_next_step_drain_reclaim_then_oom);
        tcase_add_test(tc, test_next_step_oom_kill_and_limits);
        tcase_add_test(tc, test_unlimited_batch);
        tcase_add_test(tc, test_unlimited_batch_hysteresis);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(charge_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
