/* SPDX-License-Identifier: MIT */
/* Unit tests of daemon/arena.c: the free-index pool, the owner table and
 * hole punching of a tenant's arena. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena.h"

#define PAGE 4096u

static struct arena *new_arena(uint64_t npages) {
        struct arena *a = NULL;

        ck_assert_int_eq(arena_new("test", npages, PAGE, NULL, &a), 0);
        ck_assert_ptr_nonnull(a);
        return a;
}

static uint32_t new_owner(struct arena *a) {
        uint32_t o = 0;

        ck_assert_int_eq(arena_owner_new(a, &o), 0);
        ck_assert_uint_ne(o, ARENA_OWNER_NONE);
        return o;
}

START_TEST(test_alloc_lowest_first) {
        struct arena *a = new_arena(1000);
        uint32_t o = new_owner(a);
        struct arena_extent e[8];

        ck_assert_int_eq(arena_alloc(a, o, 64, e, 8), 1);
        ck_assert_uint_eq(e[0].start, 0);
        ck_assert_uint_eq(e[0].count, 64);
        ck_assert_int_eq(arena_alloc(a, o, 100, e, 8), 1);
        ck_assert_uint_eq(e[0].start, 64);
        ck_assert_uint_eq(e[0].count, 100);
        ck_assert_uint_eq(arena_used(a), 164);
        arena_free(a);
}
END_TEST

START_TEST(test_alloc_fills_holes) {
        struct arena *a = new_arena(1000);
        uint32_t o = new_owner(a);
        struct arena_extent e[8], hole[2] = { { 10, 5 }, { 100, 3 } };

        ck_assert_int_eq(arena_alloc(a, o, 200, e, 8), 1);
        ck_assert(arena_check_owned(a, o, hole, 2, NULL));
        ck_assert_uint_eq(arena_release(a, o, hole, 2), 8);
        /* Lowest first: both holes, then the end. */
        ck_assert_int_eq(arena_alloc(a, o, 10, e, 8), 3);
        ck_assert_uint_eq(e[0].start, 10);
        ck_assert_uint_eq(e[0].count, 5);
        ck_assert_uint_eq(e[1].start, 100);
        ck_assert_uint_eq(e[1].count, 3);
        ck_assert_uint_eq(e[2].start, 200);
        ck_assert_uint_eq(e[2].count, 2);
        arena_free(a);
}
END_TEST

START_TEST(test_alloc_fragmented_last_extent_is_a_run) {
        struct arena *a = new_arena(4096);
        uint32_t o = new_owner(a);
        struct arena_extent e[64], one;

        ck_assert_int_eq(arena_alloc(a, o, 1000, e, 64), 1);
        /* Free every other page of the first 100: 50 one-page holes. */
        for (uint64_t p = 0; p < 100; p += 2) {
                one = (struct arena_extent) { p, 1 };
                ck_assert_uint_eq(arena_release(a, o, &one, 1), 1);
        }
        /* At most 4 extents: 3 holes, then one run long enough. */
        ck_assert_int_eq(arena_alloc(a, o, 20, e, 4), 4);
        ck_assert_uint_eq(e[0].start, 0);
        ck_assert_uint_eq(e[1].start, 2);
        ck_assert_uint_eq(e[2].start, 4);
        ck_assert_uint_eq(e[3].start, 1000);
        ck_assert_uint_eq(e[3].count, 17);
        ck_assert_uint_eq(arena_used(a), 1000 - 50 + 20);
        arena_free(a);
}
END_TEST

START_TEST(test_alloc_full_changes_nothing) {
        struct arena *a = new_arena(100);
        uint32_t o = new_owner(a);
        struct arena_extent e[4];

        ck_assert_int_eq(arena_alloc(a, o, 90, e, 4), 1);
        ck_assert_int_eq(arena_alloc(a, o, 11, e, 4), -ENOSPC);
        ck_assert_uint_eq(arena_used(a), 90);
        ck_assert_int_eq(arena_alloc(a, o, 10, e, 4), 1);
        ck_assert_uint_eq(e[0].start, 90);
        ck_assert_int_eq(arena_alloc(a, o, 1, e, 4), -ENOSPC);
        arena_free(a);
}
END_TEST

START_TEST(test_check_owned) {
        struct arena *a = new_arena(256);
        uint32_t o1 = new_owner(a), o2 = new_owner(a);
        struct arena_extent e[4];
        uint64_t bad = 0;

        ck_assert_int_eq(arena_alloc(a, o1, 10, e, 4), 1); /* 0..9 */
        ck_assert_int_eq(arena_alloc(a, o2, 10, e, 4), 1); /* 10..19 */

        struct arena_extent mine = { 0, 10 }, other = { 5, 10 }, free_pages = { 30, 1 }, past = { 250, 10 },
                            twice[2] = { { 1, 2 }, { 2, 1 } }, huge = { UINT64_MAX, 1 };
        ck_assert(arena_check_owned(a, o1, &mine, 1, NULL));
        ck_assert(!arena_check_owned(a, o1, &other, 1, &bad));
        ck_assert_uint_eq(bad, 10);
        ck_assert(!arena_check_owned(a, o1, &free_pages, 1, &bad));
        ck_assert_uint_eq(bad, 30);
        ck_assert(!arena_check_owned(a, o1, &past, 1, &bad));
        ck_assert_uint_eq(bad, 256);
        ck_assert(!arena_check_owned(a, o1, twice, 2, &bad));
        ck_assert_uint_eq(bad, 2);
        ck_assert(!arena_check_owned(a, o1, &huge, 1, &bad));
        ck_assert_uint_eq(bad, UINT64_MAX);
        /* Failed checks changed nothing. */
        ck_assert(arena_check_owned(a, o1, &mine, 1, NULL));
        ck_assert_uint_eq(arena_used(a), 20);
        arena_free(a);
}
END_TEST

START_TEST(test_release_owner_punches) {
        struct arena *a = new_arena(512);
        uint32_t o1 = new_owner(a), o2 = new_owner(a);
        struct arena_extent e[4];
        uint64_t backed = 0;
        uint8_t *map;

        ck_assert_int_eq(arena_alloc(a, o1, 50, e, 4), 1); /* 0..49 */
        ck_assert_int_eq(arena_alloc(a, o2, 50, e, 4), 1); /* 50..99 */
        ck_assert_int_eq(arena_alloc(a, o1, 50, e, 4), 1); /* 100..149 */

        map = mmap(NULL, 512 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
        ck_assert_ptr_ne(map, MAP_FAILED);
        memset(map, 0xab, 150 * PAGE);
        ck_assert_int_eq(arena_backed_bytes(a, &backed), 0);
        ck_assert_uint_eq(backed, 150 * PAGE);

        ck_assert_uint_eq(arena_release_owner(a, o1, 100), 100);
        arena_owner_free(a, o1);
        ck_assert_int_eq(arena_backed_bytes(a, &backed), 0);
        ck_assert_uint_eq(backed, 50 * PAGE);
        ck_assert_uint_eq(arena_used(a), 50);
        /* o2's pages are intact, o1's are zero. */
        ck_assert_uint_eq(map[50 * PAGE], 0xab);
        ck_assert_uint_eq(map[99 * PAGE + PAGE - 1], 0xab);
        ck_assert_uint_eq(map[0], 0);
        ck_assert_uint_eq(map[120 * PAGE], 0);

        /* The freed id comes back for the next client. */
        ck_assert_uint_eq(new_owner(a), o1);
        munmap(map, 512 * PAGE);
        arena_free(a);
}
END_TEST

START_TEST(test_sealed) {
        struct arena *a = new_arena(16);

        ck_assert_int_eq(ftruncate(a->fd, 32 * PAGE), -1);
        ck_assert_int_eq(ftruncate(a->fd, 8 * PAGE), -1);
        arena_free(a);
}
END_TEST

START_TEST(test_metadata_per_page) {
        /* 1 Mi pages (4 GiB of arena): at most 8 bytes of metadata a page,
         * and none of it backed before use. */
        struct arena *a = new_arena(1u << 20);

        ck_assert_uint_le(a->meta_bytes, 8u * (1u << 20));
        ck_assert_uint_le(a->meta_bytes, (4u + 1u) * (1u << 20));
        arena_free(a);
}
END_TEST

START_TEST(test_odd_size_never_hands_out_past_the_end) {
        struct arena *a = new_arena(70);
        uint32_t o = new_owner(a);
        struct arena_extent e[4];

        ck_assert_int_eq(arena_alloc(a, o, 70, e, 4), 1);
        ck_assert_uint_eq(e[0].start + e[0].count, 70);
        ck_assert_int_eq(arena_alloc(a, o, 1, e, 4), -ENOSPC);
        arena_free(a);
}
END_TEST

static Suite *arena_suite(void) {
        Suite *s = suite_create("arena");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_alloc_lowest_first);
        tcase_add_test(tc, test_alloc_fills_holes);
        tcase_add_test(tc, test_alloc_fragmented_last_extent_is_a_run);
        tcase_add_test(tc, test_alloc_full_changes_nothing);
        tcase_add_test(tc, test_check_owned);
        tcase_add_test(tc, test_release_owner_punches);
        tcase_add_test(tc, test_sealed);
        tcase_add_test(tc, test_metadata_per_page);
        tcase_add_test(tc, test_odd_size_never_hands_out_past_the_end);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(arena_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
