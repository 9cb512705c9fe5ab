/* SPDX-License-Identifier: MIT */
/*
 * test-delegate.c - Delegate= (daemon/core/delegate.c): parsing the key,
 * in a tenants.d file and alone, and the rule that decides who may manage
 * which tenant (uid 0; a STRICT ancestor naming the caller's uid or one of
 * its groups; never the delegated tenant itself).
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* By path: "config.h" alone finds the build's autoconf header first. */
#include "../daemon/core/config.h"
#include "../daemon/core/delegate.h"

#define GIB (1ULL << 30)

static int fake_resolve(const char *name, bool group, uint32_t *ret, void *userdata) {
        (void) userdata;
        if (strcmp(name, group ? "staff" : "alice") == 0) {
                *ret = group ? 50 : 1001;
                return 0;
        }
        if (strcmp(name, "broken") == 0)
                return -EIO;
        return -ENOENT;
}

static void parse_fails(const char *value, int err, const char *reason) {
        struct mb_delegate d = {};
        char *why = NULL;

        ck_assert_int_eq(mb_delegate_parse(value, fake_resolve, NULL, &d, &why), err);
        ck_assert_ptr_nonnull(why);
        ck_assert_str_eq(why, reason);
        free(why);
        mb_delegate_done(&d);
}

START_TEST(test_parse) {
        struct mb_delegate d = {};
        char *why = NULL;

        ck_assert_int_eq(mb_delegate_parse("alice 7\t@staff @50 7", fake_resolve, NULL, &d, &why), 0);
        ck_assert_ptr_null(why);
        ck_assert_uint_eq(d.n_users, 2); /* 7 twice is 7 once */
        ck_assert_uint_eq(d.users[0], 1001);
        ck_assert_uint_eq(d.users[1], 7);
        ck_assert_uint_eq(d.n_groups, 1); /* @staff is @50 */
        ck_assert_uint_eq(d.groups[0], 50);
        /* Lines add up; an empty value starts over. */
        ck_assert_int_eq(mb_delegate_parse("@9", fake_resolve, NULL, &d, &why), 0);
        ck_assert_uint_eq(d.n_groups, 2);
        ck_assert_int_eq(mb_delegate_parse("", fake_resolve, NULL, &d, &why), 0);
        ck_assert_uint_eq(d.n_users + d.n_groups, 0);
        ck_assert_ptr_null(d.users);
        mb_delegate_done(&d);

        parse_fails("bob", -EINVAL, "unknown user 'bob' in Delegate=");
        parse_fails("@bob", -EINVAL, "unknown group 'bob' in Delegate=");
        parse_fails("alice @", -EINVAL, "'@' names no group in Delegate= ('@' comes right before a group's name or gid)");
        parse_fails("12x", -EINVAL, "bad id '12x' in Delegate= (a uid is a decimal number below 4294967295)");
        parse_fails("@4294967295", -EINVAL,
                    "bad id '@4294967295' in Delegate= (a gid is a decimal number below 4294967295)");
        parse_fails("-1", -EINVAL, "unknown user '-1' in Delegate=");
        parse_fails("@broken", -EIO, "cannot look up 'broken' in Delegate= (group: Input/output error)");
        /* Without a resolver every name is unknown; ids still work. */
        ck_assert_int_eq(mb_delegate_parse("0 @0", NULL, NULL, &d, &why), 0);
        ck_assert_int_eq(mb_delegate_parse("root", NULL, NULL, &d, &why), -EINVAL);
        ck_assert_str_eq(why, "unknown user 'root' in Delegate=");
        free(why);
        mb_delegate_done(&d);
}
END_TEST

/* In a tenants.d file: the error names file:line; the tree gets the lists. */
START_TEST(test_config) {
        struct mb_config_env env = { .ram_bytes = GIB, .sys_page_size = 4096, .resolve_name = fake_resolve };
        static const char bad[] = "[Tenant]\nPath=a\n\nDelegate=alice @nosuch\n";
        static const char good[] = "[Tenant]\nPath=team\nDelegate=alice\nDelegateMaxDescendants=20\n"
                                   "Delegate=@staff 1002\n[Tenant]\nPath=team/a\n";
        static const char range[] = "[Tenant]\nPath=b\nDelegateMaxDescendants=0\n";
        struct mb_config *c = NULL;
        struct tenant_tree *tree = NULL;
        struct tenant *team, *a;
        char *error = NULL;

        ck_assert_int_eq(mb_config_new(&env, &c), 0);
        ck_assert_int_eq(mb_config_parse_buffer(c, &env, "t.d/a.conf", bad, strlen(bad), false, &error), -EINVAL);
        ck_assert_str_eq(error, "t.d/a.conf:4: unknown group 'nosuch' in Delegate=");
        free(error);
        error = NULL;
        mb_config_free(c);

        ck_assert_int_eq(mb_config_new(&env, &c), 0);
        ck_assert_int_eq(mb_config_parse_buffer(c, &env, "r.conf", range, strlen(range), false, &error), -EINVAL);
        ck_assert_str_eq(error, "r.conf:3: DelegateMaxDescendants=0 is out of range (1..1000000)");
        free(error);
        error = NULL;
        mb_config_free(c);

        ck_assert_int_eq(mb_config_new(&env, &c), 0);
        ck_assert_int_eq(mb_config_parse_buffer(c, &env, "g.conf", good, strlen(good), false, &error), 0);
        ck_assert_int_eq(mb_config_finish(c, &error), 0);
        ck_assert_int_eq(mb_config_build_tree(c, 1, &tree, &error), 0);
        team = tenant_lookup(tree, "team");
        a = tenant_lookup(tree, "team/a");
        ck_assert_uint_eq(team->delegate.n_users, 2);
        ck_assert_uint_eq(team->delegate.users[0], 1001);
        ck_assert_uint_eq(team->delegate.users[1], 1002);
        ck_assert_uint_eq(team->delegate.n_groups, 1);
        ck_assert_uint_eq(team->delegate.groups[0], 50);
        ck_assert_uint_eq(team->delegate.max_descendants, 20);
        ck_assert_uint_eq(a->delegate.n_users + a->delegate.n_groups, 0);
        ck_assert_uint_eq(mb_delegate_max_descendants(&a->delegate), MB_DELEGATE_DEFAULT_MAX_DESCENDANTS);
        /* A reload applying a section without Delegate= empties it. */
        ck_assert_int_eq(mb_config_apply_tenant(c, &c->tenants[1], team), 0);
        ck_assert_uint_eq(team->delegate.n_users + team->delegate.n_groups, 0);
        tenant_tree_free(tree);
        mb_config_free(c);
}
END_TEST

static void set_delegate(struct tenant *t, uid_t u, gid_t g) {
        struct mb_delegate d = { .users = &u, .n_users = 1, .groups = &g, .n_groups = g ? 1 : 0 };

        ck_assert_int_eq(mb_delegate_set(t, &d), 0);
}

START_TEST(test_rule) {
        struct tenant_tree *tree = NULL;
        struct tenant *team, *a, *ab, *other;
        const struct tenant *via;
        const gid_t staff[] = { 7, 50 }, others[] = { 51 };
        const struct mb_caller root = { .uid = 0 }, alice = { .uid = 1001 }, bob = { .uid = 1002 },
                               member = { .uid = 2000, .groups = staff, .ngroups = 2 },
                               stranger = { .uid = 2001, .groups = others, .ngroups = 1 },
                               carol = { .uid = 3000 };

        ck_assert_int_eq(tenant_tree_new(1000, 1, &tree), 0);
        ck_assert_int_eq(tenant_create(tree, "team/a/b", &ab), 0);
        ck_assert_int_eq(tenant_create(tree, "other", &other), 0);
        team = tenant_lookup(tree, "team");
        a = tenant_lookup(tree, "team/a");
        set_delegate(team, 1001, 50);
        set_delegate(a, 3000, 0);

        /* uid 0: everything, even without any Delegate=. */
        ck_assert_int_eq(mb_delegate_check(team, true, &root, &via), MB_DELEGATE_ROOT);
        ck_assert_int_eq(mb_delegate_check(tree->root, true, &root, &via), MB_DELEGATE_ROOT);

        /* By uid: strict descendants of team, not team, not outside. */
        ck_assert_int_eq(mb_delegate_check(a, true, &alice, &via), MB_DELEGATE_GRANTED);
        ck_assert_ptr_eq(via, team);
        ck_assert_int_eq(mb_delegate_check(ab, true, &alice, &via), MB_DELEGATE_GRANTED);
        ck_assert_ptr_eq(via, team);
        ck_assert_int_eq(mb_delegate_check(team, true, &alice, &via), MB_DELEGATE_DENIED_SELF);
        ck_assert_ptr_eq(via, team);
        ck_assert_int_eq(mb_delegate_check(other, true, &alice, &via), MB_DELEGATE_DENIED);
        ck_assert_ptr_null(via);
        ck_assert_int_eq(mb_delegate_check(tree->root, true, &alice, &via), MB_DELEGATE_DENIED);
        ck_assert_int_eq(mb_delegate_check(a, true, &bob, &via), MB_DELEGATE_DENIED);

        /* By group: any of the caller's groups. */
        ck_assert_int_eq(mb_delegate_check(ab, true, &member, &via), MB_DELEGATE_GRANTED);
        ck_assert_int_eq(mb_delegate_check(team, true, &member, &via), MB_DELEGATE_DENIED_SELF);
        ck_assert_int_eq(mb_delegate_check(ab, true, &stranger, &via), MB_DELEGATE_DENIED);

        /* Delegated further down: below team/a only. */
        ck_assert_int_eq(mb_delegate_check(ab, true, &carol, &via), MB_DELEGATE_GRANTED);
        ck_assert_ptr_eq(via, a);
        ck_assert_int_eq(mb_delegate_check(a, true, &carol, &via), MB_DELEGATE_DENIED_SELF);
        ck_assert_int_eq(mb_delegate_check(team, true, &carol, &via), MB_DELEGATE_DENIED);

        /* Creation: the deepest existing strict ancestor, searched from
         * itself. */
        ck_assert_ptr_eq(mb_delegate_anchor(tree, "team/x/y"), team);
        ck_assert_ptr_eq(mb_delegate_anchor(tree, "team/a/b/c"), ab);
        ck_assert_ptr_eq(mb_delegate_anchor(tree, "team/a"), team);
        ck_assert_ptr_eq(mb_delegate_anchor(tree, "team"), tree->root);
        ck_assert_ptr_eq(mb_delegate_anchor(tree, "x/y"), tree->root);
        ck_assert_int_eq(mb_delegate_check(mb_delegate_anchor(tree, "team/x/y"), false, &alice, &via),
                         MB_DELEGATE_GRANTED);
        ck_assert_int_eq(mb_delegate_check(mb_delegate_anchor(tree, "team/a/c"), false, &carol, &via),
                         MB_DELEGATE_GRANTED);
        ck_assert_int_eq(mb_delegate_check(mb_delegate_anchor(tree, "team/c"), false, &carol, &via),
                         MB_DELEGATE_DENIED);
        ck_assert_int_eq(mb_delegate_check(mb_delegate_anchor(tree, "other/x"), false, &alice, &via),
                         MB_DELEGATE_DENIED);
        ck_assert_int_eq(mb_delegate_check(mb_delegate_anchor(tree, "team"), false, &alice, &via),
                         MB_DELEGATE_DENIED);

        /* DelegateMaxDescendants= (default 1000), on every delegating
         * ancestor: team has 2 below it, team/a 1. */
        {
                const struct tenant *full = NULL;
                unsigned count = 0;

                ck_assert(mb_delegate_room(team, "team/x/y", &full, &count));
                team->delegate.max_descendants = 3;
                ck_assert(mb_delegate_room(team, "team/x", &full, &count));
                ck_assert(!mb_delegate_room(team, "team/x/y", &full, &count));
                ck_assert_ptr_eq(full, team);
                ck_assert_uint_eq(count, 2);
                /* Below team/a (room there), but team is full. */
                ck_assert(!mb_delegate_room(ab, "team/a/b/c/d", &full, &count));
                ck_assert_ptr_eq(full, team);
                a->delegate.max_descendants = 1;
                ck_assert(!mb_delegate_room(ab, "team/a/b/c", &full, &count));
                ck_assert_ptr_eq(full, a);
                ck_assert_uint_eq(count, 1);
                /* No Delegate= anywhere above: no bound. */
                ck_assert(mb_delegate_room(other, "other/x/y/z", &full, &count));
                ck_assert_uint_eq(mb_delegate_max_descendants(&other->delegate), MB_DELEGATE_DEFAULT_MAX_DESCENDANTS);
        }

        /* Emptied (a reload without Delegate=): the rights end. */
        ck_assert_int_eq(mb_delegate_set(team, &(struct mb_delegate) {}), 0);
        ck_assert_int_eq(mb_delegate_check(a, true, &alice, &via), MB_DELEGATE_DENIED);
        ck_assert_int_eq(mb_delegate_check(a, true, &member, &via), MB_DELEGATE_DENIED);
        tenant_tree_free(tree);
}
END_TEST

int main(void) {
        Suite *s = suite_create("delegate");
        TCase *tc = tcase_create("core");
        SRunner *sr;
        int failed;

        tcase_add_test(tc, test_parse);
        tcase_add_test(tc, test_config);
        tcase_add_test(tc, test_rule);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
