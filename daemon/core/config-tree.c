/* SPDX-License-Identifier: MIT */
/*
 * config-tree.c - a parsed configuration checked and indexed
 * (mb_config_finish(): duplicate paths, the path index), looked up, and
 * turned into the tenant tree (mb_config_build_tree(),
 * mb_config_apply_tenant()).  The parsing itself is config.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "delegate.h"
#include "mb_size.h"
#include "macros.h"

static int cmp_tenant_path(const void *a, const void *b) {
        const struct mb_tenant_config *x = *(const struct mb_tenant_config *const *) a,
                                      *y = *(const struct mb_tenant_config *const *) b;
        int c = strcmp(x->path, y->path);

        if (c != 0)
                return c;
        return x < y ? -1 : x > y; /* array order is file order */
}

/* Two [Tenant] sections with the same Path=: report the later one (in file
 * order) that comes first.  O(n log n) for configurations with many
 * tenants. */
static int check_duplicates(const struct mb_config *c, char **ret_error) {
        _cleanup_(freep) const struct mb_tenant_config **v = NULL;
        const struct mb_tenant_config *dup = NULL, *first = NULL;

        if (c->ntenants < 2)
                return 0;

        v = calloc(c->ntenants, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < c->ntenants; i++)
                v[i] = &c->tenants[i];
        qsort(v, c->ntenants, sizeof(*v), cmp_tenant_path);

        for (size_t i = 1; i < c->ntenants; i++)
                if (strcmp(v[i - 1]->path, v[i]->path) == 0 && (!dup || v[i] < dup)) {
                        size_t j = i - 1;

                        /* the first definition of this path */
                        while (j > 0 && strcmp(v[j - 1]->path, v[i]->path) == 0)
                                j--;
                        dup = v[i];
                        first = v[j];
                }

        if (!dup)
                return 0;
        if (asprintf(ret_error, "%s:%u: duplicate Path=%s, first defined at %s:%u", dup->file, dup->line,
                     dup->path, first->file, first->line) < 0) {
                *ret_error = NULL;
                return -ENOMEM;
        }
        return -EINVAL;
}

/* ---- the path index ------------------------------------------------------ */

/* FNV-1a; the index is built once per configuration, no seed needed: the
 * paths come from the administrator's files. */
static uint64_t path_hash(const char *s) {
        uint64_t h = 0xcbf29ce484222325ULL;

        for (; *s; s++) {
                h ^= (unsigned char) *s;
                h *= 0x100000001b3ULL;
        }
        return h ^ (h >> 29);
}

/* Open addressing over tenant indices + 1 (0 = empty), at most half full:
 * mb_config_find_tenant() in O(1) instead of a scan of every tenant. */
static int build_index(struct mb_config *c) {
        size_t size = 16;

        while (size < c->ntenants * 2)
                size *= 2;
        free(c->index);
        c->index = calloc(size, sizeof(*c->index));
        if (!c->index) {
                c->index_size = 0;
                return -ENOMEM;
        }
        c->index_size = size;
        for (size_t i = 0; i < c->ntenants; i++) {
                size_t j = path_hash(c->tenants[i].path) & (size - 1);

                while (c->index[j] != 0) {
                        if (strcmp(c->tenants[c->index[j] - 1].path, c->tenants[i].path) == 0)
                                break; /* a duplicate: the first one stays */
                        j = (j + 1) & (size - 1);
                }
                if (c->index[j] == 0)
                        c->index[j] = i + 1;
        }
        return 0;
}

int mb_config_finish(struct mb_config *c, char **ret_error) {
        int r;

        *ret_error = NULL;
        r = check_duplicates(c, ret_error);
        if (r >= 0)
                r = build_index(c);
        if (r < 0 && !*ret_error)
                *ret_error = strdup(r == -ENOMEM ? "out of memory" : strerror(-r));
        return r;
}

const struct mb_tenant_config *mb_config_find_tenant(const struct mb_config *c, const char *path) {
        _cleanup_(freep) char *p = NULL;

        if (!c->index || tenant_path_normalize(path, &p) < 0)
                return NULL;
        return mb_config_find_normalized(c, p);
}

const struct mb_tenant_config *mb_config_find_normalized(const struct mb_config *c, const char *path) {
        if (!c->index)
                return NULL;
        for (size_t j = path_hash(path) & (c->index_size - 1); c->index[j] != 0; j = (j + 1) & (c->index_size - 1))
                if (strcmp(c->tenants[c->index[j] - 1].path, path) == 0)
                        return &c->tenants[c->index[j] - 1];
        return NULL;
}

/* ---- building the tree -------------------------------------------------- */

int mb_config_apply_tenant(const struct mb_config *c, const struct mb_tenant_config *tc, struct tenant *t) {
        uint64_t page = c->broker.page_size;
        int r;

        /* memory_max_write(): the new max applies at once, even below the
         * current usage; reclaiming the excess is the caller's job. */
        r = page_counter_force_max(&t->memory, mb_bytes_to_pages(tc->max, page));
        if (r < 0)
                return r;
        r = page_counter_set_high(&t->memory, mb_bytes_to_pages(tc->high, page));
        if (r < 0)
                return r;
        r = page_counter_set_low(&t->memory, mb_bytes_to_pages(tc->low, page));
        if (r < 0)
                return r;
        r = page_counter_set_min(&t->memory, mb_bytes_to_pages(tc->min, page));
        if (r < 0)
                return r;

        r = tenant_set_allow(t, tc->allow_users, tc->n_allow_users, tc->allow_groups, tc->n_allow_groups,
                             tc->cgroup);
        if (r < 0)
                return r;
        r = mb_delegate_set(t, &tc->delegate);
        if (r < 0)
                return r;

        t->charge_batch = tc->charge_batch;
        t->oom_policy = tc->oom_policy;
        t->oom_group = tc->oom_group;
        t->overrun_policy = tc->overrun_policy;
        t->pressure_target = tc->pressure_target;
        t->pressure_target_gen++;
        t->from_config = true;
        return 0;
}

int mb_config_build_tree(const struct mb_config *c, unsigned ncpus, struct tenant_tree **ret,
                         char **ret_error) {
        struct tenant_tree *tree = NULL;
        int r;

        *ret_error = NULL;

        r = tenant_tree_new(mb_bytes_to_pages(c->broker.capacity_bytes, c->broker.page_size), ncpus, &tree);
        if (r < 0) {
                if (asprintf(ret_error, "cannot create the tenant tree (Capacity=%" PRIu64 " bytes): %s",
                             c->broker.capacity_bytes, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        tree->recursive_protection = c->broker.memory_recursiveprot;

        for (size_t i = 0; i < c->ntenants; i++) {
                const struct mb_tenant_config *tc = &c->tenants[i];
                struct tenant *t = tenant_lookup(tree, tc->path);

                /* An ancestor may have been created for a child defined
                 * earlier; then only its settings are applied. */
                if (!t)
                        r = tenant_create(tree, tc->path, &t);
                if (r >= 0)
                        r = mb_config_apply_tenant(c, tc, t);
                if (r < 0) {
                        if (asprintf(ret_error, "%s:%u: cannot create tenant %s: %s", tc->file, tc->line,
                                     tc->path, strerror(-r)) < 0)
                                *ret_error = NULL;
                        tenant_tree_free(tree);
                        return r;
                }
        }

        *ret = tree;
        return 0;
}
