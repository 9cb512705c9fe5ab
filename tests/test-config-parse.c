/* SPDX-License-Identifier: MIT */
/*
 * test-config-parse.c - the pure configuration parser of daemon/core/config.c
 * on memory buffers, with the machine (RAM, page size, user and group
 * lookups) given by the caller: no file, no NSS.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* By path: "config.h" alone finds the build's autoconf header first. */
#include "../daemon/core/config.h"

#define GIB (1ULL << 30)
#define MIB (1ULL << 20)

/* ---- the pure parser: memory buffers, the machine from the caller ------- */

static int fake_resolve(const char *name, bool group, uint32_t *ret, void *userdata) {
        unsigned *calls = userdata;

        (*calls)++;
        if (strcmp(name, group ? "staff" : "alice") == 0) {
                *ret = group ? 50 : 1001;
                return 0;
        }
        if (strcmp(name, "broken") == 0)
                return -EIO;
        return -ENOENT;
}

START_TEST(test_parse_buffer_env) {
        unsigned calls = 0;
        struct mb_config_env env = {
                .ram_bytes = 8 * GIB,
                .sys_page_size = 16384,
                .resolve_name = fake_resolve,
                .userdata = &calls,
        };
        struct mb_config *c = NULL;
        char *error = NULL;
        static const char broker[] = "[Broker]\nCapacity=50%\n";
        /* The last line has no newline. */
        static const char tenants[] = "[Tenant]\nPath=/a/b/\nMemoryMax=25%\nAllowUsers=alice 7\n"
                                      "AllowGroups=staff\n[Tenant]\nPath=c\nMemoryLow=1M";

        ck_assert_int_eq(mb_config_new(&env, &c), 0);
        /* Defaults come from @env, not from this machine. */
        ck_assert_uint_eq(c->broker.capacity_bytes, 2 * GIB);
        ck_assert_uint_eq(c->broker.page_size, 16384);
        ck_assert_int_eq(mb_config_parse_buffer(c, &env, "mem/membroker.conf", broker, strlen(broker), true, &error), 0);
        ck_assert_ptr_null(error);
        ck_assert_uint_eq(c->broker.capacity_bytes, 4 * GIB);
        ck_assert_int_eq(mb_config_parse_buffer(c, &env, "mem/t.conf", tenants, strlen(tenants), false, &error), 0);
        ck_assert_int_eq(mb_config_finish(c, &error), 0);
        ck_assert_ptr_null(error);

        ck_assert_uint_eq(c->ntenants, 2);
        ck_assert_str_eq(c->tenants[0].path, "a/b");
        ck_assert_uint_eq(c->tenants[0].max, GIB);
        ck_assert_uint_eq(c->tenants[0].n_allow_users, 2);
        ck_assert_uint_eq(c->tenants[0].allow_users[0], 1001);
        ck_assert_uint_eq(c->tenants[0].allow_users[1], 7);
        ck_assert_uint_eq(c->tenants[0].n_allow_groups, 1);
        ck_assert_uint_eq(c->tenants[0].allow_groups[0], 50);
        ck_assert_uint_eq(calls, 2); /* names only: "7" is an id */
        ck_assert_uint_eq(c->tenants[1].low, MIB);
        ck_assert_uint_eq(c->tenants[1].line, 7);
        ck_assert_ptr_eq(mb_config_find_tenant(c, "a/b"), &c->tenants[0]);
        ck_assert_ptr_eq(mb_config_find_normalized(c, "c"), &c->tenants[1]);
        ck_assert_ptr_null(mb_config_find_normalized(c, "a"));
        mb_config_free(c);
}
END_TEST

/* Parse @text as one tenants.d file; expect @reason at "mem/x.conf:@line". */
static void buffer_fails(const char *text, size_t len, unsigned line, const char *reason) {
        unsigned calls = 0;
        struct mb_config_env env = { .ram_bytes = GIB, .sys_page_size = 4096, .resolve_name = fake_resolve,
                                     .userdata = &calls };
        struct mb_config *c = NULL;
        char *error = NULL, *expect = NULL;

        ck_assert_int_eq(mb_config_new(&env, &c), 0);
        ck_assert_int_eq(mb_config_parse_buffer(c, &env, "mem/x.conf", text, len, false, &error), -EINVAL);
        ck_assert_int_ge(asprintf(&expect, "mem/x.conf:%u: %s", line, reason), 0);
        ck_assert_str_eq(error, expect);
        free(expect);
        free(error);
        mb_config_free(c);
}

START_TEST(test_parse_buffer_errors) {
        static const char nul[] = "[Tenant]\nPath=a\nMemoryMax=1\0M\n";

        /* A NUL inside the buffer is found, not taken for the end. */
        buffer_fails(nul, sizeof(nul) - 1, 3, "NUL byte in line");
        buffer_fails("[Tenant]\nPath=a\nAllowUsers=bob\n", 30, 3, "unknown user 'bob' in AllowUsers=");
        buffer_fails("[Tenant]\nPath=a\nAllowGroups=broken\n", 34, 3,
                     "cannot look up group 'broken' in AllowGroups=: Input/output error");
        /* Without a resolver every name is unknown. */
        {
                struct mb_config_env env = { .ram_bytes = GIB, .sys_page_size = 4096 };
                struct mb_config *c = NULL;
                char *error = NULL;
                static const char t[] = "[Tenant]\nPath=a\nAllowUsers=root\n";

                ck_assert_int_eq(mb_config_new(&env, &c), 0);
                ck_assert_int_eq(mb_config_parse_buffer(c, &env, "m", t, strlen(t), false, &error), -EINVAL);
                ck_assert_str_eq(error, "m:3: unknown user 'root' in AllowUsers=");
                free(error);
                mb_config_free(c);
        }
}
END_TEST

/* Many tenants: the index finds each, and a duplicate far apart is found. */
START_TEST(test_parse_buffer_many) {
        struct mb_config_env env = { .ram_bytes = GIB, .sys_page_size = 4096 };
        struct mb_config *c = NULL;
        char *error = NULL, text[128], path[32];
        const unsigned n = 20000;

        ck_assert_int_eq(mb_config_new(&env, &c), 0);
        for (unsigned i = 0; i < n; i++) {
                int len = snprintf(text, sizeof(text), "[Tenant]\nPath=p/t%u\n", i);
                ck_assert_int_eq(mb_config_parse_buffer(c, &env, "f", text, (size_t) len, false, &error), 0);
        }
        ck_assert_int_eq(mb_config_finish(c, &error), 0);
        for (unsigned i = 0; i < n; i++) {
                snprintf(path, sizeof(path), "p/t%u", i);
                ck_assert_ptr_eq(mb_config_find_normalized(c, path), &c->tenants[i]);
        }
        ck_assert_int_eq(mb_config_parse_buffer(c, &env, "g", "[Tenant]\nPath=p/t3\n", 18, false, &error), 0);
        ck_assert_int_eq(mb_config_finish(c, &error), -EINVAL);
        ck_assert_str_eq(error, "g:2: duplicate Path=p/t3, first defined at f:2");
        free(error);
        mb_config_free(c);
}
END_TEST

static Suite *config_parse_suite(void) {
        Suite *s = suite_create("config-parse");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_parse_buffer_env);
        tcase_add_test(tc, test_parse_buffer_errors);
        tcase_add_test(tc, test_parse_buffer_many);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(config_parse_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
