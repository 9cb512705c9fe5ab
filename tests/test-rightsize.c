/* SPDX-License-Identifier: MIT */
/*
 * test-rightsize.c - daemon/core/rightsize.c: MemoryPressureTarget= and the
 * senpai-style loop, without a daemon.  A simulated tenant stands in for
 * the clients: a hot set that stalls when reclaimed below it, a cold cache
 * above it.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rightsize.h"

#define SEC_USEC 1000000ULL

static struct rightsize_target target(const char *s) {
        struct rightsize_target t;
        const char *reason = NULL;

        ck_assert_msg(rightsize_target_parse(s, &t, &reason) == 0, "%s: %s", s, reason ? reason : "?");
        return t;
}

START_TEST(test_parse) {
        struct rightsize_target t;
        char buf[RIGHTSIZE_TARGET_STRING_MAX];
        const char *reason = NULL;

        t = target("some avg10 0.1%");
        ck_assert(t.enabled);
        ck_assert_int_eq(t.kind, RIGHTSIZE_SOME);
        ck_assert_int_eq(t.window, RIGHTSIZE_AVG10);
        ck_assert_uint_eq(t.ppm, 1000);
        ck_assert_str_eq(rightsize_target_format(&t, buf, sizeof(buf)), "some avg10 0.1%");

        t = target("  full\tavg300   5%  ");
        ck_assert_int_eq(t.kind, RIGHTSIZE_FULL);
        ck_assert_int_eq(t.window, RIGHTSIZE_AVG300);
        ck_assert_uint_eq(t.ppm, 50000);
        ck_assert_str_eq(rightsize_target_format(&t, buf, sizeof(buf)), "full avg300 5%");

        t = target("some avg60 100%");
        ck_assert_uint_eq(t.ppm, 1000000);
        t = target("some avg60 0.0001%");
        ck_assert_uint_eq(t.ppm, 1);
        ck_assert_str_eq(rightsize_target_format(&t, buf, sizeof(buf)), "some avg60 0.0001%");
        t = target("some avg60 2.50%");
        ck_assert_str_eq(rightsize_target_format(&t, buf, sizeof(buf)), "some avg60 2.5%");

        ck_assert(!target("no").enabled);
        ck_assert(!target("").enabled);
        ck_assert(!target("   ").enabled);
        ck_assert_str_eq(rightsize_target_format(&(struct rightsize_target) { 0 }, buf, sizeof(buf)), "no");

        static const char *const bad[] = {
                "some",           "some avg10",      "any avg10 1%",   "some avg5 1%",     "some avg10 1",
                "some avg10 0%",  "some avg10 101%", "some avg10 -1%", "some avg10 0.00001%", "some avg10 %",
                "some avg10 .%",  "some avg10 1%%",  "yes",            "some avg10 1% x",  "SOME avg10 1%",
                "some avg10 1x%", "nope",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                reason = NULL;
                ck_assert_msg(rightsize_target_parse(bad[i], &t, &reason) == -EINVAL, "accepted \"%s\"", bad[i]);
                ck_assert_ptr_nonnull(reason);
        }
        ck_assert(rightsize_target_equal(&(struct rightsize_target) { 0 },
                                         &(struct rightsize_target) { .ppm = 5 }));
        t = target("some avg10 1%");
        ck_assert(!rightsize_target_equal(&t, &(struct rightsize_target) { 0 }));
}
END_TEST

/* A tenant as the loop sees it: hot pages that stall when missing, cold
 * pages that do not.  Reclaim takes cold pages first (LRU). */
struct sim {
        uint64_t hot, cold;      /* pages now */
        uint64_t hot_set;        /* pages it needs */
        uint64_t stall_usec;     /* cumulative */
        uint64_t now;
        uint64_t floor;
        uint64_t min_usage_seen;
};

static uint64_t sim_usage(const struct sim *s) {
        return s->hot + s->cold;
}

/* One interval: missing hot pages are faulted back in, each costing
 * @refault_usec of stall; then the controller runs and its step is
 * reclaimed (cold first). */
static uint64_t sim_tick(struct sim *s, struct rightsize *rs, uint64_t interval_usec, uint64_t refault_usec) {
        uint64_t step, got;
        struct rightsize_input in;

        if (s->hot < s->hot_set) {
                s->stall_usec += (s->hot_set - s->hot) * refault_usec;
                s->hot = s->hot_set;
        }
        s->now += interval_usec;
        in = (struct rightsize_input) { .now_usec = s->now, .stall_usec = s->stall_usec,
                                        .usage_pages = sim_usage(s), .floor_pages = s->floor };
        step = rightsize_tick(rs, &in);
        ck_assert_uint_le(step, in.usage_pages > s->floor ? in.usage_pages - s->floor : 0);
        if (step == 0)
                return 0;
        got = step;
        if (got <= s->cold)
                s->cold -= got;
        else {
                s->hot -= got - s->cold;
                s->cold = 0;
        }
        if (sim_usage(s) < s->min_usage_seen)
                s->min_usage_seen = sim_usage(s);
        rightsize_step_done(rs, got, 0, sim_usage(s));
        return step;
}

/* A 10x cold cache converges to the hot set: below it only by what one
 * step takes, the estimate near it, the pressure near the target. */
START_TEST(test_converges) {
        struct rightsize rs = { 0 };
        struct rightsize_target t = target("some avg10 1%");
        struct sim s = { .hot = 1000, .cold = 9000, .hot_set = 1000, .min_usage_seen = UINT64_MAX };
        uint64_t stall_before = 0, backoffs = 0;

        rightsize_set_target(&rs, &t);
        ck_assert_int_eq(rs.state, RIGHTSIZE_STATE_PROBING);
        for (int i = 0; i < 400; i++) {
                sim_tick(&s, &rs, SEC_USEC, 1000);
                if (rs.state == RIGHTSIZE_STATE_BACKOFF)
                        backoffs++;
                if (i == 199)
                        stall_before = s.stall_usec;
        }
        /* Converged: within 2x of the hot set, the cache gone. */
        ck_assert_uint_eq(s.cold, 0);
        ck_assert_uint_le(sim_usage(&s), 2 * s.hot_set);
        ck_assert_uint_ge(rs.wse_pages, s.hot_set / 2);
        ck_assert_uint_le(rs.wse_pages, 2 * s.hot_set);
        ck_assert_uint_gt(backoffs, 0);
        /* The steps near the hot set are small: it never lost much of it. */
        ck_assert_uint_ge(s.min_usage_seen, s.hot_set * 8 / 10);
        /* Over the last 200 s the stall stayed within a few times the
         * target (1% of 200 s = 2 s). */
        ck_assert_uint_le(s.stall_usec - stall_before, 3 * 200 * SEC_USEC / 100);
        ck_assert_uint_gt(rs.reclaimed_pages, 9000);
}
END_TEST

/* The first tick only reads; the steps grow while the pressure stays low,
 * by at most RIGHTSIZE_STEP_MAX_PPM of the usage; the limit follows the
 * usage down by each step. */
START_TEST(test_steps_grow_bounded) {
        struct rightsize rs = { 0 };
        struct rightsize_target t = target("some avg10 1%");
        struct rightsize_input in = { .usage_pages = 1000000 };
        uint64_t last_ppm = 0, got;

        rightsize_set_target(&rs, &t);
        ck_assert_uint_eq(rs.high_pages, RIGHTSIZE_HIGH_NONE);
        ck_assert_uint_eq(rightsize_tick(&rs, &in), 0);
        ck_assert_uint_eq(rs.high_pages, RIGHTSIZE_HIGH_NONE);
        for (int i = 1; i <= 10; i++) {
                uint64_t ppm;

                in.now_usec = (uint64_t) i * SEC_USEC;
                got = rightsize_tick(&rs, &in);
                ck_assert_uint_eq(got, rs.step_pages);
                ck_assert_uint_eq(rs.high_pages, in.usage_pages - got);
                ppm = got * RIGHTSIZE_PPM_MAX / in.usage_pages;
                ck_assert_uint_ge(ppm + 1, last_ppm); /* rounding */
                ck_assert_uint_le(ppm, RIGHTSIZE_STEP_MAX_PPM);
                last_ppm = ppm;
                in.usage_pages -= got; /* the reclaim got it all */
        }
        ck_assert_uint_ge(last_ppm + 1, RIGHTSIZE_STEP_MAX_PPM);
        /* Pressure half the target: a quarter of the step (senpai's square). */
        in.now_usec += SEC_USEC;
        in.avg_ppm = 5000;
        got = rightsize_tick(&rs, &in);
        ck_assert_uint_eq(got, in.usage_pages * RIGHTSIZE_STEP_MAX_PPM / RIGHTSIZE_PPM_MAX / 4);
}
END_TEST

/* Above the target: nothing is reclaimed and the next step is small again;
 * the average of the window counts as much as the interval's stalls. */
START_TEST(test_backoff) {
        struct rightsize rs = { 0 };
        struct rightsize_target t = target("some avg10 0.1%");
        struct rightsize_input in = { .usage_pages = 100000 };

        rightsize_set_target(&rs, &t);
        (void) rightsize_tick(&rs, &in);
        for (int i = 1; i <= 5; i++) {
                in.now_usec = (uint64_t) i * SEC_USEC;
                ck_assert_uint_gt(rightsize_tick(&rs, &in), 0);
        }
        /* 2 ms of stall in 1 s: 0.2% > 0.1%. */
        in.now_usec += SEC_USEC;
        in.stall_usec += 2000;
        ck_assert_uint_eq(rightsize_tick(&rs, &in), 0);
        ck_assert_int_eq(rs.state, RIGHTSIZE_STATE_BACKOFF);
        ck_assert_uint_eq(rs.last_pressure_ppm, 2000);
        /* No new stall, but the average is still above the target. */
        in.now_usec += SEC_USEC;
        in.avg_ppm = 1500;
        ck_assert_uint_eq(rightsize_tick(&rs, &in), 0);
        ck_assert_int_eq(rs.state, RIGHTSIZE_STATE_BACKOFF);
        /* The limit went up to the usage (above the limit the steps had
         * lowered to 75000) plus 10% of it (twice the target or more);
         * then 5% (1.5 times the target) above the usage is below it. */
        ck_assert_uint_eq(rs.high_pages, 110000);
        /* Back at the target: probing again from the smallest step (with
         * the error factor at 0 that is one page), from the limit, and the
         * estimate is the usage it grew back to. */
        in.now_usec += SEC_USEC;
        in.avg_ppm = 1000;
        in.usage_pages = 120000;
        ck_assert_uint_eq(rightsize_tick(&rs, &in), 120000 - 109999);
        ck_assert_uint_eq(rs.step_pages, 1);
        ck_assert_uint_eq(rs.high_pages, 109999);
        ck_assert_int_eq(rs.state, RIGHTSIZE_STATE_PROBING);
        ck_assert_uint_eq(rs.wse_pages, 120000);
        in.now_usec += SEC_USEC;
        in.avg_ppm = 0;
        in.usage_pages = 109999;
        ck_assert_uint_eq(rightsize_tick(&rs, &in), 109999 * 2 * RIGHTSIZE_STEP_MIN_PPM / RIGHTSIZE_PPM_MAX);
        /* Backing off while the usage presses on the limit: 10% more room
         * every interval. */
        in.now_usec += SEC_USEC;
        in.avg_ppm = 3000;
        in.usage_pages = rs.high_pages;
        (void) rightsize_tick(&rs, &in);
        ck_assert_uint_eq(rs.high_pages, in.usage_pages + in.usage_pages / 10);
}
END_TEST

/* Never below the floor (effective min/low), however large the step. */
START_TEST(test_floor) {
        struct rightsize rs = { 0 };
        struct rightsize_target t = target("some avg10 1%");
        struct sim s = { .hot = 100, .cold = 9900, .hot_set = 100, .floor = 4000, .min_usage_seen = UINT64_MAX };

        rightsize_set_target(&rs, &t);
        for (int i = 0; i < 200; i++)
                sim_tick(&s, &rs, SEC_USEC, 1000);
        ck_assert_uint_eq(s.min_usage_seen, 4000);
        ck_assert_uint_eq(sim_usage(&s), 4000);
        ck_assert_uint_eq(rs.high_pages, 4000);
        ck_assert_int_eq(rs.state, RIGHTSIZE_STATE_IDLE);
        ck_assert_uint_eq(s.stall_usec, 0);
}
END_TEST

/* Steps that get nothing back while clients do not answer stop it; steps
 * that get nothing from clients that answer only make it idle. */
START_TEST(test_stops_without_answers) {
        struct rightsize rs = { 0 };
        struct rightsize_target t = target("some avg10 1%");
        struct rightsize_input in = { .usage_pages = 10000 };

        rightsize_set_target(&rs, &t);
        (void) rightsize_tick(&rs, &in);
        for (int i = 1; i <= 10; i++) {
                in.now_usec = (uint64_t) i * SEC_USEC;
                ck_assert_uint_gt(rightsize_tick(&rs, &in), 0);
                rightsize_step_done(&rs, 0, 0, in.usage_pages);
                ck_assert_int_eq(rs.state, RIGHTSIZE_STATE_IDLE);
                ck_assert_uint_eq(rs.wse_pages, 10000);
        }
        /* One answer in between starts the count over. */
        for (unsigned i = 0; i < RIGHTSIZE_STOP_STEPS - 1; i++) {
                in.now_usec += SEC_USEC;
                ck_assert_uint_gt(rightsize_tick(&rs, &in), 0);
                rightsize_step_done(&rs, 0, 1, in.usage_pages);
                ck_assert_int_ne(rs.state, RIGHTSIZE_STATE_STOPPED);
        }
        in.now_usec += SEC_USEC;
        ck_assert_uint_gt(rightsize_tick(&rs, &in), 0);
        rightsize_step_done(&rs, 5, 1, in.usage_pages);
        for (unsigned i = 0; i < RIGHTSIZE_STOP_STEPS; i++) {
                in.now_usec += SEC_USEC;
                ck_assert_uint_gt(rightsize_tick(&rs, &in), 0);
                rightsize_step_done(&rs, 0, 2, in.usage_pages);
        }
        ck_assert_int_eq(rs.state, RIGHTSIZE_STATE_STOPPED);
        ck_assert_uint_eq(rs.high_pages, RIGHTSIZE_HIGH_NONE); /* no limit left behind */
        ck_assert_str_eq(rightsize_state_to_string(rs.state), "stopped");
        ck_assert_uint_eq(rs.reclaimed_pages, 5);
        for (int i = 0; i < 5; i++) {
                in.now_usec += SEC_USEC;
                ck_assert_uint_eq(rightsize_tick(&rs, &in), 0);
        }
        /* Set again: it starts over. */
        rightsize_set_target(&rs, &t);
        (void) rightsize_tick(&rs, &in);
        in.now_usec += SEC_USEC;
        ck_assert_uint_gt(rightsize_tick(&rs, &in), 0);
}
END_TEST

/* Off: nothing, ever. */
START_TEST(test_off) {
        struct rightsize rs = { 0 };
        struct rightsize_target off = target("no");
        struct rightsize_input in = { .usage_pages = 10000 };

        ck_assert_int_eq(rs.state, RIGHTSIZE_STATE_OFF);
        rightsize_set_target(&rs, &off);
        ck_assert_str_eq(rightsize_state_to_string(rs.state), "off");
        for (int i = 0; i < 10; i++) {
                in.now_usec = (uint64_t) i * SEC_USEC;
                ck_assert_uint_eq(rightsize_tick(&rs, &in), 0);
        }
        rightsize_step_done(&rs, 0, 5, 10);
        ck_assert_int_eq(rs.state, RIGHTSIZE_STATE_OFF);
}
END_TEST

static Suite *rightsize_suite(void) {
        Suite *s = suite_create("rightsize");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_parse);
        tcase_add_test(tc, test_converges);
        tcase_add_test(tc, test_steps_grow_bounded);
        tcase_add_test(tc, test_backoff);
        tcase_add_test(tc, test_floor);
        tcase_add_test(tc, test_stops_without_answers);
        tcase_add_test(tc, test_off);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(rightsize_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
