/* SPDX-License-Identifier: MIT */
/*
 * test-ctl-util.c - membrokerctl's pure helpers (tools/ctl-util.c): sizes in
 * and out, escaping, tenant path order.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-util.h"

static uint64_t size_ok(const char *s, uint64_t base) {
        uint64_t v = 0;
        int r = ctl_parse_size(s, base, &v);
        ck_assert_msg(r == 0, "ctl_parse_size(\"%s\") = %d", s, r);
        return v;
}

static int size_err(const char *s, uint64_t base) {
        uint64_t v = 12345;
        int r = ctl_parse_size(s, base, &v);
        ck_assert_uint_eq(v, 12345); /* untouched on error */
        return r;
}

START_TEST(test_parse_size_units) {
        ck_assert_uint_eq(size_ok("0", 0), 0);
        ck_assert_uint_eq(size_ok("4096", 0), 4096);
        ck_assert_uint_eq(size_ok("4K", 0), 4096);
        ck_assert_uint_eq(size_ok("4k", 0), 4096);
        ck_assert_uint_eq(size_ok("16M", 0), 16u << 20);
        ck_assert_uint_eq(size_ok("2G", 0), UINT64_C(2) << 30);
        ck_assert_uint_eq(size_ok("3T", 0), UINT64_C(3) << 40);
        ck_assert_uint_eq(size_ok("1P", 0), UINT64_C(1) << 50);
        ck_assert_uint_eq(size_ok("15E", 0), UINT64_C(15) << 60);
}
END_TEST

START_TEST(test_parse_size_fractions) {
        ck_assert_uint_eq(size_ok("1.5M", 0), 3u << 19);
        ck_assert_uint_eq(size_ok("0.5K", 0), 512);
        ck_assert_uint_eq(size_ok("1.001K", 0), 1025); /* 1025.024 rounded down */
        ck_assert_uint_eq(size_ok("2.25G", 0), UINT64_C(9) << 28);
        ck_assert_uint_eq(size_ok("7.9", 0), 7); /* bytes: rounded down */
}
END_TEST

START_TEST(test_parse_size_special) {
        ck_assert_uint_eq(size_ok("infinity", 0), CTL_LIMIT_MAX);
        ck_assert_uint_eq(size_ok("max", 0), CTL_LIMIT_MAX);
        ck_assert_uint_eq(size_ok("25%", 1u << 30), 1u << 28);
        ck_assert_uint_eq(size_ok("12.5%", 1u << 30), 1u << 27);
        ck_assert_uint_eq(size_ok("100%", 4096), 4096);
        ck_assert_uint_eq(size_ok("33.333333333%", 3000000), 999999); /* rounded down once */
}
END_TEST

START_TEST(test_parse_size_errors) {
        ck_assert_int_eq(size_err("", 0), -EINVAL);
        ck_assert_int_eq(size_err("K", 0), -EINVAL);
        ck_assert_int_eq(size_err("-1", 0), -EINVAL);
        ck_assert_int_eq(size_err("1X", 0), -EINVAL);
        ck_assert_int_eq(size_err("1KB", 0), -EINVAL);
        ck_assert_int_eq(size_err("1.", 0), -EINVAL);
        ck_assert_int_eq(size_err(".5K", 0), -EINVAL);
        ck_assert_int_eq(size_err("1 K", 0), -EINVAL);
        ck_assert_int_eq(size_err("Infinity", 0), -EINVAL);
        ck_assert_int_eq(size_err("50%", 0), -EINVAL);   /* no base */
        ck_assert_int_eq(size_err("50%x", 100), -EINVAL);
        ck_assert_int_eq(size_err("101%", 100), -ERANGE);
        ck_assert_int_eq(size_err("100.5%", 100), -ERANGE);
        ck_assert_int_eq(size_err("16E", 0), -ERANGE);
        ck_assert_int_eq(size_err("99999999999999999999", 0), -ERANGE);
        /* UINT64_MAX - 1 is reserved by the API, UINT64_MAX is spelt "max". */
        ck_assert_int_eq(size_err("18446744073709551614", 0), -ERANGE);
        ck_assert_int_eq(size_err("18446744073709551615", 0), -ERANGE);
        ck_assert_uint_eq(size_ok("18446744073709551613", 0), UINT64_MAX - 2);
}
END_TEST

START_TEST(test_parse_u64) {
        uint64_t v;

        ck_assert_int_eq(ctl_parse_u64("64", &v), 0);
        ck_assert_uint_eq(v, 64);
        ck_assert_int_eq(ctl_parse_u64("18446744073709551615", &v), 0);
        ck_assert_uint_eq(v, UINT64_MAX);
        ck_assert_int_eq(ctl_parse_u64("18446744073709551616", &v), -ERANGE);
        ck_assert_int_eq(ctl_parse_u64("", &v), -EINVAL);
        ck_assert_int_eq(ctl_parse_u64("1K", &v), -EINVAL);
        ck_assert_int_eq(ctl_parse_u64("+1", &v), -EINVAL);
}
END_TEST

START_TEST(test_format_bytes) {
        char buf[CTL_FORMAT_BYTES_MAX];

        ck_assert_str_eq(ctl_format_bytes(buf, 0, false), "0B");
        ck_assert_str_eq(ctl_format_bytes(buf, 1023, false), "1023B");
        ck_assert_str_eq(ctl_format_bytes(buf, 1024, false), "1.0K");
        ck_assert_str_eq(ctl_format_bytes(buf, 1536, false), "1.5K");
        ck_assert_str_eq(ctl_format_bytes(buf, (1u << 20) - 1, false), "1023.9K");
        ck_assert_str_eq(ctl_format_bytes(buf, 3u << 19, false), "1.5M");
        ck_assert_str_eq(ctl_format_bytes(buf, UINT64_C(5) << 40, false), "5.0T");
        ck_assert_str_eq(ctl_format_bytes(buf, UINT64_MAX - 1, false), "15.9E");
        ck_assert_str_eq(ctl_format_bytes(buf, CTL_LIMIT_MAX, false), "max");
        ck_assert_str_eq(ctl_format_bytes(buf, 1536, true), "1536");
        ck_assert_str_eq(ctl_format_bytes(buf, CTL_LIMIT_MAX, true), "max");
}
END_TEST

static char *capture(void (*fn)(FILE *, const char *), const char *s) {
        char *out = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&out, &n);

        ck_assert_ptr_nonnull(f);
        fn(f, s);
        fclose(f);
        return out;
}

START_TEST(test_escaping) {
        char *s;

        s = capture(ctl_json_string, "a\"b\\c\nd\x01");
        ck_assert_str_eq(s, "\"a\\\"b\\\\c\\nd\\u0001\"");
        free(s);
        s = capture(ctl_openmetrics_label, "db/\"x\"\\\n");
        ck_assert_str_eq(s, "\"db/\\\"x\\\"\\\\\\n\"");
        free(s);
}
END_TEST

static int cmp_sign(int x) {
        return (x > 0) - (x < 0);
}

START_TEST(test_path_order) {
        ck_assert_int_eq(cmp_sign(ctl_path_compare("/", "a")), -1);
        ck_assert_int_eq(cmp_sign(ctl_path_compare("a", "/")), 1);
        ck_assert_int_eq(ctl_path_compare("/", "/"), 0);
        ck_assert_int_eq(cmp_sign(ctl_path_compare("a", "a/b")), -1);
        /* A parent's subtree comes before a sibling whose name extends it. */
        ck_assert_int_eq(cmp_sign(ctl_path_compare("a/z", "a.b")), -1);
        ck_assert_int_eq(cmp_sign(ctl_path_compare("a/z", "a-b")), -1);
        ck_assert_int_eq(cmp_sign(ctl_path_compare("a/b", "a/c")), -1);
        ck_assert_int_eq(cmp_sign(ctl_path_compare("b", "a/c")), 1);
}
END_TEST

START_TEST(test_path_parts) {
        char buf[16];

        ck_assert_uint_eq(ctl_path_depth("/"), 0);
        ck_assert_uint_eq(ctl_path_depth("a"), 1);
        ck_assert_uint_eq(ctl_path_depth("a/b/c"), 3);
        ck_assert_int_eq(ctl_path_parent("a/b/c", buf, sizeof buf), 0);
        ck_assert_str_eq(buf, "a/b");
        ck_assert_int_eq(ctl_path_parent("a", buf, sizeof buf), 0);
        ck_assert_str_eq(buf, "/");
        ck_assert_int_eq(ctl_path_parent("/", buf, sizeof buf), -EINVAL);
        ck_assert_int_eq(ctl_path_parent("aaaaaaaaaaaaaaaaaaaa/b", buf, sizeof buf), -ENOBUFS);
        ck_assert_str_eq(ctl_path_name("a/b/c"), "c");
        ck_assert_str_eq(ctl_path_name("a"), "a");
        ck_assert_str_eq(ctl_path_name("/"), "/");
}
END_TEST

START_TEST(test_stat_units) {
        ck_assert_int_eq(ctl_stat_key_unit("pages"), CTL_UNIT_BYTES);
        ck_assert_int_eq(ctl_stat_key_unit("stock_local"), CTL_UNIT_BYTES);
        ck_assert_int_eq(ctl_stat_key_unit("unaccounted"), CTL_UNIT_BYTES);
        ck_assert_int_eq(ctl_stat_key_unit("pgalloc"), CTL_UNIT_COUNT);
        ck_assert_int_eq(ctl_stat_key_unit("charge_requests_local"), CTL_UNIT_COUNT);
        ck_assert_int_eq(ctl_stat_key_unit("throttle_usec"), CTL_UNIT_USEC);
        ck_assert_int_eq(ctl_stat_key_unit("throttle_usec_local"), CTL_UNIT_USEC);
        ck_assert_int_eq(ctl_stat_key_unit("future_key"), CTL_UNIT_UNKNOWN);
}
END_TEST

static Suite *ctl_util_suite(void) {
        Suite *s = suite_create("ctl-util");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_parse_size_units);
        tcase_add_test(tc, test_parse_size_fractions);
        tcase_add_test(tc, test_parse_size_special);
        tcase_add_test(tc, test_parse_size_errors);
        tcase_add_test(tc, test_parse_u64);
        tcase_add_test(tc, test_format_bytes);
        tcase_add_test(tc, test_escaping);
        tcase_add_test(tc, test_path_order);
        tcase_add_test(tc, test_path_parts);
        tcase_add_test(tc, test_stat_units);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(ctl_util_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
