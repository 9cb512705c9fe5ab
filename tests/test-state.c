/* SPDX-License-Identifier: MIT */
/* test-state.c - the layers of tenant limits (daemon/service/state.c). */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macros.h"
#include "state.h"

static char dir[] = "/tmp/test-state.XXXXXX";

static void setup(void) {
        strcpy(dir, "/tmp/test-state.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void) {
        char p[256];

        snprintf(p, sizeof(p), "%s/%s", dir, STATE_LIMITS_FILE);
        (void) unlink(p);
        snprintf(p, sizeof(p), "%s/.%s.tmp", dir, STATE_LIMITS_FILE);
        (void) unlink(p);
        (void) rmdir(dir);
}

static struct mb_limits unset(void) {
        return (struct mb_limits) { MB_LIMIT_UNSET, MB_LIMIT_UNSET, MB_LIMIT_UNSET, MB_LIMIT_UNSET, MB_LIMIT_UNSET,
                                    MB_LIMIT_UNSET };
}

static void write_file(const char *text) {
        char p[256];
        FILE *f;

        snprintf(p, sizeof(p), "%s/%s", dir, STATE_LIMITS_FILE);
        f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
}

START_TEST(test_persisted_survives_reload) {
        struct state *s = NULL, *s2 = NULL;
        struct mb_limits l = unset(), o;

        ck_assert_int_eq(state_new(dir, &s), 0);
        l.max = 1 << 20;
        l.charge_batch = 16;
        ck_assert_int_eq(state_set_limits(s, "db/cache", &l, false), 0);
        state_free(s);

        /* A new daemon reads the file. */
        ck_assert_int_eq(state_new(dir, &s2), 0);
        ck_assert_int_eq(state_load_persisted(s2, NULL), 0);
        ck_assert(state_overlay(s2, "db/cache", &o));
        ck_assert_uint_eq(o.max, 1 << 20);
        ck_assert_uint_eq(o.charge_batch, 16);
        ck_assert_uint_eq(o.high, MB_LIMIT_UNSET);
        ck_assert(!state_overlay(s2, "db", &o));
        state_free(s2);
}
END_TEST

START_TEST(test_runtime_not_on_disk) {
        struct state *s = NULL, *s2 = NULL;
        struct mb_limits l = unset(), o;

        ck_assert_int_eq(state_new(dir, &s), 0);
        l.high = 4096;
        ck_assert_int_eq(state_set_limits(s, "web", &l, true), 0);
        ck_assert(state_runtime_dirty(s));
        ck_assert(state_overlay(s, "web", &o));
        ck_assert_uint_eq(o.high, 4096);
        state_free(s);

        ck_assert_int_eq(state_new(dir, &s2), 0);
        ck_assert_int_eq(state_load_persisted(s2, NULL), 0);
        ck_assert(!state_overlay(s2, "web", &o));
        state_free(s2);
}
END_TEST

START_TEST(test_precedence) {
        struct state *s = NULL;
        struct mb_limits l = unset(), o;

        ck_assert_int_eq(state_new(dir, &s), 0);
        /* persisted max and high, runtime max over it. */
        l.max = 8192;
        l.high = 4096;
        ck_assert_int_eq(state_set_limits(s, "a", &l, false), 0);
        l = unset();
        l.max = 16384;
        ck_assert_int_eq(state_set_limits(s, "a", &l, true), 0);
        ck_assert(state_overlay(s, "a", &o));
        ck_assert_uint_eq(o.max, 16384); /* runtime wins */
        ck_assert_uint_eq(o.high, 4096); /* falls through to persisted */

        /* Setting max persistently drops the runtime max. */
        l = unset();
        l.max = UINT64_MAX;
        ck_assert_int_eq(state_set_limits(s, "a", &l, false), 0);
        ck_assert(state_overlay(s, "a", &o));
        ck_assert_uint_eq(o.max, UINT64_MAX);
        ck_assert_uint_eq(state_get(s, "a")->runtime.max, MB_LIMIT_UNSET);
        state_free(s);
}
END_TEST

START_TEST(test_revert) {
        struct state *s = NULL;
        struct mb_limits l = unset(), o, fields = unset();

        ck_assert_int_eq(state_new(dir, &s), 0);
        l.max = 8192;
        l.low = 4096;
        ck_assert_int_eq(state_set_limits(s, "a", &l, false), 0);
        l = unset();
        l.max = 16384;
        ck_assert_int_eq(state_set_limits(s, "a", &l, true), 0);

        /* Runtime only: the persisted max shows through again. */
        fields.max = 0;
        ck_assert_int_eq(state_revert(s, "a", &fields, true), 1);
        ck_assert(state_overlay(s, "a", &o));
        ck_assert_uint_eq(o.max, 8192);
        ck_assert(state_runtime_dirty(s));
        ck_assert_int_eq(state_revert(s, "a", &fields, true), 0); /* nothing left to drop */

        /* Both layers, on disk too: only low is left. */
        ck_assert_int_eq(state_revert(s, "a", &fields, false), 1);
        ck_assert(state_overlay(s, "a", &o));
        ck_assert_uint_eq(o.max, MB_LIMIT_UNSET);
        ck_assert_uint_eq(o.low, 4096);
        ck_assert_int_eq(state_load_persisted(s, NULL), 0);
        ck_assert_uint_eq(state_get(s, "a")->persisted.max, MB_LIMIT_UNSET);
        ck_assert_uint_eq(state_get(s, "a")->persisted.low, 4096);

        /* Every field: the entry goes. */
        fields = (struct mb_limits) { 0, 0, 0, 0, 0 };
        ck_assert_int_eq(state_revert(s, "a", &fields, false), 1);
        ck_assert_ptr_null(state_get(s, "a"));
        ck_assert_int_eq(state_revert(s, "nope", &fields, false), 0);
        state_free(s);

        /* Without a state directory the persisted layer cannot change. */
        ck_assert_int_eq(state_new(NULL, &s), 0);
        ck_assert_int_eq(state_revert(s, "a", &fields, false), 0);
        state_free(s);
}
END_TEST

START_TEST(test_runtime_roundtrip) {
        struct state *s = NULL, *s2 = NULL;
        struct mb_limits l = unset(), o;
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;

        ck_assert_int_eq(state_new(NULL, &s), 0);
        l.min = 0;
        l.low = UINT64_MAX;
        ck_assert_int_eq(state_set_limits(s, "x/y", &l, true), 0);
        ck_assert_int_eq(state_set_created(s, "x/y", true), 0);
        ck_assert_int_eq(state_set_created(s, "z", true), 0);
        ck_assert_int_eq(state_runtime_serialize(s, &text, &len), 0);
        ck_assert(!state_runtime_dirty(s));
        ck_assert_uint_eq(len, strlen(text));

        ck_assert_int_eq(state_new(NULL, &s2), 0);
        ck_assert_int_eq(state_runtime_parse(s2, text, len, "snapshot", NULL), 0);
        ck_assert(state_overlay(s2, "x/y", &o));
        ck_assert_uint_eq(o.min, 0);
        ck_assert_uint_eq(o.low, UINT64_MAX);
        ck_assert(state_get(s2, "x/y")->created);
        ck_assert(state_get(s2, "z")->created);
        ck_assert(!state_overlay(s2, "z", &o));
        state_free(s);
        state_free(s2);
}
END_TEST

START_TEST(test_persist_without_dir) {
        struct state *s = NULL;
        struct mb_limits l = unset();

        ck_assert_int_eq(state_new(NULL, &s), 0);
        l.max = 1;
        ck_assert_int_eq(state_set_limits(s, "a", &l, false), -EROFS);
        ck_assert_ptr_null(state_get(s, "a"));
        state_free(s);
}
END_TEST

START_TEST(test_bad_file_names_line) {
        struct state *s = NULL;
        struct mb_limits o;
        char *error = NULL;

        write_file("[Tenant]\nPath=ok\nMemoryMax=4096\n");
        ck_assert_int_eq(state_new(dir, &s), 0);
        ck_assert_int_eq(state_load_persisted(s, NULL), 0);

        write_file("# comment\n[Tenant]\nPath=a\nMemoryMax=lots\n");
        ck_assert_int_eq(state_load_persisted(s, &error), -EINVAL);
        ck_assert_ptr_nonnull(error);
        ck_assert_msg(strstr(error, "limits.conf:4: invalid size \"lots\""), "%s", error);
        free(error);
        error = NULL;
        /* Nothing changed. */
        ck_assert(state_overlay(s, "ok", &o));
        ck_assert_uint_eq(o.max, 4096);

        write_file("[Tenant]\nMemoryMax=1\n");
        ck_assert_int_eq(state_load_persisted(s, &error), -EINVAL);
        ck_assert_msg(strstr(error, ":1: [Tenant] section without Path="), "%s", error);
        free(error);
        error = NULL;

        write_file("[Tenant]\nPath=a\nCreated=yes\n");
        ck_assert_int_eq(state_load_persisted(s, &error), -EINVAL);
        ck_assert_msg(strstr(error, ":3: unknown key Created"), "%s", error);
        free(error);
        error = NULL;

        write_file("[Tenant]\nPath=../x\n");
        ck_assert_int_eq(state_load_persisted(s, &error), -EINVAL);
        ck_assert_msg(strstr(error, ":1: invalid tenant path"), "%s", error);
        free(error);
        state_free(s);
}
END_TEST

START_TEST(test_forget) {
        struct state *s = NULL, *s2 = NULL;
        struct mb_limits l = unset(), o;

        ck_assert_int_eq(state_new(dir, &s), 0);
        l.max = 4096;
        ck_assert_int_eq(state_set_limits(s, "gone", &l, false), 0);
        ck_assert_int_eq(state_set_limits(s, "gone", &l, true), 0);
        ck_assert_int_eq(state_forget(s, "gone"), 0);
        ck_assert_ptr_null(state_get(s, "gone"));
        state_free(s);

        ck_assert_int_eq(state_new(dir, &s2), 0);
        ck_assert_int_eq(state_load_persisted(s2, NULL), 0);
        ck_assert(!state_overlay(s2, "gone", &o));
        state_free(s2);
}
END_TEST

START_TEST(test_many_entries) {
        struct state *s = NULL;
        struct mb_limits l = unset(), o;
        char path[64];

        ck_assert_int_eq(state_new(NULL, &s), 0);
        for (unsigned i = 0; i < 5000; i++) {
                snprintf(path, sizeof(path), "t%u", i);
                l.max = i;
                ck_assert_int_eq(state_set_limits(s, path, &l, true), 0);
        }
        for (unsigned i = 0; i < 5000; i++) {
                snprintf(path, sizeof(path), "t%u", i);
                ck_assert(state_overlay(s, path, &o));
                ck_assert_uint_eq(o.max, i);
        }
        state_free(s);
}
END_TEST

static Suite *state_suite(void) {
        Suite *s = suite_create("state");
        TCase *tc = tcase_create("layers");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_persisted_survives_reload);
        tcase_add_test(tc, test_runtime_not_on_disk);
        tcase_add_test(tc, test_precedence);
        tcase_add_test(tc, test_revert);
        tcase_add_test(tc, test_runtime_roundtrip);
        tcase_add_test(tc, test_persist_without_dir);
        tcase_add_test(tc, test_bad_file_names_line);
        tcase_add_test(tc, test_forget);
        tcase_add_test(tc, test_many_entries);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(state_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
