/* SPDX-License-Identifier: MIT */
/*
 * test-mb-stat-keys.c - the table of memory.stat and memory.events keys
 * (common/mb_stat_keys.c): names and their local forms, units, the
 * stats-region item behind each key, lookups.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mb_stat_keys.h"

START_TEST(test_stat_key_names) {
        static const char *const order[] = {
                "pages", "stock", "slab", "slab_reclaimable", "slab_unreclaimable", "pgalloc", "pgfree",
                "charge_requests", "uncharge_requests", "pgscan", "pgsteal", "throttle_usec", "anon_mmap", "unaccounted",
        };

        ck_assert_uint_eq(sizeof(order) / sizeof(order[0]), _MB_STAT_KEY_NR);
        for (int i = 0; i < _MB_STAT_KEY_NR; i++) {
                const struct mb_stat_key_info *k = &mb_stat_keys[i];
                char local[64];

                ck_assert_str_eq(k->name, order[i]);
                ck_assert_ptr_nonnull(k->help);
                if (i == MB_STAT_KEY_UNACCOUNTED) {
                        ck_assert_ptr_null(k->local_name); /* the tenant's own arena only */
                        continue;
                }
                snprintf(local, sizeof local, "%s_local", k->name);
                ck_assert_str_eq(k->local_name, local);
        }
}
END_TEST

START_TEST(test_stat_key_units) {
        ck_assert_int_eq(mb_stat_keys[MB_STAT_KEY_PAGES].unit, MB_STAT_UNIT_BYTES);
        ck_assert_int_eq(mb_stat_keys[MB_STAT_KEY_SLAB].unit, MB_STAT_UNIT_BYTES);
        ck_assert_int_eq(mb_stat_keys[MB_STAT_KEY_UNACCOUNTED].unit, MB_STAT_UNIT_BYTES);
        ck_assert_int_eq(mb_stat_keys[MB_STAT_KEY_PGALLOC].unit, MB_STAT_UNIT_COUNT);
        ck_assert_int_eq(mb_stat_keys[MB_STAT_KEY_CHARGE_REQUESTS].unit, MB_STAT_UNIT_COUNT);
        ck_assert_int_eq(mb_stat_keys[MB_STAT_KEY_THROTTLE_USEC].unit, MB_STAT_UNIT_USEC);
        /* Pages and stock are kept in pages and reported in bytes. */
        ck_assert(mb_stat_keys[MB_STAT_KEY_PAGES].pages);
        ck_assert(mb_stat_keys[MB_STAT_KEY_STOCK].pages);
        ck_assert(mb_stat_keys[MB_STAT_KEY_ANON_MMAP].pages);
        ck_assert(!mb_stat_keys[MB_STAT_KEY_SLAB_RECLAIMABLE].pages);
}
END_TEST

START_TEST(test_stat_key_find) {
        bool local = true;

        ck_assert_ptr_eq(mb_stat_key_find("pgalloc", &local), &mb_stat_keys[MB_STAT_KEY_PGALLOC]);
        ck_assert(!local);
        ck_assert_ptr_eq(mb_stat_key_find("stock_local", &local), &mb_stat_keys[MB_STAT_KEY_STOCK]);
        ck_assert(local);
        ck_assert_ptr_eq(mb_stat_key_find("throttle_usec_local", NULL), &mb_stat_keys[MB_STAT_KEY_THROTTLE_USEC]);
        ck_assert_ptr_null(mb_stat_key_find("unaccounted_local", NULL));
        ck_assert_ptr_null(mb_stat_key_find("future_key", NULL));
        ck_assert_ptr_null(mb_stat_key_find("pages_", NULL));
}
END_TEST

/* Every item of the stats regions has exactly one key, named like it. */
START_TEST(test_stat_key_items) {
        static const char *const items[_MB_STAT_NR] = {
                [MB_STAT_PAGES] = "pages",
                [MB_STAT_STOCK] = "stock",
                [MB_STAT_SLAB_RECLAIMABLE] = "slab_reclaimable",
                [MB_STAT_SLAB_UNRECLAIMABLE] = "slab_unreclaimable",
                [MB_STAT_PGALLOC] = "pgalloc",
                [MB_STAT_PGFREE] = "pgfree",
                [MB_STAT_CHARGE_REQUESTS] = "charge_requests",
                [MB_STAT_UNCHARGE_REQUESTS] = "uncharge_requests",
                [MB_STAT_PGSCAN] = "pgscan",
                [MB_STAT_PGSTEAL] = "pgsteal",
                [MB_STAT_THROTTLE_USEC] = "throttle_usec",
                [MB_STAT_ANON_MMAP] = "anon_mmap",
        };
        int with_item = 0;

        for (int i = 0; i < _MB_STAT_NR; i++) {
                const struct mb_stat_key_info *k = mb_stat_key_of_item((enum mb_stat_item) i);
                ck_assert_ptr_nonnull(k);
                ck_assert_str_eq(k->name, items[i]);
        }
        for (int i = 0; i < _MB_STAT_KEY_NR; i++)
                with_item += mb_stat_keys[i].item != MB_STAT_KEY_NO_ITEM;
        ck_assert_int_eq(with_item, _MB_STAT_NR);
        ck_assert_ptr_null(mb_stat_key_of_item(_MB_STAT_NR));
}
END_TEST

START_TEST(test_event_keys) {
        static const char *const names[] = { "low", "high", "max", "oom", "oom_kill", "overrun", "oom_group_kill" };

        ck_assert_uint_eq(sizeof(names) / sizeof(names[0]), MB_EVENT_KEY_NR);
        for (int i = 0; i < MB_EVENT_KEY_NR; i++) {
                char local[64];

                ck_assert_str_eq(mb_event_keys[i].name, names[i]);
                snprintf(local, sizeof local, "%s.local", names[i]);
                ck_assert_str_eq(mb_event_keys[i].local_name, local);
                ck_assert_ptr_nonnull(mb_event_keys[i].help);
        }
}
END_TEST

static Suite *stat_keys_suite(void) {
        Suite *s = suite_create("mb-stat-keys");
        TCase *tc = tcase_create("table");

        tcase_add_test(tc, test_stat_key_names);
        tcase_add_test(tc, test_stat_key_units);
        tcase_add_test(tc, test_stat_key_find);
        tcase_add_test(tc, test_stat_key_items);
        tcase_add_test(tc, test_event_keys);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(stat_keys_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
