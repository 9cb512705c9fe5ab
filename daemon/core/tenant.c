/* SPDX-License-Identifier: MIT */
/*
 * tenant.c - the tenant tree: creation with missing ancestors, removal of
 * leaves, lookup through a hash map, memory.events counting.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "protection.h"
#include "mb_stat_keys.h"
#include "tenant.h"
#include "tenant_map.h"

/* The names are the one stat key table's (common/mb_stat_keys.h), whose
 * event keys have enum mb_event's values. */
_Static_assert((int) MB_EVENT_KEY_NR == (int) _MB_EVENT_NR && (int) MB_EVENT_KEY_LOW == (int) MB_EVENT_LOW &&
                       (int) MB_EVENT_KEY_HIGH == (int) MB_EVENT_HIGH && (int) MB_EVENT_KEY_MAX == (int) MB_EVENT_MAX &&
                       (int) MB_EVENT_KEY_OOM == (int) MB_EVENT_OOM &&
                       (int) MB_EVENT_KEY_OOM_KILL == (int) MB_EVENT_OOM_KILL &&
                       (int) MB_EVENT_KEY_OVERRUN == (int) MB_EVENT_OVERRUN &&
                       (int) MB_EVENT_KEY_OOM_GROUP_KILL == (int) MB_EVENT_OOM_GROUP_KILL,
               "mb_event_keys[] follows enum mb_event");

const char *mb_event_to_string(enum mb_event e) {
        if ((unsigned) e >= _MB_EVENT_NR)
                return NULL;
        return mb_event_keys[e].name;
}

const char *mb_stat_item_to_string(enum mb_stat_item i) {
        const struct mb_stat_key_info *k = mb_stat_key_of_item(i);

        return k ? k->name : NULL;
}

/* ---- paths ------------------------------------------------------------ */

static bool path_char_ok(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
}

/*
 * Validate @path and find its normalised form as a slice of @path: the root
 * is "/", anything else loses one leading and one trailing '/'.  Returns the
 * depth (0 for the root) or -EINVAL.
 */
static int path_slice(const char *path, const char **ret_start, size_t *ret_len) {
        const char *s, *e;
        size_t len, comp = 0;
        int depth = 1;

        if (!path || path[0] == '\0')
                return -EINVAL;

        len = strlen(path);
        if (len >= TENANT_PATH_MAX)
                return -EINVAL;

        if (strcmp(path, "/") == 0) {
                *ret_start = path;
                *ret_len = 1;
                return 0;
        }

        s = path;
        e = path + len;
        if (*s == '/')
                s++;
        if (e > s && e[-1] == '/')
                e--;
        if (s >= e)
                return -EINVAL;

        for (const char *p = s, *c = s;; p++) {
                if (p == e || *p == '/') {
                        comp = (size_t) (p - c);
                        if (comp == 0 || comp > TENANT_NAME_MAX)
                                return -EINVAL;
                        if ((comp == 1 && c[0] == '.') || (comp == 2 && c[0] == '.' && c[1] == '.'))
                                return -EINVAL;
                        if (p == e)
                                break;
                        if (++depth > TENANT_MAX_DEPTH)
                                return -EINVAL;
                        c = p + 1;
                } else if (!path_char_ok(*p))
                        return -EINVAL;
        }

        *ret_start = s;
        *ret_len = (size_t) (e - s);
        return depth;
}

bool tenant_path_is_valid(const char *path) {
        const char *s;
        size_t n;

        return path_slice(path, &s, &n) >= 0;
}

int tenant_path_normalize(const char *path, char **ret) {
        const char *s;
        size_t n;
        char *p;
        int r;

        r = path_slice(path, &s, &n);
        if (r < 0)
                return r;

        p = strndup(s, n);
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

/* The tenant of the map's entry for the first @len bytes of @path, or NULL. */
static struct tenant *map_get(const struct tenant_tree *tree, const char *path, size_t len) {
        struct tenant_map_node *n = tenant_map_get(tree->map, path, len);

        return n ? (struct tenant *) ((char *) n - offsetof(struct tenant, map_node)) : NULL;
}

struct tenant *tenant_lookup(struct tenant_tree *tree, const char *path) {
        const char *s;
        size_t n;

        if (path_slice(path, &s, &n) < 0)
                return NULL;
        return map_get(tree, s, n);
}

/* ---- tree ------------------------------------------------------------- */

static void tenant_free(struct tenant *t) {
        if (!t)
                return;
        rstat_node_forget(&t->rstat);
        psi_group_destroy(&t->psi);
        free(t->path);
        free(t->allow_users);
        free(t->allow_groups);
        free(t->cgroup);
        free(t->delegate.users);
        free(t->delegate.groups);
        free(t);
}

/*
 * Allocate a tenant for the normalised @path under @parent (NULL: the root).
 * struct tenant is cache-line aligned because its page_counter is; calloc()
 * does not promise that, so use posix_memalign().
 */
static int tenant_alloc(struct tenant_tree *tree, struct tenant *parent, const char *path, size_t len,
                        struct tenant **ret) {
        struct tenant *t;
        void *mem;
        char *slash;

        if (posix_memalign(&mem, _Alignof(struct tenant), sizeof(struct tenant)) != 0)
                return -ENOMEM;
        t = memset(mem, 0, sizeof(struct tenant));

        t->path = strndup(path, len);
        if (!t->path) {
                free(t);
                return -ENOMEM;
        }
        if (psi_group_init(&t->psi, psi_now_usec()) < 0) {
                free(t->path);
                free(t);
                return -ENOMEM;
        }
        slash = parent ? strrchr(t->path, '/') : NULL;
        t->name = slash ? slash + 1 : t->path;
        t->depth = parent ? parent->depth + 1 : 0;
        t->tree = tree;
        t->parent = parent;
        t->oom_policy = MB_OOM_FAIL;
        t->overrun_policy = MB_OVERRUN_PUNCH;

        page_counter_init(&t->memory, parent ? &parent->memory : NULL, true);
        rstat_node_init(&t->rstat, parent ? &parent->rstat : NULL);

        for (unsigned i = 0; i < _MB_EVENT_NR; i++) {
                atomic_init(&t->events[i], 0);
                atomic_init(&t->events_local[i], 0);
        }
        atomic_init(&t->nclients, 0);

        *ret = t;
        return 0;
}

/* Link @t (allocated under t->parent) into the tree and the map. */
static int tenant_link(struct tenant_tree *tree, struct tenant *t) {
        struct tenant *parent = t->parent;
        int r;

        r = tenant_map_put(tree->map, &t->map_node, t->path);
        if (r < 0)
                return r;

        if (parent) {
                t->prev_sibling = parent->last_child;
                if (parent->last_child)
                        parent->last_child->next_sibling = t;
                else
                        parent->children = t;
                parent->last_child = t;
                parent->nchildren++;
        }
        tree->ntenants++;
        return 0;
}

static void tenant_unlink(struct tenant_tree *tree, struct tenant *t) {
        struct tenant *parent = t->parent;

        tenant_map_remove(tree->map, &t->map_node);

        if (t->prev_sibling)
                t->prev_sibling->next_sibling = t->next_sibling;
        else
                parent->children = t->next_sibling;
        if (t->next_sibling)
                t->next_sibling->prev_sibling = t->prev_sibling;
        else
                parent->last_child = t->prev_sibling;
        parent->nchildren--;
        tree->ntenants--;
}

int tenant_tree_new(unsigned long capacity_pages, unsigned ncpus, struct tenant_tree **ret) {
        struct tenant_tree *tree;
        struct tenant *root;
        int r;

        if (capacity_pages > (unsigned long) PAGE_COUNTER_MAX)
                return -EINVAL;

        tree = calloc(1, sizeof(*tree));
        if (!tree)
                return -ENOMEM;
        rstat_tree_init(&tree->rstat, ncpus);

        r = tenant_map_new(&tree->map);
        if (r < 0)
                goto fail;

        r = tenant_alloc(tree, NULL, "/", 1, &root);
        if (r < 0)
                goto fail;

        r = page_counter_set_max(&root->memory, capacity_pages);
        if (r >= 0)
                r = tenant_link(tree, root);
        if (r < 0) {
                tenant_free(root);
                goto fail;
        }
        tree->root = root;

        *ret = tree;
        return 0;

fail:
        tenant_map_free(tree->map);
        free(tree);
        return r;
}

void tenant_tree_free(struct tenant_tree *tree) {
        struct tenant *t;

        if (!tree)
                return;

        /* Post-order without recursion: descend to a leaf, free it, go on
         * with its next sibling or its parent. */
        t = tree->root;
        while (t) {
                struct tenant *next;

                if (t->children) {
                        t = t->children;
                        continue;
                }
                next = t->parent;
                if (next) {
                        next->children = t->next_sibling;
                        if (t->next_sibling)
                                next = t->next_sibling;
                }
                tenant_free(t);
                t = next;
        }

        tenant_map_free(tree->map);
        free(tree);
}

int tenant_create(struct tenant_tree *tree, const char *path, struct tenant **ret) {
        struct tenant *parent = NULL, *t = NULL, *first_new = NULL;
        const char *s;
        size_t len, end;
        int depth, r;

        depth = path_slice(path, &s, &len);
        if (depth < 0)
                return depth;
        if (depth == 0 || map_get(tree, s, len))
                return -EEXIST;

        /* The deepest existing ancestor: try the prefixes from the longest
         * one down; the root when none exists. */
        end = len;
        for (;;) {
                while (end > 0 && s[end - 1] != '/')
                        end--;
                if (end == 0) {
                        parent = tree->root;
                        break;
                }
                end--; /* drop the '/' */
                parent = map_get(tree, s, end);
                if (parent)
                        break;
        }

        /* The cgroup v2 no-internal-process rule: a tenant with clients
         * gets no children. */
        if (atomic_load(&parent->nclients) > 0)
                return -EBUSY;

        /* Create the missing levels top-down: each next component starts
         * after the parent's path. */
        for (size_t pos = end;;) {
                size_t next = pos == 0 ? 0 : pos + 1;

                while (next < len && s[next] != '/')
                        next++;

                r = tenant_alloc(tree, parent, s, next, &t);
                if (r >= 0) {
                        r = tenant_link(tree, t);
                        if (r < 0)
                                tenant_free(t);
                }
                if (r < 0)
                        goto undo;
                if (!first_new)
                        first_new = t;

                if (next == len)
                        break;
                parent = t;
                pos = next;
        }

        if (ret)
                *ret = t;
        return 0;

undo:
        /* Remove what this call created, deepest first (all are leaves
         * without clients or charges); the deepest one is @parent. */
        for (struct tenant *p = first_new ? parent : NULL; p;) {
                struct tenant *up = p->parent;
                bool was_first = p == first_new;

                tenant_unlink(tree, p);
                tenant_free(p);
                p = was_first ? NULL : up;
        }
        return r;
}

int tenant_remove(struct tenant_tree *tree, struct tenant *t) {
        if (!t->parent)
                return -EPERM;
        if (t->children || atomic_load(&t->nclients) > 0 || page_counter_read(&t->memory) > 0)
                return -EBUSY;

        /* cgroup_rstat_exit(): what it counted stays in the ancestors. */
        rstat_node_destroy(&tree->rstat, &t->rstat);

        tenant_unlink(tree, t);
        tenant_free(t);
        return 0;
}

int tenant_set_allow(struct tenant *t, const uid_t *uids, size_t nu, const gid_t *gids, size_t ng,
                     const char *cgroup) {
        _cleanup_(freep) uid_t *u = NULL;
        _cleanup_(freep) gid_t *g = NULL;
        _cleanup_(freep) char *c = NULL;

        if (nu > 0) {
                u = malloc(nu * sizeof(*u));
                if (!u)
                        return -ENOMEM;
                memcpy(u, uids, nu * sizeof(*u));
        }
        if (ng > 0) {
                g = malloc(ng * sizeof(*g));
                if (!g)
                        return -ENOMEM;
                memcpy(g, gids, ng * sizeof(*g));
        }
        if (cgroup) {
                c = strdup(cgroup);
                if (!c)
                        return -ENOMEM;
        }

        free(t->allow_users);
        t->allow_users = TAKE_PTR(u);
        t->n_allow_users = nu;
        free(t->allow_groups);
        t->allow_groups = TAKE_PTR(g);
        t->n_allow_groups = ng;
        free(t->cgroup);
        t->cgroup = TAKE_PTR(c);
        return 0;
}

int tenant_attach_client(struct tenant *t) {
        if (t->children)
                return -EBUSY;
        atomic_fetch_add(&t->nclients, 1);
        return 0;
}

void tenant_detach_client(struct tenant *t) {
        atomic_fetch_sub(&t->nclients, 1);
}

void tenant_memory_event(struct tenant *t, enum mb_event event) {
        if ((unsigned) event >= _MB_EVENT_NR)
                return;

        /* memcg_memory_event() (cgroup v2 without memory_localevents): the
         * local count of the tenant itself, then the hierarchical count of
         * the tenant and of each ancestor up to, but excluding, the root. */
        atomic_fetch_add_explicit(&t->events_local[event], 1, memory_order_relaxed);
        do
                atomic_fetch_add_explicit(&t->events[event], 1, memory_order_relaxed);
        while ((t = t->parent) && t->parent);
}

uint64_t tenant_event_count(const struct tenant *t, enum mb_event event, bool local) {
        struct tenant *w = (struct tenant *) t;

        if ((unsigned) event >= _MB_EVENT_NR)
                return 0;
        return atomic_load_explicit(local ? &w->events_local[event] : &w->events[event],
                                    memory_order_relaxed);
}

int tenant_walk(struct tenant *t, int (*cb)(struct tenant *t, void *userdata), void *userdata) {
        struct tenant *n = t;

        while (n) {
                int r = cb(n, userdata);
                if (r != 0)
                        return r;

                if (n->children) {
                        n = n->children;
                        continue;
                }
                while (n != t && !n->next_sibling)
                        n = n->parent;
                if (n == t)
                        break;
                n = n->next_sibling;
        }
        return 0;
}

unsigned tenant_charge_batch(const struct tenant *t, unsigned broker_default) {
        /* Atomic: the workers read it on the Grant path without the tree
         * lock while SetTenantLimits may change it. */
        for (; t; t = t->parent) {
                unsigned b = __atomic_load_n(&t->charge_batch, __ATOMIC_RELAXED);

                if (b > 0)
                        return b;
        }
        return broker_default;
}

bool tenant_is_unlimited(const struct tenant *t) {
        /* The unlimited fast path: only the levels below the root matter; the root's max is
         * the capacity and is always set. */
        for (; t && t->parent; t = t->parent)
                if (page_counter_get_max(&t->memory) != (unsigned long) PAGE_COUNTER_MAX ||
                    page_counter_get_high(&t->memory) != (unsigned long) PAGE_COUNTER_MAX ||
                    page_counter_get_min(&t->memory) != 0 || page_counter_get_low(&t->memory) != 0)
                        return false;
        return true;
}

void tenant_effective_protection(struct tenant *t, bool recursive, unsigned long *ret_emin, unsigned long *ret_elow) {
        struct tenant *path[TENANT_MAX_DEPTH + 1];
        unsigned long emin = 0, elow = 0;
        size_t n = 0;

        for (struct tenant *p = t; p && p->parent && n < ELEMENTSOF(path); p = p->parent)
                path[n++] = p;

        while (n > 0) {
                struct tenant *c = path[--n];
                struct page_counter *pc = &c->memory, *parent = &c->parent->memory;
                unsigned long usage = page_counter_read(pc), parent_usage;

                if (usage == 0) {
                        emin = elow = 0;
                        break;
                }
                if (!c->parent->parent) {
                        emin = page_counter_get_min(pc);
                        elow = page_counter_get_low(pc);
                        continue;
                }
                parent_usage = page_counter_read(parent);
                emin = effective_protection(usage, parent_usage, page_counter_get_min(pc), emin,
                                            (unsigned long) atomic_load(&parent->children_min_usage), recursive);
                elow = effective_protection(usage, parent_usage, page_counter_get_low(pc), elow,
                                            (unsigned long) atomic_load(&parent->children_low_usage), recursive);
        }
        *ret_emin = emin;
        *ret_elow = elow;
}

/* ---- pressure (memory.pressure) ---- */

void tenant_pressure_change_at(struct tenant *t, int d_members, int d_stalled, uint64_t now_usec) {
        /* A task's psi state counts in its cgroup and every ancestor
         * (psi_task_change() walks psi_group_iter()). */
        for (; t; t = t->parent)
                psi_group_change(&t->psi, d_members, d_stalled, now_usec);
}

void tenant_pressure_change(struct tenant *t, int d_members, int d_stalled) {
        tenant_pressure_change_at(t, d_members, d_stalled, psi_now_usec());
}

void tenant_pressure_read_at(struct tenant *t, enum psi_kind kind, uint64_t now_usec, struct psi_reading *ret) {
        psi_group_read(&t->psi, kind, now_usec, ret);
}

void tenant_pressure_read(struct tenant *t, enum psi_kind kind, struct psi_reading *ret) {
        tenant_pressure_read_at(t, kind, psi_now_usec(), ret);
}
