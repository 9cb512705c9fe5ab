/* SPDX-License-Identifier: MIT */
/*
 * test-tenant.c - daemon/core/tenant.c: the tenant tree, path rules, the
 * leaf-only rule, memory.events counting, lookups among 10,000 tenants.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenant.h"

#define CAPACITY_PAGES 262144UL
#define NCPUS 2

static struct tenant_tree *new_tree(void) {
        struct tenant_tree *tree = NULL;

        ck_assert_int_eq(tenant_tree_new(CAPACITY_PAGES, NCPUS, &tree), 0);
        ck_assert_ptr_nonnull(tree);
        return tree;
}

static struct tenant *create(struct tenant_tree *tree, const char *path) {
        struct tenant *t = NULL;

        ck_assert_int_eq(tenant_create(tree, path, &t), 0);
        ck_assert_ptr_nonnull(t);
        return t;
}

START_TEST(test_tree_new_root) {
        struct tenant_tree *tree = new_tree();
        struct tenant *root = tree->root;

        ck_assert_str_eq(root->path, "/");
        ck_assert_uint_eq(root->depth, 0);
        ck_assert_ptr_null(root->parent);
        ck_assert_uint_eq(tree->ntenants, 1);
        ck_assert_uint_eq(page_counter_get_max(&root->memory), CAPACITY_PAGES);
        ck_assert_ptr_null(root->memory.parent);
        ck_assert_ptr_null(root->rstat.parent);
        ck_assert_ptr_eq(tenant_lookup(tree, "/"), root);
        ck_assert_uint_eq(tree->rstat.flush_threshold, RSTAT_UPDATES_PER_CPU * NCPUS);
        ck_assert_uint_eq((uintptr_t) root % 64, 0);
        tenant_tree_free(tree);

        ck_assert_int_eq(tenant_tree_new((unsigned long) PAGE_COUNTER_MAX + 1, NCPUS, &tree), -EINVAL);
}
END_TEST

START_TEST(test_create_with_missing_ancestors) {
        struct tenant_tree *tree = new_tree();
        struct tenant *c = create(tree, "a/b/c"), *a, *b;

        ck_assert_uint_eq(tree->ntenants, 4);
        a = tenant_lookup(tree, "a");
        b = tenant_lookup(tree, "a/b");
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_ptr_eq(tenant_lookup(tree, "a/b/c"), c);

        ck_assert_str_eq(c->path, "a/b/c");
        ck_assert_str_eq(c->name, "c");
        ck_assert_str_eq(b->name, "b");
        ck_assert_str_eq(a->name, "a");
        ck_assert_uint_eq(a->depth, 1);
        ck_assert_uint_eq(c->depth, 3);
        ck_assert_ptr_eq(c->parent, b);
        ck_assert_ptr_eq(b->parent, a);
        ck_assert_ptr_eq(a->parent, tree->root);
        ck_assert_ptr_eq(c->tree, tree);

        /* The page counters and rstat nodes form the same hierarchy. */
        ck_assert_ptr_eq(c->memory.parent, &b->memory);
        ck_assert_ptr_eq(a->memory.parent, &tree->root->memory);
        ck_assert_ptr_eq(c->rstat.parent, &b->rstat);
        ck_assert_ptr_eq(a->rstat.parent, &tree->root->rstat);
        ck_assert_uint_eq((uintptr_t) c % 64, 0);

        /* New tenants are unlimited and inherit the batch. */
        ck_assert_uint_eq(page_counter_get_max(&c->memory), (unsigned long) PAGE_COUNTER_MAX);
        ck_assert_uint_eq(c->charge_batch, 0);
        ck_assert_int_eq(c->oom_policy, MB_OOM_FAIL);
        ck_assert(!c->from_config);

        /* A charge in the leaf reaches the root. */
        {
                struct page_counter *fail = NULL;

                ck_assert(page_counter_try_charge(&c->memory, 10, &fail));
                ck_assert_uint_eq(page_counter_read(&tree->root->memory), 10);
                ck_assert_uint_eq(page_counter_read(&a->memory), 10);
                page_counter_uncharge(&c->memory, 10);
        }

        /* Siblings under an existing parent. */
        create(tree, "/a/b/d/");
        ck_assert_uint_eq(tree->ntenants, 5);
        ck_assert_uint_eq(b->nchildren, 2);
        ck_assert_str_eq(b->children->name, "c");
        ck_assert_str_eq(b->last_child->name, "d");

        ck_assert_int_eq(tenant_create(tree, "a/b", NULL), -EEXIST);
        ck_assert_int_eq(tenant_create(tree, "/a/b/c/", NULL), -EEXIST);
        ck_assert_int_eq(tenant_create(tree, "/", NULL), -EEXIST);
        ck_assert_int_eq(tenant_create(tree, "a//x", NULL), -EINVAL);
        ck_assert_uint_eq(tree->ntenants, 5);

        tenant_tree_free(tree);
}
END_TEST

START_TEST(test_lookup_spellings) {
        struct tenant_tree *tree = new_tree();
        struct tenant *t = create(tree, "db/cache");

        ck_assert_ptr_eq(tenant_lookup(tree, "db/cache"), t);
        ck_assert_ptr_eq(tenant_lookup(tree, "/db/cache"), t);
        ck_assert_ptr_eq(tenant_lookup(tree, "db/cache/"), t);
        ck_assert_ptr_eq(tenant_lookup(tree, "/db/cache/"), t);
        ck_assert_ptr_null(tenant_lookup(tree, "db//cache"));
        ck_assert_ptr_null(tenant_lookup(tree, "db/cach"));
        ck_assert_ptr_null(tenant_lookup(tree, "db/cache/x"));
        ck_assert_ptr_null(tenant_lookup(tree, "DB/cache"));
        ck_assert_ptr_null(tenant_lookup(tree, ""));
        ck_assert_ptr_null(tenant_lookup(tree, NULL));
        ck_assert_ptr_eq(tenant_lookup(tree, "db"), t->parent);
        tenant_tree_free(tree);
}
END_TEST

static const char *const good_paths[] = {
        "/", "a", "/a", "a/", "/a/", "a/b", "/a/b/", "A-z_0.9", "...", ".a", "a..b", "a.", "-", "_/-/.x",
};

static const char *const bad_paths[] = {
        "", "//", "///", "a//b", "//a", "a//", ".", "..", "/./", "a/./b", "a/../b", "a/..", "./a", "a b",
        "a/b c", "a\tb", "\xc3\xa4", "a*", "a:b", "a\\b", "a@b",
};

START_TEST(test_path_rules_good) {
        const char *p = good_paths[_i];

        ck_assert_msg(tenant_path_is_valid(p), "'%s' should be valid", p);
}
END_TEST

START_TEST(test_path_rules_bad) {
        const char *p = bad_paths[_i];
        char *n = NULL;

        ck_assert_msg(!tenant_path_is_valid(p), "'%s' should be invalid", p);
        ck_assert_int_eq(tenant_path_normalize(p, &n), -EINVAL);
        ck_assert_ptr_null(n);
}
END_TEST

START_TEST(test_path_normalize) {
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "/", "/" }, { "a", "a" }, { "/a", "a" }, { "a/", "a" }, { "/a/b/", "a/b" }, { "a/b", "a/b" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *n = NULL;

                ck_assert_int_eq(tenant_path_normalize(cases[i].in, &n), 0);
                ck_assert_str_eq(n, cases[i].out);
                free(n);
        }
}
END_TEST

START_TEST(test_path_component_length) {
        char name[TENANT_NAME_MAX + 2];

        memset(name, 'x', TENANT_NAME_MAX);
        name[TENANT_NAME_MAX] = '\0';
        ck_assert(tenant_path_is_valid(name));
        name[TENANT_NAME_MAX] = 'x';
        name[TENANT_NAME_MAX + 1] = '\0';
        ck_assert(!tenant_path_is_valid(name));
}
END_TEST

static void deep_path(char *buf, size_t size, unsigned depth) {
        buf[0] = '\0';
        for (unsigned i = 0; i < depth; i++) {
                size_t n = strlen(buf);

                snprintf(buf + n, size - n, "%sd%u", i ? "/" : "", i);
        }
}

START_TEST(test_depth_limit) {
        struct tenant_tree *tree = new_tree();
        char path[256];
        struct tenant *t;

        deep_path(path, sizeof(path), TENANT_MAX_DEPTH);
        ck_assert(tenant_path_is_valid(path));
        t = create(tree, path);
        ck_assert_uint_eq(t->depth, TENANT_MAX_DEPTH);
        ck_assert_uint_eq(tree->ntenants, TENANT_MAX_DEPTH + 1);

        deep_path(path, sizeof(path), TENANT_MAX_DEPTH + 1);
        ck_assert(!tenant_path_is_valid(path));
        ck_assert_int_eq(tenant_create(tree, path, NULL), -EINVAL);
        ck_assert_uint_eq(tree->ntenants, TENANT_MAX_DEPTH + 1);
        ck_assert_ptr_null(tenant_lookup(tree, path));

        /* "/a/.../p/" with 16 components and the slashes is still 16 deep. */
        {
                char slashed[300];

                deep_path(path, sizeof(path), TENANT_MAX_DEPTH);
                snprintf(slashed, sizeof(slashed), "/%s/", path);
                ck_assert(tenant_path_is_valid(slashed));
        }
        tenant_tree_free(tree);
}
END_TEST

START_TEST(test_leaf_only_rule) {
        struct tenant_tree *tree = new_tree();
        struct tenant *a = create(tree, "a"), *b;

        ck_assert_int_eq(tenant_attach_client(a), 0);
        ck_assert_uint_eq(a->nclients, 1);

        /* No children under a tenant with clients, and no partial
         * creation of the missing levels. */
        ck_assert_int_eq(tenant_create(tree, "a/b", NULL), -EBUSY);
        ck_assert_int_eq(tenant_create(tree, "a/b/c", NULL), -EBUSY);
        ck_assert_uint_eq(tree->ntenants, 2);
        ck_assert_ptr_null(tenant_lookup(tree, "a/b"));
        ck_assert_uint_eq(a->nchildren, 0);

        /* ... and a tenant with clients is not removed. */
        ck_assert_int_eq(tenant_remove(tree, a), -EBUSY);

        tenant_detach_client(a);
        b = create(tree, "a/b");

        /* No clients on a tenant with children. */
        ck_assert_int_eq(tenant_attach_client(a), -EBUSY);
        ck_assert_uint_eq(a->nclients, 0);
        ck_assert_int_eq(tenant_attach_client(b), 0);
        tenant_detach_client(b);
        tenant_tree_free(tree);
}
END_TEST

START_TEST(test_remove) {
        struct tenant_tree *tree = new_tree();
        struct tenant *c = create(tree, "a/b/c"), *b = c->parent, *a = b->parent;
        struct tenant *x = create(tree, "a/x"), *y = create(tree, "a/y");

        ck_assert_int_eq(tenant_remove(tree, tree->root), -EPERM);
        ck_assert_int_eq(tenant_remove(tree, a), -EBUSY);
        ck_assert_int_eq(tenant_remove(tree, b), -EBUSY);

        /* Charged pages keep a tenant. */
        page_counter_charge(&c->memory, 3);
        ck_assert_int_eq(tenant_remove(tree, c), -EBUSY);
        page_counter_uncharge(&c->memory, 3);

        /* The middle child of three: siblings stay linked in order. */
        ck_assert_int_eq(tenant_remove(tree, x), 0);
        ck_assert_ptr_null(tenant_lookup(tree, "a/x"));
        ck_assert_uint_eq(a->nchildren, 2);
        ck_assert_ptr_eq(a->children, b);
        ck_assert_ptr_eq(b->next_sibling, y);
        ck_assert_ptr_eq(y->prev_sibling, b);
        ck_assert_ptr_eq(a->last_child, y);

        ck_assert_int_eq(tenant_remove(tree, c), 0);
        ck_assert_int_eq(tenant_remove(tree, b), 0);
        ck_assert_int_eq(tenant_remove(tree, y), 0);
        ck_assert_ptr_null(a->children);
        ck_assert_ptr_null(a->last_child);
        ck_assert_int_eq(tenant_remove(tree, a), 0);
        ck_assert_uint_eq(tree->ntenants, 1);
        ck_assert_ptr_null(tenant_lookup(tree, "a"));

        /* The path can be used again. */
        create(tree, "a/b/c");
        ck_assert_uint_eq(tree->ntenants, 4);
        tenant_tree_free(tree);
}
END_TEST

START_TEST(test_remove_keeps_stats_in_ancestors) {
        struct tenant_tree *tree = new_tree();
        struct tenant *c = create(tree, "a/c"), *a = c->parent;
        struct mb_stat_slot slots[NCPUS] = {};
        struct rstat_source *src;

        ck_assert_int_eq(rstat_source_attach(&c->rstat, slots, NCPUS, &src), 0);
        mb_stat_slot_add(&slots[0], MB_STAT_PGALLOC, 5);
        mb_stat_slot_add(&slots[0], MB_STAT_PAGES, 5);
        rstat_poll_source(&tree->rstat, &c->rstat, src);
        rstat_source_detach(&tree->rstat, &c->rstat, src, true);

        ck_assert_int_eq(tenant_remove(tree, c), 0);
        rstat_flush(&tree->rstat, &tree->root->rstat);
        ck_assert_int_eq(a->rstat.value[MB_STAT_PGALLOC], 5);
        ck_assert_int_eq(a->rstat.value[MB_STAT_PAGES], 0);
        ck_assert_int_eq(tree->root->rstat.value[MB_STAT_PGALLOC], 5);
        tenant_tree_free(tree);
}
END_TEST

START_TEST(test_events_local_and_hierarchical) {
        struct tenant_tree *tree = new_tree();
        struct tenant *c = create(tree, "a/b/c"), *b = c->parent, *a = b->parent, *root = tree->root;

        tenant_memory_event(c, MB_EVENT_MAX);
        tenant_memory_event(c, MB_EVENT_MAX);
        tenant_memory_event(b, MB_EVENT_HIGH);
        tenant_memory_event(c, MB_EVENT_OOM);
        tenant_memory_event(c, MB_EVENT_OOM_KILL);

        ck_assert_uint_eq(tenant_event_count(c, MB_EVENT_MAX, true), 2);
        ck_assert_uint_eq(tenant_event_count(c, MB_EVENT_MAX, false), 2);
        ck_assert_uint_eq(tenant_event_count(b, MB_EVENT_MAX, true), 0);
        ck_assert_uint_eq(tenant_event_count(b, MB_EVENT_MAX, false), 2);
        ck_assert_uint_eq(tenant_event_count(a, MB_EVENT_MAX, true), 0);
        ck_assert_uint_eq(tenant_event_count(a, MB_EVENT_MAX, false), 2);

        ck_assert_uint_eq(tenant_event_count(b, MB_EVENT_HIGH, true), 1);
        ck_assert_uint_eq(tenant_event_count(b, MB_EVENT_HIGH, false), 1);
        ck_assert_uint_eq(tenant_event_count(a, MB_EVENT_HIGH, false), 1);
        ck_assert_uint_eq(tenant_event_count(c, MB_EVENT_HIGH, false), 0);

        ck_assert_uint_eq(tenant_event_count(a, MB_EVENT_OOM, false), 1);
        ck_assert_uint_eq(tenant_event_count(a, MB_EVENT_OOM_KILL, false), 1);
        ck_assert_uint_eq(tenant_event_count(a, MB_EVENT_LOW, false), 0);

        /* memcg_memory_event() stops below the root. */
        ck_assert_uint_eq(tenant_event_count(root, MB_EVENT_MAX, false), 0);
        ck_assert_uint_eq(tenant_event_count(root, MB_EVENT_HIGH, false), 0);
        ck_assert_uint_eq(tenant_event_count(root, MB_EVENT_MAX, true), 0);

        /* An event of the root itself counts there. */
        tenant_memory_event(root, MB_EVENT_OOM);
        ck_assert_uint_eq(tenant_event_count(root, MB_EVENT_OOM, true), 1);
        ck_assert_uint_eq(tenant_event_count(root, MB_EVENT_OOM, false), 1);
        ck_assert_uint_eq(tenant_event_count(a, MB_EVENT_OOM, false), 1);

        /* Out of range: ignored. */
        tenant_memory_event(c, _MB_EVENT_NR);
        ck_assert_uint_eq(tenant_event_count(c, _MB_EVENT_NR, false), 0);
        tenant_tree_free(tree);
}
END_TEST

static int collect(struct tenant *t, void *userdata) {
        char *buf = userdata;

        strcat(buf, t->path);
        strcat(buf, " ");
        return strcmp(t->path, "b/x") == 0 ? 7 : 0;
}

START_TEST(test_walk_preorder) {
        struct tenant_tree *tree = new_tree();
        char buf[256] = "";

        create(tree, "a/a1");
        create(tree, "a/a2/z");
        create(tree, "b/x");
        create(tree, "b/y");

        ck_assert_int_eq(tenant_walk(tree->root, collect, buf), 7);
        ck_assert_str_eq(buf, "/ a a/a1 a/a2 a/a2/z b b/x ");

        buf[0] = '\0';
        ck_assert_int_eq(tenant_walk(tenant_lookup(tree, "a"), collect, buf), 0);
        ck_assert_str_eq(buf, "a a/a1 a/a2 a/a2/z ");

        buf[0] = '\0';
        ck_assert_int_eq(tenant_walk(tenant_lookup(tree, "a/a1"), collect, buf), 0);
        ck_assert_str_eq(buf, "a/a1 ");
        tenant_tree_free(tree);
}
END_TEST

START_TEST(test_charge_batch_inheritance) {
        struct tenant_tree *tree = new_tree();
        struct tenant *c = create(tree, "a/b/c"), *b = c->parent, *a = b->parent;
        struct tenant *d = create(tree, "a/b/d");

        ck_assert_uint_eq(tenant_charge_batch(c, 64), 64);
        a->charge_batch = 32;
        ck_assert_uint_eq(tenant_charge_batch(c, 64), 32);
        ck_assert_uint_eq(tenant_charge_batch(b, 64), 32);
        c->charge_batch = 8;
        ck_assert_uint_eq(tenant_charge_batch(c, 64), 8);
        ck_assert_uint_eq(tenant_charge_batch(d, 64), 32);
        ck_assert_uint_eq(tenant_charge_batch(tree->root, 64), 64);
        tenant_tree_free(tree);
}
END_TEST

START_TEST(test_is_unlimited) {
        struct tenant_tree *tree = new_tree();
        struct tenant *c = create(tree, "a/b/c"), *b = c->parent, *a = b->parent;
        struct tenant *x = create(tree, "x");

        /* The root's max is the capacity and does not count. */
        ck_assert(tenant_is_unlimited(tree->root));
        ck_assert(tenant_is_unlimited(c));

        ck_assert_int_eq(page_counter_set_high(&a->memory, 1000), 0);
        ck_assert(!tenant_is_unlimited(c));
        ck_assert(!tenant_is_unlimited(a));
        ck_assert(tenant_is_unlimited(x));
        ck_assert_int_eq(page_counter_set_high(&a->memory, (unsigned long) PAGE_COUNTER_MAX), 0);
        ck_assert(tenant_is_unlimited(c));

        ck_assert_int_eq(page_counter_set_max(&c->memory, 1000), 0);
        ck_assert(!tenant_is_unlimited(c));
        ck_assert(tenant_is_unlimited(b));
        ck_assert_int_eq(page_counter_set_max(&c->memory, (unsigned long) PAGE_COUNTER_MAX), 0);

        ck_assert_int_eq(page_counter_set_min(&b->memory, 1), 0);
        ck_assert(!tenant_is_unlimited(c));
        ck_assert_int_eq(page_counter_set_min(&b->memory, 0), 0);

        ck_assert_int_eq(page_counter_set_low(&x->memory, 1), 0);
        ck_assert(!tenant_is_unlimited(x));
        ck_assert(tenant_is_unlimited(c));
        tenant_tree_free(tree);
}
END_TEST

START_TEST(test_set_allow) {
        struct tenant_tree *tree = new_tree();
        struct tenant *t = create(tree, "a");
        uid_t uids[] = { 0, 1000 };
        gid_t gids[] = { 100 };

        ck_assert_int_eq(tenant_set_allow(t, uids, 2, gids, 1, "/system.slice/x.service"), 0);
        uids[1] = 5; /* copied, not referenced */
        ck_assert_uint_eq(t->n_allow_users, 2);
        ck_assert_uint_eq(t->allow_users[1], 1000);
        ck_assert_uint_eq(t->n_allow_groups, 1);
        ck_assert_uint_eq(t->allow_groups[0], 100);
        ck_assert_str_eq(t->cgroup, "/system.slice/x.service");

        ck_assert_int_eq(tenant_set_allow(t, NULL, 0, NULL, 0, NULL), 0);
        ck_assert_uint_eq(t->n_allow_users, 0);
        ck_assert_ptr_null(t->allow_users);
        ck_assert_ptr_null(t->cgroup);
        tenant_tree_free(tree);
}
END_TEST

START_TEST(test_names) {
        static const char *const events[] = { "low", "high", "max", "oom", "oom_kill", "overrun", "oom_group_kill" };
        static const char *const items[] = {
                "pages", "stock", "slab_reclaimable", "slab_unreclaimable", "pgalloc", "pgfree",
                "charge_requests", "uncharge_requests", "pgscan", "pgsteal", "throttle_usec", "anon_mmap",
        };

        ck_assert_uint_eq(sizeof(events) / sizeof(events[0]), _MB_EVENT_NR);
        ck_assert_uint_eq(sizeof(items) / sizeof(items[0]), _MB_STAT_NR);
        for (unsigned i = 0; i < _MB_EVENT_NR; i++)
                ck_assert_str_eq(mb_event_to_string(i), events[i]);
        for (unsigned i = 0; i < _MB_STAT_NR; i++)
                ck_assert_str_eq(mb_stat_item_to_string(i), items[i]);
        ck_assert_ptr_null(mb_event_to_string(_MB_EVENT_NR));
        ck_assert_ptr_null(mb_stat_item_to_string(_MB_STAT_NR));
}
END_TEST

START_TEST(test_tree_free_with_sources_attached) {
        /* Tearing down a tree whose clients' regions are already unmapped
         * must not read them (ASan checks) and must not leak sources. */
        struct tenant_tree *tree = new_tree();
        struct tenant *t = create(tree, "a/b");
        struct mb_stat_slot *slots = calloc(NCPUS, sizeof(*slots));

        ck_assert_ptr_nonnull(slots);
        ck_assert_int_eq(rstat_source_attach(&t->rstat, slots, NCPUS, NULL), 0);
        ck_assert_int_eq(rstat_source_attach(&t->parent->rstat, slots, NCPUS, NULL), 0);
        mb_stat_slot_add(&slots[0], MB_STAT_PAGES, 1);
        free(slots);
        tenant_tree_free(tree);
}
END_TEST

#define EVENT_THREADS 2
#define EVENTS_PER_THREAD 100000

static void *event_thread(void *arg) {
        for (int i = 0; i < EVENTS_PER_THREAD; i++)
                tenant_memory_event(arg, MB_EVENT_HIGH);
        return NULL;
}

START_TEST(test_events_from_threads) {
        struct tenant_tree *tree = new_tree();
        struct tenant *c = create(tree, "a/c");
        pthread_t th[EVENT_THREADS];

        for (int i = 0; i < EVENT_THREADS; i++)
                ck_assert_int_eq(pthread_create(&th[i], NULL, event_thread, c), 0);
        for (int i = 0; i < EVENT_THREADS; i++)
                pthread_join(th[i], NULL);
        ck_assert_uint_eq(tenant_event_count(c, MB_EVENT_HIGH, true), EVENT_THREADS * EVENTS_PER_THREAD);
        ck_assert_uint_eq(tenant_event_count(c->parent, MB_EVENT_HIGH, false), EVENT_THREADS * EVENTS_PER_THREAD);
        tenant_tree_free(tree);
}
END_TEST

#define MANY_GROUPS 100
#define MANY_PER_GROUP 100

START_TEST(test_ten_thousand_tenants) {
        struct tenant_tree *tree = new_tree();
        char path[64];

        for (int g = 0; g < MANY_GROUPS; g++)
                for (int i = 0; i < MANY_PER_GROUP; i++) {
                        snprintf(path, sizeof(path), "g%d/t%d", g, i);
                        ck_assert_int_eq(tenant_create(tree, path, NULL), 0);
                }
        ck_assert_uint_eq(tree->ntenants, 1 + MANY_GROUPS + MANY_GROUPS * MANY_PER_GROUP);

        for (int g = 0; g < MANY_GROUPS; g++)
                for (int i = 0; i < MANY_PER_GROUP; i++) {
                        struct tenant *t;

                        snprintf(path, sizeof(path), "/g%d/t%d", g, i);
                        t = tenant_lookup(tree, path);
                        ck_assert_ptr_nonnull(t);
                        ck_assert_str_eq(t->path, path + 1);
                }
        ck_assert_ptr_null(tenant_lookup(tree, "g100/t0"));
        ck_assert_ptr_null(tenant_lookup(tree, "g0/t100"));

        /* Remove every other tenant, then check the map still finds the
         * rest and forgets the removed ones. */
        for (int g = 0; g < MANY_GROUPS; g++)
                for (int i = 0; i < MANY_PER_GROUP; i += 2) {
                        snprintf(path, sizeof(path), "g%d/t%d", g, i);
                        ck_assert_int_eq(tenant_remove(tree, tenant_lookup(tree, path)), 0);
                }
        for (int g = 0; g < MANY_GROUPS; g++)
                for (int i = 0; i < MANY_PER_GROUP; i++) {
                        snprintf(path, sizeof(path), "g%d/t%d", g, i);
                        if (i % 2)
                                ck_assert_ptr_nonnull(tenant_lookup(tree, path));
                        else
                                ck_assert_ptr_null(tenant_lookup(tree, path));
                }
        ck_assert_uint_eq(tree->ntenants, 1 + MANY_GROUPS + MANY_GROUPS * MANY_PER_GROUP / 2);
        tenant_tree_free(tree);
}
END_TEST

static Suite *tenant_suite(void) {
        Suite *s = suite_create("tenant");
        TCase *tc = tcase_create("core");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_tree_new_root);
        tcase_add_test(tc, test_create_with_missing_ancestors);
        tcase_add_test(tc, test_lookup_spellings);
        tcase_add_loop_test(tc, test_path_rules_good, 0, sizeof(good_paths) / sizeof(good_paths[0]));
        tcase_add_loop_test(tc, test_path_rules_bad, 0, sizeof(bad_paths) / sizeof(bad_paths[0]));
        tcase_add_test(tc, test_path_normalize);
        tcase_add_test(tc, test_path_component_length);
        tcase_add_test(tc, test_depth_limit);
        tcase_add_test(tc, test_leaf_only_rule);
        tcase_add_test(tc, test_remove);
        tcase_add_test(tc, test_remove_keeps_stats_in_ancestors);
        tcase_add_test(tc, test_events_local_and_hierarchical);
        tcase_add_test(tc, test_walk_preorder);
        tcase_add_test(tc, test_charge_batch_inheritance);
        tcase_add_test(tc, test_is_unlimited);
        tcase_add_test(tc, test_set_allow);
        tcase_add_test(tc, test_names);
        tcase_add_test(tc, test_ten_thousand_tenants);
        tcase_add_test(tc, test_tree_free_with_sources_attached);
        tcase_add_test(tc, test_events_from_threads);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(tenant_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
