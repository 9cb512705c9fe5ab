/* SPDX-License-Identifier: MIT */
/*
 * delegate.c - Delegate= (delegate.h): its parsing and the rule that says
 * who may manage which tenants.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delegate.h"
#include "macros.h"

void mb_delegate_done(struct mb_delegate *d) {
        free(d->users);
        free(d->groups);
        *d = (struct mb_delegate) {};
}

unsigned mb_delegate_max_descendants(const struct mb_delegate *d) {
        return d->max_descendants ? d->max_descendants : MB_DELEGATE_DEFAULT_MAX_DESCENDANTS;
}

/* A decimal id below (uint32_t) -1, which means "no id" to the kernel. */
static int parse_id(const char *s, uint32_t *ret) {
        unsigned long long v;
        char *end;

        if (!isdigit((unsigned char) s[0]))
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0' || v >= UINT32_MAX)
                return -EINVAL;
        *ret = (uint32_t) v;
        return 0;
}

static int append_id(uint32_t **ids, size_t *n, uint32_t id) {
        uint32_t *a;

        for (size_t i = 0; i < *n; i++)
                if ((*ids)[i] == id)
                        return 0; /* named twice: once is enough */
        a = reallocarray(*ids, *n + 1, sizeof(**ids));
        if (!a)
                return -ENOMEM;
        a[(*n)++] = id;
        *ids = a;
        return 0;
}

static _printf_(3, 4) int reason(char **ret_reason, int r, const char *fmt, ...) {
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(ret_reason, fmt, ap);
        va_end(ap);
        if (k < 0) {
                *ret_reason = NULL;
                return -ENOMEM;
        }
        return r;
}

_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t), "ids are 32 bit");

int mb_delegate_parse(const char *value, mb_delegate_resolve_t resolve, void *userdata, struct mb_delegate *d,
                      char **ret_reason) {
        _cleanup_(freep) char *copy = NULL;
        char *save = NULL;

        *ret_reason = NULL;
        if (!*value) {
                unsigned max = d->max_descendants;

                mb_delegate_done(d);
                d->max_descendants = max;
                return 0;
        }
        copy = strdup(value);
        if (!copy)
                return -ENOMEM;

        for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                bool group = w[0] == '@';
                const char *name = group ? w + 1 : w, *what = group ? "group" : "user";
                uint32_t id = 0;
                int r;

                if (!*name)
                        return reason(ret_reason, -EINVAL, "'%s' names no group in Delegate= (%s)", w,
                                      "'@' comes right before a group's name or gid");
                if (isdigit((unsigned char) name[0])) {
                        if (parse_id(name, &id) < 0)
                                return reason(ret_reason, -EINVAL, "bad id '%s' in Delegate= (%s)", w,
                                              group ? "a gid is a decimal number below 4294967295"
                                                    : "a uid is a decimal number below 4294967295");
                } else {
                        r = resolve ? resolve(name, group, &id, userdata) : -ENOENT;
                        if (r == -ENOMEM)
                                return r;
                        if (r == -ENOENT)
                                return reason(ret_reason, -EINVAL, "unknown %s '%s' in Delegate=", what, name);
                        if (r < 0) {
                                char detail[128];

                                snprintf(detail, sizeof(detail), "%s: %s", what, strerror(-r));
                                return reason(ret_reason, r, "cannot look up '%s' in Delegate= (%s)", name, detail);
                        }
                }
                if (append_id(group ? (uint32_t **) &d->groups : (uint32_t **) &d->users,
                              group ? &d->n_groups : &d->n_users, id) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int mb_delegate_set(struct tenant *t, const struct mb_delegate *d) {
        _cleanup_(freep) uid_t *u = NULL;
        _cleanup_(freep) gid_t *g = NULL;

        if (d->n_users > 0) {
                u = malloc(d->n_users * sizeof(*u));
                if (!u)
                        return -ENOMEM;
                memcpy(u, d->users, d->n_users * sizeof(*u));
        }
        if (d->n_groups > 0) {
                g = malloc(d->n_groups * sizeof(*g));
                if (!g)
                        return -ENOMEM;
                memcpy(g, d->groups, d->n_groups * sizeof(*g));
        }
        mb_delegate_done(&t->delegate);
        t->delegate = (struct mb_delegate) {
                .users = TAKE_PTR(u), .n_users = d->n_users, .groups = TAKE_PTR(g), .n_groups = d->n_groups,
                .max_descendants = d->max_descendants,
        };
        return 0;
}

bool mb_delegate_names(const struct mb_delegate *d, const struct mb_caller *c) {
        for (size_t i = 0; i < d->n_users; i++)
                if (d->users[i] == c->uid)
                        return true;
        for (size_t i = 0; i < d->n_groups; i++)
                for (size_t j = 0; j < c->ngroups; j++)
                        if (d->groups[i] == c->groups[j])
                                return true;
        return false;
}

struct tenant *mb_delegate_anchor(struct tenant_tree *tree, const char *path) {
        char buf[TENANT_PATH_MAX];
        size_t n = strnlen(path, sizeof(buf));

        if (n >= sizeof(buf))
                return tree->root;
        memcpy(buf, path, n + 1);
        /* "a/b/c": "a/b", then "a", then the root. */
        for (char *slash; (slash = strrchr(buf, '/'));) {
                struct tenant *t;

                *slash = '\0';
                t = tenant_lookup(tree, buf);
                if (t)
                        return t;
        }
        return tree->root;
}

enum mb_delegate_verdict mb_delegate_check(const struct tenant *t, bool t_is_target, const struct mb_caller *c,
                                           const struct tenant **ret_via) {
        if (ret_via)
                *ret_via = NULL;
        if (c->uid == 0)
                return MB_DELEGATE_ROOT;
        for (const struct tenant *a = t_is_target ? t->parent : t; a; a = a->parent)
                if (mb_delegate_names(&a->delegate, c)) {
                        if (ret_via)
                                *ret_via = a;
                        return MB_DELEGATE_GRANTED;
                }
        if (t_is_target && mb_delegate_names(&t->delegate, c)) {
                if (ret_via)
                        *ret_via = t;
                return MB_DELEGATE_DENIED_SELF;
        }
        return MB_DELEGATE_DENIED;
}

/* The tenants below @t, counting no further than @stop. */
static unsigned count_descendants(const struct tenant *t, unsigned stop) {
        unsigned n = 0;

        for (const struct tenant *c = t->children; c && n < stop; c = c->next_sibling) {
                n++;
                if (n < stop)
                        n += count_descendants(c, stop - n);
        }
        return n;
}

bool mb_delegate_room(const struct tenant *anchor, const char *path, const struct tenant **ret_full,
                      unsigned *ret_count) {
        unsigned depth = 1, levels;

        for (const char *p = path; *p; p++)
                depth += *p == '/';
        levels = depth > anchor->depth ? depth - anchor->depth : 0;
        for (const struct tenant *a = anchor; a; a = a->parent) {
                unsigned max = mb_delegate_max_descendants(&a->delegate), n;

                if (a->delegate.n_users == 0 && a->delegate.n_groups == 0)
                        continue;
                n = count_descendants(a, max + 1);
                if (n + levels > max) {
                        *ret_full = a;
                        *ret_count = n;
                        return false;
                }
        }
        return true;
}
