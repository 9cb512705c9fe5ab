/* SPDX-License-Identifier: MIT */
/*
 * test-high-delay.c - the memory.high throttling penalty, as the kernel's
 * calculate_overage(), calculate_high_delay() and
 * mem_cgroup_handle_over_high().  Sizes in 4 KiB pages, 256 to the MiB.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "high_delay.h"
#include "page_counter.h"

#define MB_PAGES(mb) ((unsigned long) (mb) * 256UL)
#define MSEC_USEC 1000ULL

/*
 * The table in the kernel's comment above MEMCG_DELAY_SCALING_SHIFT
 * (mm/memcontrol.c): "with a high of 100 megabytes", the time to allocate,
 * for a charge of MEMCG_CHARGE_BATCH pages.
 */
static const struct {
        unsigned usage_mb;
        unsigned delay_ms;
} kernel_table[] = {
        { 100, 0 },    { 101, 6 },    { 102, 25 },   { 103, 57 },   { 104, 102 },
        { 105, 159 },  { 106, 230 },  { 107, 313 },  { 108, 409 },  { 109, 518 },
        { 110, 639 },  { 111, 774 },  { 112, 921 },  { 113, 1081 }, { 114, 1254 },
        { 115, 1439 }, { 116, 1638 }, { 117, 1849 }, { 118, 2000 }, { 119, 2000 },
        { 120, 2000 },
};

/* A single counter with high = 100M and @usage_mb charged. */
static void counter_at(struct page_counter *c, unsigned long high_pages, unsigned long usage_pages) {
        page_counter_init(c, NULL, true);
        ck_assert_int_eq(page_counter_set_high(c, high_pages), 0);
        page_counter_charge(c, usage_pages);
}

START_TEST(test_overage) {
        /* Not over: 0. */
        ck_assert_uint_eq(high_delay_overage(MB_PAGES(100), MB_PAGES(100)), 0);
        ck_assert_uint_eq(high_delay_overage(MB_PAGES(99), MB_PAGES(100)), 0);
        /* 1M over 100M: (256 << 20) / 25600 = 10485.76 -> 10485. */
        ck_assert_uint_eq(high_delay_overage(MB_PAGES(101), MB_PAGES(100)), 10485);
        /* Twice the high: exactly 1.0 in 20-bit fixed point. */
        ck_assert_uint_eq(high_delay_overage(MB_PAGES(200), MB_PAGES(100)), 1U << 20);
        /* high 0 acts as 1 page: (2 - 1) << 20 / 1. */
        ck_assert_uint_eq(high_delay_overage(2, 0), 1U << 20);
        ck_assert_uint_eq(high_delay_overage(1, 0), 0);
        /* A shift that would overflow saturates. */
        ck_assert_uint_eq(high_delay_overage(1UL << 50, 0), UINT64_MAX);
}
END_TEST

START_TEST(test_kernel_table) {
        for (size_t i = 0; i < sizeof(kernel_table) / sizeof(kernel_table[0]); i++) {
                struct page_counter c;
                uint64_t usec;

                counter_at(&c, MB_PAGES(100), MB_PAGES(kernel_table[i].usage_mb));
                usec = high_delay_usec(&c, MEMCG_CHARGE_BATCH);
                ck_assert_msg(usec == kernel_table[i].delay_ms * MSEC_USEC,
                              "usage %uM: %llu usec, kernel table says %u ms",
                              kernel_table[i].usage_mb, (unsigned long long) usec,
                              kernel_table[i].delay_ms);
                /* In jiffies at HZ=1000, before the cap. */
                if (kernel_table[i].delay_ms < 2000)
                        ck_assert_uint_eq(high_delay_calculate_jiffies(high_delay_max_overage(&c),
                                                                       MEMCG_CHARGE_BATCH),
                                          kernel_table[i].delay_ms);
        }
}
END_TEST

START_TEST(test_capped_at_two_seconds) {
        struct page_counter c;

        /* 118M: 188743^2 * 1000 >> 34 = 2073 jiffies before the cap. */
        counter_at(&c, MB_PAGES(100), MB_PAGES(118));
        ck_assert_uint_eq(high_delay_calculate_jiffies(high_delay_max_overage(&c), MEMCG_CHARGE_BATCH), 2073);
        ck_assert_uint_eq(high_delay_usec(&c, MEMCG_CHARGE_BATCH), HIGH_DELAY_MAX_USEC);
        ck_assert_uint_eq(high_delay_throttle_usec(&c, MEMCG_CHARGE_BATCH), HIGH_DELAY_MAX_USEC);

        counter_at(&c, MB_PAGES(100), MB_PAGES(1000));
        ck_assert_uint_eq(high_delay_usec(&c, MEMCG_CHARGE_BATCH), 2000 * MSEC_USEC);
}
END_TEST

START_TEST(test_not_over_high_no_delay) {
        struct page_counter c;

        counter_at(&c, MB_PAGES(100), MB_PAGES(100));
        ck_assert_uint_eq(high_delay_max_overage(&c), 0);
        ck_assert_uint_eq(high_delay_usec(&c, MEMCG_CHARGE_BATCH), 0);
        ck_assert_uint_eq(high_delay_throttle_usec(&c, MEMCG_CHARGE_BATCH), 0);

        /* Default high is "max". */
        page_counter_init(&c, NULL, true);
        page_counter_charge(&c, MB_PAGES(4096));
        ck_assert_uint_eq(high_delay_usec(&c, MEMCG_CHARGE_BATCH), 0);
        ck_assert_uint_eq(high_delay_calculate_jiffies(0, MEMCG_CHARGE_BATCH), 0);
}
END_TEST

/*
 * mem_cgroup_handle_over_high() does not sleep for penalty_jiffies <= HZ/100.
 * 101M at 64 pages: 6 ms, not slept.  102M: 25 ms before scaling;
 *   28 pages: 25 * 28 / 64 = 700 / 64 = 10 jiffies -> exactly 10 ms, not slept;
 *   29 pages: 25 * 29 / 64 = 725 / 64 = 11 jiffies -> slept.
 */
START_TEST(test_at_most_10ms_not_slept) {
        struct page_counter c;

        counter_at(&c, MB_PAGES(100), MB_PAGES(101));
        ck_assert_uint_eq(high_delay_usec(&c, MEMCG_CHARGE_BATCH), 6 * MSEC_USEC);
        ck_assert_uint_eq(high_delay_throttle_usec(&c, MEMCG_CHARGE_BATCH), 0);

        counter_at(&c, MB_PAGES(100), MB_PAGES(102));
        ck_assert_uint_eq(high_delay_usec(&c, 28), 10 * MSEC_USEC);
        ck_assert_uint_eq(high_delay_throttle_usec(&c, 28), 0);
        ck_assert_uint_eq(high_delay_usec(&c, 29), 11 * MSEC_USEC);
        ck_assert_uint_eq(high_delay_throttle_usec(&c, 29), 11 * MSEC_USEC);
        ck_assert_uint_eq(high_delay_throttle_usec(&c, MEMCG_CHARGE_BATCH), 25 * MSEC_USEC);
}
END_TEST

/*
 * mem_find_max_overage(): the worst level decides.
 *
 *   root -> a (high 100M) -> b (high 1000M) -> leaf (high 104M), sibling
 *
 * leaf holds 105M: leaf is 1M over 104M, (256 << 20) / 26624 = 10082,
 * 10082^2 * 1000 >> 34 = 5 ms; a is 5M over 100M: 159 ms; b is under.
 */
START_TEST(test_largest_overage_among_ancestors_wins) {
        struct page_counter root, a, b, leaf, sibling;

        page_counter_init(&root, NULL, true);
        page_counter_init(&a, &root, true);
        page_counter_init(&b, &a, true);
        page_counter_init(&leaf, &b, true);
        page_counter_init(&sibling, &b, true);
        ck_assert_int_eq(page_counter_set_high(&a, MB_PAGES(100)), 0);
        ck_assert_int_eq(page_counter_set_high(&b, MB_PAGES(1000)), 0);
        ck_assert_int_eq(page_counter_set_high(&leaf, MB_PAGES(104)), 0);
        page_counter_charge(&leaf, MB_PAGES(105));

        ck_assert_uint_eq(high_delay_overage(MB_PAGES(105), MB_PAGES(104)), 10082);
        ck_assert_uint_eq(high_delay_calculate_jiffies(10082, MEMCG_CHARGE_BATCH), 5);
        ck_assert_uint_eq(high_delay_max_overage(&leaf), high_delay_overage(MB_PAGES(105), MB_PAGES(100)));
        ck_assert_uint_eq(high_delay_usec(&leaf, MEMCG_CHARGE_BATCH), 159 * MSEC_USEC);

        /* A sibling under no limit of its own is throttled for a's overage. */
        ck_assert_uint_eq(high_delay_usec(&sibling, MEMCG_CHARGE_BATCH), 159 * MSEC_USEC);

        /* Lower b's high to 50M: 105M is 110% over, far past the cap. */
        ck_assert_int_eq(page_counter_set_high(&b, MB_PAGES(50)), 0);
        ck_assert_uint_eq(high_delay_usec(&leaf, MEMCG_CHARGE_BATCH), 2000 * MSEC_USEC);

        /* Only the leaf over: its own 5 ms, not slept. */
        ck_assert_int_eq(page_counter_set_high(&a, PAGE_COUNTER_MAX), 0);
        ck_assert_int_eq(page_counter_set_high(&b, PAGE_COUNTER_MAX), 0);
        ck_assert_uint_eq(high_delay_usec(&leaf, MEMCG_CHARGE_BATCH), 5 * MSEC_USEC);
        ck_assert_uint_eq(high_delay_throttle_usec(&leaf, MEMCG_CHARGE_BATCH), 0);
        ck_assert_uint_eq(high_delay_usec(&sibling, MEMCG_CHARGE_BATCH), 0);

        /* The root of the tree counts too (the broker's root may have a high). */
        ck_assert_int_eq(page_counter_set_high(&root, MB_PAGES(100)), 0);
        ck_assert_uint_eq(high_delay_usec(&sibling, MEMCG_CHARGE_BATCH), 159 * MSEC_USEC);
}
END_TEST

/*
 * penalty * nr_pages / MEMCG_CHARGE_BATCH, at 105M over 100M (159 jiffies):
 *   32 pages: 159 * 32 / 64 = 79;  128: 318;  512: 1272;  1: 159 / 64 = 2.
 * Four 16-page charges cost about one 64-page charge: 4 * (159 * 16 / 64) =
 * 4 * 39 = 156.  At 110M (639) and 256 pages: 2556 -> capped at 2000.
 */
START_TEST(test_scaled_by_nr_pages) {
        struct page_counter c;

        counter_at(&c, MB_PAGES(100), MB_PAGES(105));
        ck_assert_uint_eq(high_delay_usec(&c, 64), 159 * MSEC_USEC);
        ck_assert_uint_eq(high_delay_usec(&c, 32), 79 * MSEC_USEC);
        ck_assert_uint_eq(high_delay_usec(&c, 128), 318 * MSEC_USEC);
        ck_assert_uint_eq(high_delay_usec(&c, 512), 1272 * MSEC_USEC);
        ck_assert_uint_eq(high_delay_usec(&c, 1), 2 * MSEC_USEC);
        ck_assert_uint_eq(high_delay_throttle_usec(&c, 1), 0);
        ck_assert_uint_eq(4 * high_delay_usec(&c, 16), 156 * MSEC_USEC);

        counter_at(&c, MB_PAGES(100), MB_PAGES(110));
        ck_assert_uint_eq(high_delay_calculate_jiffies(high_delay_max_overage(&c), 256), 2556);
        ck_assert_uint_eq(high_delay_usec(&c, 256), 2000 * MSEC_USEC);
}
END_TEST

/*
 * Where the kernel's unsigned long arithmetic would wrap, we saturate.
 * high = 1 page, usage = 4097 pages: overage = 4096 << 20 = 2^32, and
 * 2^32 * 2^32 wraps to 0 in 64 bits, which would mean "no delay" for a
 * tenant 4096 times over its high.  Saturating gives the 2 s cap.
 */
START_TEST(test_huge_overage_saturates) {
        struct page_counter c;

        counter_at(&c, 1, 4097);
        ck_assert_uint_eq(high_delay_max_overage(&c), UINT64_C(1) << 32);
        ck_assert_uint_eq(high_delay_calculate_jiffies(UINT64_C(1) << 32, 1), UINT64_MAX);
        ck_assert_uint_eq(high_delay_usec(&c, 1), 2000 * MSEC_USEC);

        counter_at(&c, 0, 1UL << 50);
        ck_assert_uint_eq(high_delay_max_overage(&c), UINT64_MAX);
        ck_assert_uint_eq(high_delay_usec(&c, MEMCG_CHARGE_BATCH), 2000 * MSEC_USEC);
        ck_assert_uint_eq(high_delay_throttle_usec(&c, UINT32_MAX), 2000 * MSEC_USEC);
}
END_TEST

static Suite *high_delay_suite(void) {
        Suite *s = suite_create("high_delay");
        TCase *tc = tcase_create("high_delay");

        tcase_add_test(tc, test_overage);
        tcase_add_test(tc, test_kernel_table);
        tcase_add_test(tc, test_capped_at_two_seconds);
        tcase_add_test(tc, test_not_over_high_no_delay);
        tcase_add_test(tc, test_at_most_10ms_not_slept);
        tcase_add_test(tc, test_largest_overage_among_ancestors_wins);
        tcase_add_test(tc, test_scaled_by_nr_pages);
        tcase_add_test(tc, test_huge_overage_saturates);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(high_delay_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
