/* SPDX-License-Identifier: MIT */
/*
 * test-psi.c - pressure stall accounting (daemon/core/psi.c), checked
 * against the kernel's kernel/sched/psi.c: the SOME/FULL states, the
 * hierarchy through the tenant tree, the fixed-point averages and the
 * trigger windows, on a synthetic clock.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "psi.h"
#include "tenant.h"

#define MSEC 1000ULL
#define SEC 1000000ULL
#define T0 (1000 * SEC) /* an arbitrary start of the clock */

static struct psi_reading rd(struct psi_group *g, enum psi_kind k, uint64_t now) {
        struct psi_reading r;

        psi_group_read(g, k, now, &r);
        return r;
}

/* SOME while one of two members stalls, FULL only while both do. */
START_TEST(test_some_full) {
        struct psi_group g;

        ck_assert_int_eq(psi_group_init(&g, T0), 0);
        psi_group_change(&g, 2, 0, T0);
        psi_group_change(&g, 0, 1, T0 + 100 * MSEC); /* one stalls */
        psi_group_change(&g, 0, 1, T0 + 300 * MSEC); /* both */
        psi_group_change(&g, 0, -1, T0 + 350 * MSEC); /* one again */
        psi_group_change(&g, 0, -1, T0 + 400 * MSEC); /* none */
        ck_assert_uint_eq(rd(&g, PSI_SOME, T0 + 1 * SEC).total_usec, 300 * MSEC);
        ck_assert_uint_eq(rd(&g, PSI_FULL, T0 + 1 * SEC).total_usec, 50 * MSEC);

        /* The stall in progress counts at a read. */
        psi_group_change(&g, 0, 1, T0 + 1 * SEC);
        ck_assert_uint_eq(rd(&g, PSI_SOME, T0 + 1 * SEC + 10 * MSEC).total_usec, 310 * MSEC);
        ck_assert_uint_eq(rd(&g, PSI_FULL, T0 + 1 * SEC + 10 * MSEC).total_usec, 50 * MSEC);

        /* The other member leaves: the one left is all of them, FULL. */
        psi_group_change(&g, -1, 0, T0 + 1 * SEC + 20 * MSEC);
        ck_assert_uint_eq(rd(&g, PSI_FULL, T0 + 1 * SEC + 30 * MSEC).total_usec, 60 * MSEC);
        /* The stalled one leaves: nothing more. */
        psi_group_change(&g, -1, -1, T0 + 1 * SEC + 40 * MSEC);
        ck_assert_uint_eq(rd(&g, PSI_SOME, T0 + 5 * SEC).total_usec, 340 * MSEC);
        ck_assert_uint_eq(rd(&g, PSI_FULL, T0 + 5 * SEC).total_usec, 70 * MSEC);
        psi_group_destroy(&g);
}
END_TEST

/* Counts never go negative nor stalled above members. */
START_TEST(test_clamped) {
        struct psi_group g;

        ck_assert_int_eq(psi_group_init(&g, T0), 0);
        psi_group_change(&g, -1, -1, T0);
        ck_assert_uint_eq(g.nr_members, 0);
        ck_assert_uint_eq(g.nr_stalled, 0);
        psi_group_change(&g, 0, 1, T0); /* no member to stall */
        ck_assert_uint_eq(g.nr_stalled, 0);
        ck_assert_uint_eq(rd(&g, PSI_SOME, T0 + SEC).total_usec, 0);
        psi_group_destroy(&g);
}
END_TEST

/* One period at 50 %: calc_load(0, EXP_10s, 50 * FIXED_1) =
 * (102400 * 371 + 2047) / 2048 = 18551 -> 9.05 %; EXP_60s: 102400 * 67 /
 * 2048 -> 1.63 %; EXP_300s: 102400 * 14 / 2048 -> 0.34 %. */
START_TEST(test_avg_one_period) {
        struct psi_group g;
        struct psi_reading r;

        ck_assert_int_eq(psi_group_init(&g, T0), 0);
        psi_group_change(&g, 1, 1, T0);
        psi_group_change(&g, 0, -1, T0 + 1 * SEC);
        /* Before the period ends, no average. */
        r = rd(&g, PSI_SOME, T0 + 1999 * MSEC);
        ck_assert_uint_eq(r.avg10, 0);
        r = rd(&g, PSI_SOME, T0 + 2 * SEC);
        ck_assert_uint_eq(r.avg10, 905);
        ck_assert_uint_eq(r.avg60, 163);
        ck_assert_uint_eq(r.avg300, 34);
        ck_assert_uint_eq(r.total_usec, 1 * SEC);
        /* A single member stalled is FULL too. */
        r = rd(&g, PSI_FULL, T0 + 2 * SEC);
        ck_assert_uint_eq(r.avg10, 905);
        psi_group_destroy(&g);
}
END_TEST

/* A stall that goes on drives avg10 toward 100 %; when it ends the
 * averages decay, avg10 fastest; a read long after (missed periods) gives
 * what reading every period would. */
START_TEST(test_avg_rise_decay) {
        struct psi_group g, h;
        struct psi_reading r, s;
        uint64_t now = T0;

        ck_assert_int_eq(psi_group_init(&g, T0), 0);
        ck_assert_int_eq(psi_group_init(&h, T0), 0);
        psi_group_change(&g, 1, 1, T0);
        psi_group_change(&h, 1, 1, T0);
        for (int i = 0; i < 30; i++) {
                now += PSI_PERIOD_USEC;
                r = rd(&g, PSI_SOME, now);
        }
        ck_assert_uint_ge(r.avg10, 9900);
        ck_assert_uint_le(r.avg10, 10000);
        ck_assert_uint_lt(r.avg60, r.avg10);
        ck_assert_uint_lt(r.avg300, r.avg60);
        ck_assert_uint_eq(r.total_usec, 60 * SEC);
        /* h was not read meanwhile: the same figures, as if its periods
         * had been sampled on time (its state was known throughout). */
        s = rd(&h, PSI_SOME, now);
        ck_assert_uint_eq(s.total_usec, 60 * SEC);
        ck_assert_uint_eq(s.avg10, r.avg10);
        ck_assert_uint_eq(s.avg60, r.avg60);
        ck_assert_uint_eq(s.avg300, r.avg300);

        psi_group_change(&g, 0, -1, now);
        psi_group_change(&h, 0, -1, now);
        for (int i = 0; i < 10; i++) {
                now += PSI_PERIOD_USEC;
                r = rd(&g, PSI_SOME, now);
        }
        /* 20 s: e^-2 of 100 % is 13.5 %. */
        ck_assert_uint_lt(r.avg10, 1400);
        ck_assert_uint_gt(r.avg10, 1300);
        ck_assert_uint_gt(r.avg60, r.avg10);
        ck_assert_uint_eq(r.total_usec, 60 * SEC);
        /* Ten idle periods folded at once (calc_load_n(), as the kernel
         * does once its averaging work went to sleep) decay as ten reads,
         * but for the rounding of fixed_power_int(). */
        s = rd(&h, PSI_SOME, now);
        ck_assert_uint_le(abs((int) s.avg10 - (int) r.avg10), 5);
        ck_assert_uint_le(abs((int) s.avg60 - (int) r.avg60), 5);
        ck_assert_uint_le(abs((int) s.avg300 - (int) r.avg300), 5);
        for (int i = 0; i < 300; i++) {
                now += PSI_PERIOD_USEC;
                r = rd(&g, PSI_SOME, now);
        }
        ck_assert_uint_eq(r.avg10, 0);
        psi_group_destroy(&g);
        psi_group_destroy(&h);
}
END_TEST

START_TEST(test_format) {
        struct psi_reading some = { .total_usec = 1234567, .avg10 = 905, .avg60 = 163, .avg300 = 4 };
        struct psi_reading full = { 0 };
        char buf[PSI_TEXT_MAX_BYTES];

        ck_assert_int_gt(psi_format(&some, &full, buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "some avg10=9.05 avg60=1.63 avg300=0.04 total=1234567\n"
                              "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
        some = (struct psi_reading) { UINT64_MAX, 10000, 10000, 10000 };
        full = some;
        ck_assert_int_gt(psi_format(&some, &full, buf, sizeof(buf)), 0);
        ck_assert_int_eq(psi_format(&some, &full, buf, 20), -ENOBUFS);
}
END_TEST

/* Hierarchy: a stall counts in its tenant and every ancestor, the root
 * included; a sibling stays at 0; FULL of the parent needs every client
 * of the subtree stalled. */
START_TEST(test_tenant_hierarchy) {
        struct tenant_tree *tree;
        struct tenant *a, *b, *sib;
        struct psi_reading r;
        uint64_t now;

        ck_assert_int_eq(tenant_tree_new(1UL << 20, 1, &tree), 0);
        ck_assert_int_eq(tenant_create(tree, "p/a", &a), 0);
        ck_assert_int_eq(tenant_create(tree, "p/b", &b), 0);
        ck_assert_int_eq(tenant_create(tree, "q", &sib), 0);
        now = psi_now_usec();
        tenant_pressure_change_at(a, 1, 0, now);
        tenant_pressure_change_at(b, 1, 0, now);
        tenant_pressure_change_at(sib, 1, 0, now);
        tenant_pressure_change_at(a, 0, 1, now);
        tenant_pressure_change_at(a, 0, -1, now + 100 * MSEC);
        tenant_pressure_read_at(a, PSI_SOME, now + SEC, &r);
        ck_assert_uint_eq(r.total_usec, 100 * MSEC);
        tenant_pressure_read_at(a, PSI_FULL, now + SEC, &r);
        ck_assert_uint_eq(r.total_usec, 100 * MSEC);
        tenant_pressure_read_at(a->parent, PSI_SOME, now + SEC, &r);
        ck_assert_uint_eq(r.total_usec, 100 * MSEC);
        tenant_pressure_read_at(a->parent, PSI_FULL, now + SEC, &r);
        ck_assert_uint_eq(r.total_usec, 0); /* b did not stall */
        tenant_pressure_read_at(tree->root, PSI_SOME, now + SEC, &r);
        ck_assert_uint_eq(r.total_usec, 100 * MSEC);
        tenant_pressure_read_at(b, PSI_SOME, now + SEC, &r);
        ck_assert_uint_eq(r.total_usec, 0);
        tenant_pressure_read_at(sib, PSI_SOME, now + SEC, &r);
        ck_assert_uint_eq(r.total_usec, 0);
        /* Both of p's clients at once: p's FULL. */
        tenant_pressure_change_at(a, 0, 1, now + 2 * SEC);
        tenant_pressure_change_at(b, 0, 1, now + 2 * SEC);
        tenant_pressure_change_at(a, 0, -1, now + 2 * SEC + 30 * MSEC);
        tenant_pressure_change_at(b, 0, -1, now + 2 * SEC + 50 * MSEC);
        tenant_pressure_read_at(a->parent, PSI_FULL, now + 3 * SEC, &r);
        ck_assert_uint_eq(r.total_usec, 30 * MSEC);
        tenant_pressure_read_at(a->parent, PSI_SOME, now + 3 * SEC, &r);
        ck_assert_uint_eq(r.total_usec, 150 * MSEC);
        /* The root has sib's client too: never FULL. */
        tenant_pressure_read_at(tree->root, PSI_FULL, now + 3 * SEC, &r);
        ck_assert_uint_eq(r.total_usec, 0);
        tenant_tree_free(tree);
}
END_TEST

START_TEST(test_trigger_parse) {
        enum psi_kind k;
        uint64_t thr, win;

        ck_assert_int_eq(psi_trigger_parse("some 150000 1000000", &k, &thr, &win), 0);
        ck_assert_int_eq(k, PSI_SOME);
        ck_assert_uint_eq(thr, 150000);
        ck_assert_uint_eq(win, 1000000);
        ck_assert_int_eq(psi_trigger_parse("full 500000 500000\n", &k, &thr, &win), 0);
        ck_assert_int_eq(k, PSI_FULL);
        ck_assert_int_eq(psi_trigger_parse("full 1 10000000", &k, &thr, &win), 0);
        ck_assert_int_eq(psi_trigger_parse("some 100 499999", &k, &thr, &win), -EINVAL);   /* window too short */
        ck_assert_int_eq(psi_trigger_parse("some 100 10000001", &k, &thr, &win), -EINVAL); /* too long */
        ck_assert_int_eq(psi_trigger_parse("some 0 1000000", &k, &thr, &win), -EINVAL);
        ck_assert_int_eq(psi_trigger_parse("some 1000001 1000000", &k, &thr, &win), -EINVAL);
        ck_assert_int_eq(psi_trigger_parse("many 1 1000000", &k, &thr, &win), -EINVAL);
        ck_assert_int_eq(psi_trigger_parse("some 1 1000000 x", &k, &thr, &win), -EINVAL);
        ck_assert_int_eq(psi_trigger_parse("some 1", &k, &thr, &win), -EINVAL);
        ck_assert_int_eq(psi_trigger_parse("", &k, &thr, &win), -EINVAL);
        ck_assert_int_eq(psi_trigger_parse(NULL, &k, &thr, &win), -EINVAL);
}
END_TEST

/* Stalled all the time, polled every 50 ms: over 10 windows of 1 s the
 * trigger (100 ms per 1 s) fires once per window, the first time as soon
 * as 100 ms have stalled. */
START_TEST(test_trigger_once_per_window) {
        struct psi_trigger tr;
        uint64_t now = T0, total = 0, first = 0;
        unsigned events = 0;

        psi_trigger_init(&tr, PSI_SOME, 100 * MSEC, 1 * SEC, total, now);
        for (int i = 0; i < 200; i++) {
                now += 50 * MSEC;
                total += 50 * MSEC;
                if (psi_trigger_update(&tr, total, now)) {
                        if (!first)
                                first = now;
                        events++;
                }
        }
        ck_assert_uint_eq(first, T0 + 100 * MSEC);
        /* 10 s of stall, one event per 1 s window. */
        ck_assert_uint_ge(events, 9);
        ck_assert_uint_le(events, 10);
}
END_TEST

/* Events are at least a window apart. */
START_TEST(test_trigger_rate_limited) {
        struct psi_trigger tr;
        uint64_t now = T0, total = 0, last = 0;

        psi_trigger_init(&tr, PSI_SOME, 10 * MSEC, 500 * MSEC, total, now);
        for (int i = 0; i < 1000; i++) {
                now += 10 * MSEC;
                total += 10 * MSEC;
                if (psi_trigger_update(&tr, total, now)) {
                        if (last)
                                ck_assert_uint_ge(now - last, 500 * MSEC);
                        last = now;
                }
        }
        ck_assert_uint_ne(last, 0);
}
END_TEST

/* 40 ms of stall once a second: a window (plus the previous one's
 * interpolated growth) never holds 100 ms: never. */
START_TEST(test_trigger_under_threshold) {
        struct psi_trigger tr;
        uint64_t now = T0, total = 0;

        psi_trigger_init(&tr, PSI_SOME, 100 * MSEC, 1 * SEC, total, now);
        for (int i = 0; i < 600; i++) {
                now += 50 * MSEC;
                if (i % 20 == 0)
                        total += 40 * MSEC;
                ck_assert(!psi_trigger_update(&tr, total, now));
        }
}
END_TEST

/* No stall: no event, however long.  A stall of 600 ms against 200 ms per
 * 1 s: the first event at 300 ms (the window restarts at the first new
 * stall, 100 ms in, and interpolates 90 % of that 100 ms at 200 ms); the breach that goes on within that
 * window is kept pending and delivered once the window has passed
 * (update_triggers(): rate-limited, not dropped); then nothing more. */
START_TEST(test_trigger_stops) {
        struct psi_trigger tr;
        uint64_t now = T0, total = 0;
        unsigned events = 0;
        uint64_t first = 0, second = 0;

        psi_trigger_init(&tr, PSI_FULL, 200 * MSEC, 1 * SEC, total, now);
        for (int i = 0; i < 100; i++) {
                now += 100 * MSEC;
                ck_assert(!psi_trigger_update(&tr, total, now));
        }
        /* 600 ms of stall, then none for 20 s. */
        for (int i = 0; i < 206; i++) {
                now += 100 * MSEC;
                if (i < 6)
                        total += 100 * MSEC;
                if (psi_trigger_update(&tr, total, now)) {
                        events++;
                        if (!first)
                                first = now;
                        else if (!second)
                                second = now;
                }
        }
        ck_assert_uint_eq(events, 2);
        ck_assert_uint_eq(first, T0 + 10 * SEC + 300 * MSEC);
        ck_assert_uint_eq(second, first + 1 * SEC);
}
END_TEST

static Suite *psi_suite(void) {
        Suite *s = suite_create("psi");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_some_full);
        tcase_add_test(tc, test_clamped);
        tcase_add_test(tc, test_avg_one_period);
        tcase_add_test(tc, test_avg_rise_decay);
        tcase_add_test(tc, test_format);
        tcase_add_test(tc, test_tenant_hierarchy);
        tcase_add_test(tc, test_trigger_parse);
        tcase_add_test(tc, test_trigger_once_per_window);
        tcase_add_test(tc, test_trigger_rate_limited);
        tcase_add_test(tc, test_trigger_under_threshold);
        tcase_add_test(tc, test_trigger_stops);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(psi_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
