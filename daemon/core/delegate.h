/* SPDX-License-Identifier: MIT */
/*
 * delegate.h - Delegate=: handing a subtree of tenants to users and groups
 * who are not root, as cgroup v2 delegation does by chown()ing a cgroup
 * directory (and systemd's Delegate=, which does that for a unit).
 *
 * The rule: a caller may act on tenant T (create it, remove it, change or
 * revert its limits, reclaim from it, reset its peak) when it is uid 0, or
 * when some STRICT ancestor of T has Delegate= naming the caller's uid or
 * one of its groups.  The delegated tenant itself stays out of the
 * delegate's reach (its limits are what bounds the delegate), as a
 * delegated cgroup's own memory.max stays owned by root.
 *
 * Syntax of the key: words separated by blanks; a word is a user (name or
 * decimal uid), or '@' and a group (name or decimal gid): "Delegate=alice
 * 1001 @staff @50".  Several Delegate= lines add up; an empty value starts
 * an empty list.
 *
 * Pure: no NSS (names go through the caller's resolver), no sd-bus; the
 * caller serialises against tree changes (the daemon's tree lock).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tenant.h"

/* DelegateMaxDescendants= when unset: how many tenants there may be below a
 * delegated tenant before its delegates may create no more (a delegate
 * could otherwise grow the daemon without bound), as cgroup.max.descendants
 * bounds a delegated cgroup subtree. */
#define MB_DELEGATE_DEFAULT_MAX_DESCENDANTS 1000U
#define MB_DELEGATE_MAX_MAX_DESCENDANTS 1000000U

/* Who asks, as the bus reported it. */
struct mb_caller {
        uid_t uid;
        const gid_t *groups; /* its groups (supplementary ones, as the bus tells them) */
        size_t ngroups;
};

enum mb_delegate_verdict {
        MB_DELEGATE_ROOT = 0,    /* uid 0: everything */
        MB_DELEGATE_GRANTED,     /* a strict ancestor delegates to the caller */
        MB_DELEGATE_DENIED_SELF, /* the target itself is delegated to the caller, nothing above it */
        MB_DELEGATE_DENIED,      /* nothing delegates to the caller here */
};

/* Free the lists; @d is empty afterwards (max_descendants back to the
 * default).  Safe on an empty one. */
void mb_delegate_done(struct mb_delegate *d);

/* Resolve a user (@group false) or group name: 0 with *@ret set, -ENOENT
 * for an unknown name, another negative errno when the lookup failed (the
 * resolve_name of struct mb_config_env). */
typedef int (*mb_delegate_resolve_t)(const char *name, bool group, uint32_t *ret, void *userdata);

/**
 * mb_delegate_parse - add the words of one Delegate= value to @d (an empty
 * @value empties the lists).  Decimal ids are taken as they are, names go through
 * @resolve (NULL: every name is unknown).  Returns 0, or -EINVAL / -ENOMEM
 * / the resolver's error with *@ret_reason a malloc'ed text naming the word
 * (NULL for -ENOMEM); @d then holds the words before the bad one.
 */
int mb_delegate_parse(const char *value, mb_delegate_resolve_t resolve, void *userdata, struct mb_delegate *d,
                      char **ret_reason);

/**
 * mb_delegate_set - replace @t's Delegate= lists with copies of @d's, and
 * its DelegateMaxDescendants=.
 * -ENOMEM (then nothing changed).
 */
int mb_delegate_set(struct tenant *t, const struct mb_delegate *d);

/* True when @d names @c's uid or one of its groups. */
bool mb_delegate_names(const struct mb_delegate *d, const struct mb_caller *c);

/**
 * mb_delegate_anchor - the deepest existing STRICT ancestor of @path (a
 * normalised path, not "/"): the tenant a CreateTenant(@path) would create
 * below.  At least the root.
 */
struct tenant *mb_delegate_anchor(struct tenant_tree *tree, const char *path);

/**
 * mb_delegate_check - may @c act on a tenant?  @t is that tenant when
 * @t_is_target (the search for a Delegate= starts at its parent), or, for a
 * tenant still to be created, its deepest existing ancestor
 * (mb_delegate_anchor(); the search starts at @t itself).  *@ret_via (may
 * be NULL) gets the tenant whose Delegate= decided: the one that grants
 * (MB_DELEGATE_GRANTED), the target itself (MB_DELEGATE_DENIED_SELF), else
 * NULL.
 */
enum mb_delegate_verdict mb_delegate_check(const struct tenant *t, bool t_is_target, const struct mb_caller *c,
                                           const struct tenant **ret_via);

/* The DelegateMaxDescendants= that applies to @d. */
unsigned mb_delegate_max_descendants(const struct mb_delegate *d);

/**
 * mb_delegate_room - may a delegate create @path (normalised, below the
 * existing tenant @anchor, mb_delegate_anchor())?  Every tenant from
 * @anchor up with a Delegate= must keep at most its
 * DelegateMaxDescendants tenants below it once the new levels are made
 * (cgroup.max.descendants, checked on every ancestor as
 * cgroup_check_hierarchy_limits() does).  Returns true when there is room;
 * else false with *@ret_full the first tenant that is full and
 * *@ret_count its descendants now.
 */
bool mb_delegate_room(const struct tenant *anchor, const char *path, const struct tenant **ret_full,
                      unsigned *ret_count);
