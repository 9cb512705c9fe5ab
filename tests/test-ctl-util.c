/* SPDX-License-Identifier: MIT */
/*
 * test-ctl-util.c - membrokerctl's pure helpers (tools/ctl-util.c): sizes
 * out, escaping, tenant path order (sizes in: test-mb-size.c).
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-util.h"

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
        ck_assert_str_eq(ctl_format_bytes(buf, MB_LIMIT_MAX, false), "max");
        ck_assert_str_eq(ctl_format_bytes(buf, 1536, true), "1536");
        ck_assert_str_eq(ctl_format_bytes(buf, MB_LIMIT_MAX, true), "max");
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

static Suite *ctl_util_suite(void) {
        Suite *s = suite_create("ctl-util");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_parse_u64);
        tcase_add_test(tc, test_format_bytes);
        tcase_add_test(tc, test_escaping);
        tcase_add_test(tc, test_path_order);
        tcase_add_test(tc, test_path_parts);
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
