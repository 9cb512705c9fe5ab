/* SPDX-License-Identifier: MIT */
/*
 * test-mb-size.c - the one size parser (common/mb_size.c), with the
 * grammar each caller asks for: the configuration (percentages of RAM,
 * infinity), membrokerctl set (percentages of the capacity, infinity),
 * membrokerctl reclaim (bytes only) and membroker-load (bytes, "KiB").
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>

#include "mb_limits.h"
#include "mb_size.h"

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define CONFIG (MB_SIZE_PERCENT | MB_SIZE_INFINITY)

static const struct {
        const char *s;
        uint64_t base;
        unsigned flags;
        int r;
        uint64_t v;
} sizes[] = {
        /* Bytes and the K/M/G/T suffixes, either case. */
        { "0", 0, 0, 0, 0 },
        { "4096", 0, 0, 0, 4096 },
        { "4K", 0, 0, 0, 4 * KIB },
        { "4k", 0, 0, 0, 4 * KIB },
        { "10M", 0, 0, 0, 10 * MIB },
        { "1536m", 0, 0, 0, 1536 * MIB },
        { "2G", 0, 0, 0, 2 * GIB },
        { "2T", 0, 0, 0, UINT64_C(2) << 40 },
        { "3t", 0, 0, 0, UINT64_C(3) << 40 },
        /* Fractions need a suffix; rounded down to the byte. */
        { "1.5G", 0, 0, 0, 3 * GIB / 2 },
        { "0.5K", 0, 0, 0, 512 },
        { "1.5M", 0, 0, 0, 3 * MIB / 2 },
        { "1.001K", 0, 0, 0, 1025 }, /* 1025.024 */
        { "2.25G", 0, 0, 0, UINT64_C(9) << 28 },
        { "1.00000000000000009K", 0, 0, 0, 1024 }, /* digits past the 16th ignored */
        { "1.5", 0, 0, -EINVAL, 0 },
        { "1.5", 0, CONFIG, -EINVAL, 0 },
        { "1.", 0, 0, -EINVAL, 0 },
        { ".5K", 0, 0, -EINVAL, 0 },
        /* Percentages: only when asked for, of the base, at most 100%. */
        { "25%", 1000, CONFIG, 0, 250 },
        { "12.5%", 1000, CONFIG, 0, 125 },
        { "100%", 1000, CONFIG, 0, 1000 },
        { "0%", 1000, CONFIG, 0, 0 },
        { "33%", 10, CONFIG, 0, 3 },
        { "25%", GIB, MB_SIZE_PERCENT, 0, GIB / 4 },
        { "33.333333333%", 3000000, MB_SIZE_PERCENT, 0, 999999 }, /* rounded down once */
        { "0.0000001%", 1000000000, MB_SIZE_PERCENT, 0, 1 },      /* exact, not to the millionth */
        { "50%", 0, MB_SIZE_PERCENT, 0, 0 },                      /* of nothing */
        /* No overflow in 128 bits: 16 digits of 99.99...% of UINT64_MAX - 2. */
        { "99.999999999999999999%", UINT64_MAX - 2, MB_SIZE_PERCENT, 0, UINT64_MAX - 21 },
        { "101%", 1000, CONFIG, -ERANGE, 0 },
        { "100.1%", 1000, CONFIG, -ERANGE, 0 },
        { "100%", UINT64_MAX, CONFIG, -ERANGE, 0 }, /* only "max" is MB_LIMIT_MAX */
        { "25%", 1000, 0, -EINVAL, 0 },
        { "25%", 1000, MB_SIZE_INFINITY | MB_SIZE_BYTE_UNIT, -EINVAL, 0 },
        { "25%%", 1000, CONFIG, -EINVAL, 0 },
        { "25K%", 1000, CONFIG, -EINVAL, 0 },
        { "50%x", 100, CONFIG, -EINVAL, 0 },
        /* The words, only when asked for, spelt exactly. */
        { "infinity", 0, CONFIG, 0, MB_LIMIT_MAX },
        { "max", 0, MB_SIZE_INFINITY, 0, MB_LIMIT_MAX },
        { "infinity", 0, 0, -EINVAL, 0 },
        { "max", 0, MB_SIZE_PERCENT | MB_SIZE_BYTE_UNIT, -EINVAL, 0 },
        { "Infinity", 0, CONFIG, -EINVAL, 0 },
        { "maximum", 0, CONFIG, -EINVAL, 0 },
        /* The range: UINT64_MAX only as a word. */
        { "18446744073709551614", 0, CONFIG, 0, UINT64_MAX - 1 },
        { "18446744073709551615", 0, CONFIG, -ERANGE, 0 },
        { "18446744073709551616", 0, CONFIG, -ERANGE, 0 },
        { "99999999999999999999", 0, 0, -ERANGE, 0 },
        { "16777216T", 0, CONFIG, -ERANGE, 0 },
        { "16777215.99999T", 0, 0, 0, (UINT64_C(16777215) << 40) + UINT64_C(1099500632659) },
        /* "B" and "iB" only for membroker-load. */
        { "4096B", 0, MB_SIZE_BYTE_UNIT, 0, 4096 },
        { "64KB", 0, MB_SIZE_BYTE_UNIT, 0, 64 * KIB },
        { "64KiB", 0, MB_SIZE_BYTE_UNIT, 0, 64 * KIB },
        { "2MiB", 0, MB_SIZE_BYTE_UNIT, 0, 2 * MIB },
        { "1.5GiB", 0, MB_SIZE_BYTE_UNIT, 0, 3 * GIB / 2 },
        { "4iB", 0, MB_SIZE_BYTE_UNIT, -EINVAL, 0 },
        { "4KBB", 0, MB_SIZE_BYTE_UNIT, -EINVAL, 0 },
        { "4Kb", 0, MB_SIZE_BYTE_UNIT, -EINVAL, 0 },
        { "4KB", 0, CONFIG, -EINVAL, 0 },
        { "4KiB", 0, CONFIG, -EINVAL, 0 },
        { "4096B", 0, CONFIG, -EINVAL, 0 },
        /* Garbage, whatever the flags. */
        { "", 0, CONFIG | MB_SIZE_BYTE_UNIT, -EINVAL, 0 },
        { "K", 0, CONFIG, -EINVAL, 0 },
        { "-1", 0, CONFIG | MB_SIZE_BYTE_UNIT, -EINVAL, 0 },
        { "+1", 0, CONFIG | MB_SIZE_BYTE_UNIT, -EINVAL, 0 },
        { " 4K", 0, CONFIG | MB_SIZE_BYTE_UNIT, -EINVAL, 0 },
        { "4 K", 0, CONFIG, -EINVAL, 0 },
        { "4K ", 0, CONFIG, -EINVAL, 0 },
        { "4X", 0, CONFIG, -EINVAL, 0 },
        { "4P", 0, CONFIG, -EINVAL, 0 },
        { "1E", 0, CONFIG, -EINVAL, 0 },
        { "1e3", 0, CONFIG, -EINVAL, 0 },
        { "0x10", 0, CONFIG, -EINVAL, 0 },
        { "abc", 0, CONFIG, -EINVAL, 0 },
};

START_TEST(test_size_parse) {
        uint64_t v = 12345;
        int r = mb_size_parse(sizes[_i].s, sizes[_i].base, sizes[_i].flags, &v);

        ck_assert_msg(r == sizes[_i].r, "'%s' (flags %#x): r=%d, expected %d", sizes[_i].s, sizes[_i].flags, r,
                      sizes[_i].r);
        if (r == 0)
                ck_assert_msg(v == sizes[_i].v, "'%s': %" PRIu64 ", expected %" PRIu64, sizes[_i].s, v, sizes[_i].v);
        else
                ck_assert_uint_eq(v, 12345); /* untouched on error */
}
END_TEST

START_TEST(test_size_parse_null) {
        uint64_t v = 7;

        ck_assert_int_eq(mb_size_parse(NULL, 0, MB_SIZE_PERCENT | MB_SIZE_INFINITY | MB_SIZE_BYTE_UNIT, &v), -EINVAL);
        ck_assert_uint_eq(v, 7);
}
END_TEST

START_TEST(test_size_format) {
        char b[MB_SIZE_FORMAT_MAX];

        ck_assert_str_eq(mb_size_format(b, sizeof(b), 64u << 20), "64 MiB");
        ck_assert_str_eq(mb_size_format(b, sizeof(b), 4096), "4 KiB");
        ck_assert_str_eq(mb_size_format(b, sizeof(b), (64u << 20) + 4096), "65540 KiB");
        ck_assert_str_eq(mb_size_format(b, sizeof(b), 1000), "1000 bytes");
        ck_assert_str_eq(mb_size_format(b, sizeof(b), 0), "0 bytes");
        ck_assert_str_eq(mb_size_format(b, sizeof(b), 1ull << 60), "1 EiB");
        ck_assert_str_eq(mb_size_format(b, sizeof(b), MB_LIMIT_MAX), "max");
        ck_assert_str_eq(mb_size_format_pages(b, sizeof(b), 16384, 4096, UINT64_MAX), "64 MiB (16384 pages)");
        ck_assert_str_eq(mb_size_format_pages(b, sizeof(b), 1, 4096, UINT64_MAX), "4 KiB (1 page)");
        ck_assert_str_eq(mb_size_format_pages(b, sizeof(b), 500, 4096, 500), "max");
}
END_TEST

static Suite *size_suite(void) {
        Suite *s = suite_create("mb-size");
        TCase *tc = tcase_create("parse");

        tcase_add_loop_test(tc, test_size_parse, 0, sizeof(sizes) / sizeof(sizes[0]));
        tcase_add_test(tc, test_size_parse_null);
        tcase_add_test(tc, test_size_format);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(size_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
