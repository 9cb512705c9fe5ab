/* SPDX-License-Identifier: MIT */
/* Unit tests of the restart side of daemon/arena/arena.c: an arena whose owner
 * table lives in a memfd (arena_new_shared()), rebuilt by a "next daemon"
 * from the two descriptors (arena_restore()), and pages moved to a
 * reconnected client (arena_transfer()). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"

#define PAGE 4096u
#define NPAGES 4096u
#define OFFSET (1024u * 1024u)

static int owner_table(void) {
        int fd = memfd_create("test-owners", MFD_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, OFFSET + NPAGES * sizeof(uint32_t)), 0);
        return fd;
}

static uint32_t new_owner(struct arena *a) {
        uint32_t o = 0;

        ck_assert_int_eq(arena_owner_new(a, &o), 0);
        return o;
}

static void fill(struct arena *a, uint64_t start, uint64_t count, uint8_t byte) {
        uint8_t *p = mmap(NULL, NPAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);

        ck_assert_ptr_ne(p, MAP_FAILED);
        memset(p + start * PAGE, byte, count * PAGE);
        munmap(p, NPAGES * PAGE);
}

static uint64_t backed_pages(int fd) {
        struct stat st;

        ck_assert_int_eq(fstat(fd, &st), 0);
        return (uint64_t) st.st_blocks * 512 / PAGE;
}

/* The previous daemon dies (nothing is released): only the descriptors
 * survive, as in the fd store. */
static void die(struct arena *a, int *ret_fd, int *ret_ofd) {
        *ret_fd = dup(a->fd);
        *ret_ofd = dup(a->owner_fd);
        arena_free(a); /* closes its copies; the memfds live on in ours */
}

START_TEST(test_restore_ownership) {
        struct arena *a = NULL, *b = NULL;
        struct arena_extent e[4];
        uint32_t o1, o2, o3, id;
        int fd, ofd, tfd = owner_table();

        ck_assert_int_eq(arena_new_shared("t", NPAGES, PAGE, tfd, OFFSET, NULL, &a), 0);
        a->owner_fd = tfd;
        o1 = new_owner(a);
        o2 = new_owner(a);
        o3 = new_owner(a); /* holds nothing */
        ck_assert_int_eq(arena_alloc(a, o1, 100, e, 4), 1);
        ck_assert_int_eq(arena_alloc(a, o2, 50, e, 4), 1);
        ck_assert_int_eq(arena_alloc(a, o1, 10, e, 4), 1);
        fill(a, 0, 160, 0x5a);
        ck_assert_uint_eq(arena_used(a), 160);
        die(a, &fd, &ofd);

        ck_assert_int_eq(arena_restore(fd, -1, PAGE, 0, ofd, OFFSET, "t", &b), 0);
        b->owner_fd = ofd;
        ck_assert_uint_eq(b->npages, NPAGES);
        ck_assert_uint_eq(arena_used(b), 160);
        ck_assert_uint_eq(b->top, 160);
        for (uint64_t p = 0; p < 100; p++)
                ck_assert_uint_eq(b->owner[p], o1);
        for (uint64_t p = 100; p < 150; p++)
                ck_assert_uint_eq(b->owner[p], o2);
        for (uint64_t p = 150; p < 160; p++)
                ck_assert_uint_eq(b->owner[p], o1);
        ck_assert_uint_eq(backed_pages(b->fd), 160); /* the data is there */

        /* New pages come after the held ones; the ids holding pages are not
         * handed out again, the one that held nothing is. */
        id = new_owner(b);
        ck_assert_uint_eq(id, o3);
        ck_assert_int_eq(arena_alloc(b, id, 5, e, 4), 1);
        ck_assert_uint_eq(e[0].start, 160);
        ck_assert_uint_gt(new_owner(b), o3);
        arena_free(b);
}
END_TEST

START_TEST(test_restore_punches_unheld) {
        struct arena *a = NULL, *b = NULL;
        struct arena_extent e[4];
        uint64_t released = 0;
        uint32_t o;
        int fd, ofd, tfd = owner_table();

        ck_assert_int_eq(arena_new_shared("t", NPAGES, PAGE, tfd, OFFSET, &(struct arena_backing) { .slack_pages = 4 },
                                          &a),
                         0);
        a->owner_fd = tfd;
        o = new_owner(a);
        ck_assert_int_eq(arena_alloc(a, o, 20, e, 4), 1);
        fill(a, 0, 40, 0x11); /* pages 20..39 are written but not held */
        ck_assert_uint_eq(backed_pages(a->fd), 40);
        /* A page being returned when the daemon died. */
        a->owner[5] = UINT32_MAX;
        /* A page returned whose punch had not run yet. */
        ck_assert_int_eq(arena_release_begin(a, &(struct arena_extent) { .start = 6, .count = 1 }, 1, &released), 0);
        ck_assert_uint_eq(released, 1);
        die(a, &fd, &ofd);

        ck_assert_int_eq(arena_restore(fd, -1, PAGE, 0, ofd, OFFSET, "t", &b), 0);
        b->owner_fd = ofd;
        ck_assert_uint_eq(arena_used(b), 18);
        ck_assert_uint_eq(b->owner[5], ARENA_OWNER_NONE);
        ck_assert_uint_eq(b->owner[6], ARENA_OWNER_NONE);
        ck_assert_uint_eq(backed_pages(b->fd), 18);
        arena_free(b);
}
END_TEST

START_TEST(test_transfer) {
        struct arena *a = NULL;
        struct arena_extent e[4], claim[3];
        uint32_t o1, o2, o3, from[2];
        uint64_t moved[2], bad = 0;
        int tfd = owner_table();

        ck_assert_int_eq(arena_new_shared("t", NPAGES, PAGE, tfd, OFFSET, NULL, &a), 0);
        a->owner_fd = tfd;
        o1 = new_owner(a);
        o2 = new_owner(a);
        o3 = new_owner(a);
        ck_assert_int_eq(arena_alloc(a, o1, 10, e, 4), 1); /* 0..9 */
        ck_assert_int_eq(arena_alloc(a, o2, 10, e, 4), 1); /* 10..19 */

        /* A page of someone else: nothing moves. */
        from[0] = o1;
        claim[0] = (struct arena_extent) { .start = 0, .count = 5 };
        claim[1] = (struct arena_extent) { .start = 9, .count = 2 };
        ck_assert_int_eq(arena_transfer(a, from, 1, o3, claim, 2, moved, &bad), -EINVAL);
        ck_assert_uint_eq(bad, 10);
        ck_assert_uint_eq(a->owner[0], o1);

        /* Overlapping or unordered extents: refused. */
        claim[0] = (struct arena_extent) { .start = 2, .count = 3 };
        claim[1] = (struct arena_extent) { .start = 4, .count = 1 };
        ck_assert_int_eq(arena_transfer(a, from, 1, o3, claim, 2, moved, &bad), -EINVAL);
        ck_assert_uint_eq(a->owner[2], o1);

        /* From two old ids (a crash in the middle of a claim). */
        from[1] = o2;
        claim[0] = (struct arena_extent) { .start = 0, .count = 4 };
        claim[1] = (struct arena_extent) { .start = 8, .count = 4 };
        claim[2] = (struct arena_extent) { .start = 15, .count = 1 };
        ck_assert_int_eq(arena_transfer(a, from, 2, o3, claim, 3, moved, &bad), 0);
        ck_assert_uint_eq(moved[0], 6);
        ck_assert_uint_eq(moved[1], 3);
        ck_assert_uint_eq(a->owner[0], o3);
        ck_assert_uint_eq(a->owner[4], o1);
        ck_assert_uint_eq(a->owner[11], o3);
        ck_assert_uint_eq(a->owner[12], o2);
        ck_assert_uint_eq(arena_used(a), 20);
        arena_free(a);
}
END_TEST

static Suite *arena_restore_suite(void) {
        Suite *s = suite_create("arena-restore");
        TCase *tc = tcase_create("restore");

        tcase_add_test(tc, test_restore_ownership);
        tcase_add_test(tc, test_restore_punches_unheld);
        tcase_add_test(tc, test_transfer);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(arena_restore_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
