/* SPDX-License-Identifier: MIT */
/* Unit tests of daemon/arena/arena.c: the free-index pool, the owner table, hole
 * punching of a tenant's arena, the audit of pages backed beyond what is
 * held, zero pages at grant, and the tmpfs bound (arena-tmpfs.c). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
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

/* A deferred release: uncharged and no longer the owner's at once, but not
 * handed out (nor its memory freed) before arena_release_finish() punched it. */
START_TEST(test_release_deferred) {
        struct arena_backing memfd = { .slack_pages = 4 };
        struct arena *a = NULL;
        uint32_t o;
        struct arena_extent e[4], back[2] = { { 2, 2 }, { 4, 2 } };
        uint64_t backed = 0, released = 0;
        uint8_t *map;

        ck_assert_int_eq(arena_new("test", 8, PAGE, &memfd, &a), 0);
        o = new_owner(a);

        ck_assert_int_eq(arena_alloc(a, o, 8, e, 4), 1);
        map = mmap(NULL, 8 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
        ck_assert_ptr_ne(map, MAP_FAILED);
        memset(map, 0xcd, 8 * PAGE);

        ck_assert_int_eq(arena_release_begin(a, back, 2, &released), 0);
        ck_assert_uint_eq(released, 4);
        ck_assert_uint_eq(arena_used(a), 4);
        /* Not the owner's any more: a second return of them is refused. */
        ck_assert(!arena_check_owned(a, o, &back[0], 1, NULL));
        /* Not free yet: the arena is full, the data still there. */
        ck_assert_int_lt(arena_alloc(a, o, 1, e, 4), 0);
        ck_assert_uint_eq(map[3 * PAGE], 0xcd);

        arena_release_finish(a, back, 2);
        ck_assert_int_eq(arena_backed_bytes(a, &backed), 0);
        ck_assert_uint_eq(backed, 4 * PAGE);
        ck_assert_uint_eq(map[2 * PAGE], 0);
        ck_assert_uint_eq(map[5 * PAGE + PAGE - 1], 0);
        ck_assert_int_eq(arena_alloc(a, o, 4, e, 4), 1);
        ck_assert_uint_eq(e[0].start, 2);
        ck_assert_uint_eq(arena_used(a), 8);
        munmap(map, 8 * PAGE);
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
/* Write @byte into pages [start, start+count) through the fd, as a client
 * writing through its mapping would. */
static void scribble(struct arena *a, uint64_t start, uint64_t count, uint8_t byte) {
        char buf[PAGE];

        memset(buf, byte, sizeof(buf));
        for (uint64_t p = start; p < start + count; p++)
                ck_assert_int_eq(pwrite(a->fd, buf, PAGE, (off_t) (p * PAGE)), (ssize_t) PAGE);
}

static uint8_t byte_at(struct arena *a, uint64_t page) {
        uint8_t b = 0xff;

        ck_assert_int_eq(pread(a->fd, &b, 1, (off_t) (page * PAGE)), 1);
        return b;
}

START_TEST(test_audit_clean_arena) {
        struct arena *a = new_arena(1000);
        uint32_t o = new_owner(a);
        struct arena_extent e[4];
        struct arena_audit res;

        ck_assert_int_eq(arena_alloc(a, o, 10, e, 4), 1);
        ck_assert_int_eq(arena_grant_prepare(a, e, 1), 0);
        scribble(a, 0, 10, 0x11);
        ck_assert_int_eq(arena_audit(a, &res), 0);
        ck_assert_uint_eq(res.overrun_pages, 0);
        ck_assert(!res.size_restored);
        ck_assert_uint_eq(res.backed_bytes, 10 * PAGE);
        ck_assert_uint_eq(byte_at(a, 9), 0x11);
        arena_free(a);
}
END_TEST

START_TEST(test_audit_punches_unheld_pages) {
        struct arena *a = new_arena(1000);
        uint32_t o = new_owner(a);
        struct arena_extent e[4];
        struct arena_audit res;

        ck_assert_int_eq(arena_alloc(a, o, 10, e, 4), 1);
        scribble(a, 0, 10, 0x11);    /* held */
        scribble(a, 100, 100, 0x42); /* never held */
        scribble(a, 998, 2, 0x42);   /* the last pages */
        ck_assert_int_eq(arena_audit(a, &res), 0);
        ck_assert_uint_eq(res.overrun_pages, 102);
        ck_assert_uint_eq(res.backed_bytes, 10 * PAGE);
        /* What clients hold is left alone; the rest reads zero. */
        for (uint64_t p = 0; p < 10; p++)
                ck_assert_uint_eq(byte_at(a, p), 0x11);
        ck_assert_uint_eq(byte_at(a, 150), 0);
        ck_assert_uint_eq(byte_at(a, 999), 0);
        /* Nothing left to find. */
        ck_assert_int_eq(arena_audit(a, &res), 0);
        ck_assert_uint_eq(res.overrun_pages, 0);
        arena_free(a);
}
END_TEST

START_TEST(test_audit_after_release) {
        /* Pages written after their client returned them. */
        struct arena *a = new_arena(256);
        uint32_t o = new_owner(a);
        struct arena_extent e[4];
        struct arena_audit res;

        ck_assert_int_eq(arena_alloc(a, o, 64, e, 4), 1);
        scribble(a, 0, 64, 0x11);
        ck_assert_uint_eq(arena_release(a, o, e, 1), 64);
        scribble(a, 10, 5, 0x42);
        ck_assert_int_eq(arena_audit(a, &res), 0);
        ck_assert_uint_eq(res.overrun_pages, 5);
        ck_assert_uint_eq(res.backed_bytes, 0);
        arena_free(a);
}
END_TEST

START_TEST(test_grant_hands_out_zero_pages) {
        struct arena *a = new_arena(1000);
        uint32_t o = new_owner(a), o2 = new_owner(a);
        struct arena_extent e[4];
        struct arena_audit res;
        int n;

        ck_assert_int_eq(arena_alloc(a, o, 1, e, 4), 1);
        ck_assert_int_eq(arena_grant_prepare(a, e, 1), 0);
        scribble(a, 1, 20, 0x42); /* free pages, never held */
        scribble(a, 40, 1, 0x42);
        n = arena_alloc(a, o2, 100, e, 4);
        ck_assert_int_eq(n, 1);
        ck_assert_uint_eq(e[0].start, 1);
        ck_assert_int_eq(arena_grant_prepare(a, e, (size_t) n), 0);
        for (uint64_t p = 1; p <= 100; p++)
                ck_assert_uint_eq(byte_at(a, p), 0);
        /* Reported (and counted) by the next audit. */
        ck_assert_int_eq(arena_audit(a, &res), 0);
        ck_assert_uint_eq(res.overrun_pages, 21);
        ck_assert_int_eq(arena_audit(a, &res), 0);
        ck_assert_uint_eq(res.overrun_pages, 0);
        arena_free(a);
}
END_TEST

/* An arena on its own tmpfs instance, or NULL when this process cannot
 * make one (the test then checks nothing, and says so). */
static struct arena *new_tmpfs_arena(uint64_t npages, uint64_t slack) {
        struct arena_backing b = { .tmpfs = true, .slack_pages = slack };
        struct arena *a = NULL;
        int r = arena_new("test", npages, PAGE, &b, &a);

        if (r < 0) {
                fprintf(stderr, "no tmpfs instance for the arena (%s): tmpfs test skipped\n", strerror(-r));
                return NULL;
        }
        ck_assert(a->tmpfs);
        ck_assert_int_ge(a->pick_fd, 0);
        return a;
}

START_TEST(test_tmpfs_bound) {
        struct arena *a = new_tmpfs_arena(4096, 16);
        uint32_t o;
        struct arena_extent e[4];
        struct arena_audit res;
        struct stat st;
        char buf[PAGE];

        if (!a)
                return;
        o = new_owner(a);
        ck_assert_uint_eq(a->size_pages, 16);
        ck_assert_int_eq(arena_alloc(a, o, 100, e, 4), 1);
        ck_assert_int_eq(arena_grant_prepare(a, e, 1), 0);
        ck_assert_uint_ge(a->size_pages, 100 + 16);
        ck_assert_uint_le(a->size_pages, 100 + 2 * 16);
        scribble(a, 0, 100, 0x11);

        /* Beyond the charge + slack the kernel says no. */
        ck_assert_int_eq(fallocate(a->fd, 0, 0, 4096 * PAGE), -1);
        ck_assert_int_eq(errno, ENOSPC);
        memset(buf, 0x42, sizeof(buf));
        for (uint64_t p = 100; p < 4096; p++)
                if (pwrite(a->fd, buf, PAGE, (off_t) (p * PAGE)) != (ssize_t) PAGE)
                        break;
        ck_assert_int_eq(fstat(a->fd, &st), 0);
        ck_assert_uint_le((uint64_t) st.st_blocks * 512, (100 + 2 * 16) * PAGE);

        /* Full: the audit punches what nobody holds. */
        ck_assert_int_eq(arena_audit(a, &res), 0);
        ck_assert_uint_ge(res.overrun_pages, 16);
        ck_assert_uint_eq(res.backed_bytes, 100 * PAGE);
        ck_assert_uint_eq(byte_at(a, 99), 0x11);

        /* Released: the instance shrinks back to the slack. */
        ck_assert_uint_eq(arena_release(a, o, e, 1), 100);
        ck_assert_uint_le(a->size_pages, 2 * 16);
        ck_assert_uint_ge(a->size_pages, 16);
        arena_free(a);
}
END_TEST

START_TEST(test_tmpfs_shrink_refused_then_resize_again) {
        /* A shrink the kernel refuses must not break later resizes. */
        struct arena *a = new_tmpfs_arena(4096, 4);
        uint32_t o;
        struct arena_extent e[4];
        struct arena_audit res;

        if (!a)
                return;
        o = new_owner(a);
        ck_assert_int_eq(arena_alloc(a, o, 50, e, 4), 1);
        ck_assert_int_eq(arena_grant_prepare(a, e, 1), 0);
        scribble(a, 0, 50, 0x11);
        scribble(a, 60, 8, 0x42); /* the slack, not held */
        ck_assert_uint_eq(arena_release(a, o, e, 1), 50);
        ck_assert_int_eq(arena_audit(a, &res), 0);
        ck_assert_uint_eq(res.overrun_pages, 8);
        ck_assert_uint_le(a->size_pages, 2 * 4);
        ck_assert_int_eq(arena_alloc(a, o, 200, e, 4), 1);
        ck_assert_int_eq(arena_grant_prepare(a, e, 1), 0);
        ck_assert_uint_ge(a->size_pages, 200 + 4);
        scribble(a, e[0].start, 200, 0x11);
        arena_free(a);
}
END_TEST

START_TEST(test_tmpfs_size_restored) {
        struct arena *a = new_tmpfs_arena(64, 4);
        struct arena_audit res;
        struct stat st;

        if (!a)
                return;
        ck_assert_int_eq(ftruncate(a->fd, 8 * PAGE), 0); /* not sealed */
        ck_assert_int_eq(arena_audit(a, &res), 0);
        ck_assert(res.size_restored);
        ck_assert_int_eq(fstat(a->fd, &st), 0);
        ck_assert_int_eq(st.st_size, 64 * PAGE);
        arena_free(a);
}
END_TEST

/* A tmpfs arena of 4096 pages (slack 16) where one owner (*@ret_owner)
 * holds pages [0, 100), granted and written, or NULL as new_tmpfs_arena(). */
static struct arena *tmpfs_arena_holding_100(uint32_t *ret_owner) {
        struct arena *a = new_tmpfs_arena(4096, 16);
        struct arena_extent e[4];

        if (!a)
                return NULL;
        *ret_owner = new_owner(a);
        ck_assert_int_eq(arena_alloc(a, *ret_owner, 100, e, 4), 1);
        ck_assert_int_eq(arena_grant_prepare(a, e, 1), 0);
        scribble(a, 0, 100, 0x11);
        return a;
}

/* Pages whose punch is deferred are no longer charged but still backed:
 * the tmpfs instance must not grow for them (its size stays within what is
 * held + 2 x slack), so at most one slack of pages may wait for their punch;
 * a return beyond that is refused (the caller punches it at once). */
START_TEST(test_tmpfs_deferred_bound) {
        struct arena_extent e[4], back = { 0, 16 }, more = { 16, 1 };
        uint64_t released = 0;
        struct stat st;
        char buf[PAGE];
        uint32_t o = 0;
        struct arena *a = tmpfs_arena_holding_100(&o);

        if (!a)
                return;

        ck_assert_int_eq(arena_release_begin(a, &back, 1, &released), 0);
        ck_assert_uint_eq(released, 16);
        /* One slack pending already: the next return is refused, changes
         * nothing, and the page stays its owner's. */
        ck_assert_int_eq(arena_release_begin(a, &more, 1, &released), -ENOSPC);
        ck_assert(arena_check_owned(a, o, &more, 1, NULL));
        ck_assert_uint_eq(arena_used(a), 84);

        /* A grant while 16 pages wait for their punch: the instance grows
         * to what is held + 2 x slack, no more, and the new pages fit. */
        ck_assert_int_eq(arena_alloc(a, o, 100, e, 4), 1);
        ck_assert_uint_eq(e[0].start, 100);
        ck_assert_int_eq(arena_grant_prepare(a, e, 1), 0);
        ck_assert_uint_le(a->size_pages, 184 + 2 * 16);
        scribble(a, 100, 100, 0x22);
        memset(buf, 0x42, sizeof(buf));
        for (uint64_t p = 200; p < 4096; p++)
                if (pwrite(a->fd, buf, PAGE, (off_t) (p * PAGE)) != (ssize_t) PAGE)
                        break;
        ck_assert_int_eq(fstat(a->fd, &st), 0);
        ck_assert_uint_le((uint64_t) st.st_blocks * 512, (184 + 2 * 16) * PAGE);

        /* Written while pending: gone with the punch, zero when granted. */
        scribble(a, 0, 16, 0x33);
        arena_release_finish(a, &back, 1);
        ck_assert_uint_eq(byte_at(a, 3), 0);
        ck_assert_int_eq(arena_release_begin(a, &more, 1, &released), 0);
        arena_release_finish(a, &more, 1);
        arena_free(a);
}
END_TEST

/* The end of a deferred release fits the instance to what is held, as a
 * release at once does: nothing else may come to shrink it (an idle
 * client returning its last pages). */
START_TEST(test_tmpfs_deferred_finish_shrinks) {
        struct arena_extent back = { 0, 64 };
        uint64_t released = 0;
        struct stat st;
        uint32_t o = 0;
        struct arena *a = tmpfs_arena_holding_100(&o);

        if (!a)
                return;
        ck_assert_uint_le(a->size_pages, 100 + 2 * 16);

        /* A return of more than a slack is refused as deferred... */
        ck_assert_int_eq(arena_release_begin(a, &back, 1, &released), -ENOSPC);
        /* ...one slack is taken. */
        back.count = 16;
        ck_assert_int_eq(arena_release_begin(a, &back, 1, &released), 0);
        ck_assert_uint_eq(arena_used(a), 84);
        arena_release_finish(a, &back, 1);
        /* 84 held: the instance is at most 84 + 2 x slack, and what is
         * backed is what is held. */
        ck_assert_uint_le(a->size_pages, 84 + 2 * 16);
        ck_assert_int_eq(fstat(a->fd, &st), 0);
        ck_assert_uint_eq((uint64_t) st.st_blocks * 512, 84 * PAGE);
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
        tcase_add_test(tc, test_release_deferred);
        tcase_add_test(tc, test_sealed);
        tcase_add_test(tc, test_metadata_per_page);
        tcase_add_test(tc, test_odd_size_never_hands_out_past_the_end);
        tcase_add_test(tc, test_audit_clean_arena);
        tcase_add_test(tc, test_audit_punches_unheld_pages);
        tcase_add_test(tc, test_audit_after_release);
        tcase_add_test(tc, test_grant_hands_out_zero_pages);
        tcase_add_test(tc, test_tmpfs_bound);
        tcase_add_test(tc, test_tmpfs_shrink_refused_then_resize_again);
        tcase_add_test(tc, test_tmpfs_size_restored);
        tcase_add_test(tc, test_tmpfs_deferred_bound);
        tcase_add_test(tc, test_tmpfs_deferred_finish_shrinks);
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
