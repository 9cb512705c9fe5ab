/* SPDX-License-Identifier: MIT */
/*
 * reclaim_plan.h - whom to ask for how many pages: the target selection of
 * shrink_node_memcgs() and get_scan_count(), as pure code.
 *
 * One plan is one try_to_free_mem_cgroup_pages() call for @goal pages in the
 * subtree of a reclaim root (the level whose max was hit, the target of
 * memory.reclaim, or the tree root under host pressure):
 *
 *  - effective protection relative to the root
 *    (page_counter_calculate_protection(), parents before children);
 *  - a leaf below its effective min is never reclaimed; one below its
 *    effective low is skipped in the first pass, and when that pass finds
 *    nobody to ask, a second pass takes it (do_try_to_free_pages()'s
 *    memcg_low_reclaim retry), marking its targets `low` so that the caller
 *    counts a `low` event;
 *  - each leaf offers its usage above protection (in the second pass only
 *    min protects), split among its clients in proportion to what each
 *    holds, the rounding remainder going to the clients in order, each up
 *    to what it holds;
 *  - the goal is distributed over all targets in proportion to what each
 *    offers (the kernel's proportional reclaim), the remainder to the
 *    largest offers first.
 *
 * A drain plan (drain_all_stock()) asks every client of the subtree for
 * everything it holds, protection regardless.
 *
 * A client the caller marks `skip` has nothing left to give (it said so in
 * an earlier answer of the same job): it is never a target and what it
 * holds takes no share of its leaf's offer, as get_scan_count() does not
 * scan anon pages that cannot be reclaimed (can_reclaim_anon_pages()) and
 * shrink_slab_memcg() does not call a shrinker whose count was empty.  The
 * plan counts such clients (nskipped), so that the caller can tell "nobody
 * to ask" from "nobody left to ask": in the kernel the latter is still a
 * reclaim pass, one that frees nothing.
 *
 * The plan does not know what a client is: the caller's callback lists the
 * usable clients of a leaf (opaque handles with what each holds).  The walk
 * writes emin/elow of the subtree's counters (see protection.h); the caller
 * serialises plans (the daemon's main thread).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenant.h"

/* One client as the caller's callback reports it. */
struct reclaim_plan_client {
        void *handle; /* the caller's; copied to the target */
        uint64_t held; /* pages it holds (> 0) */
        bool skip;     /* nothing left to give: counted in nskipped, never a target */
};

/* Ask @handle (a client of @tenant) for @ask pages (at most @cap). */
struct reclaim_target {
        void *handle;
        struct tenant *tenant;
        uint64_t held;
        uint64_t cap;   /* its share of what its tenant offers */
        uint64_t ask;   /* its share of the goal (reclaim_plan_build()) */
        bool low;       /* reclaimed below its tenant's effective low */
};

struct reclaim_plan;

/*
 * The usable clients of leaf @t: call reclaim_plan_add_clients() once with
 * them (or not at all when there are none).  Returns 0 or a negative errno,
 * which stops the plan.
 */
typedef int (*reclaim_plan_clients_cb)(struct reclaim_plan *p, struct tenant *t, uint64_t offer, bool low,
                                       void *userdata);

struct reclaim_plan {
        /* Inputs. */
        struct tenant *root;
        bool drain;       /* drain plan: everything every client holds */
        bool allow_low;   /* the second pass below low may run */
        bool low_first;   /* start with the pass below low */
        bool recursive;   /* memory_recursiveprot */
        reclaim_plan_clients_cb clients;
        void *userdata;

        /* Results. */
        bool low_pass;    /* the targets come from the pass below low */
        bool low_skipped; /* the pass that respects low skipped a tenant */
        struct reclaim_target *targets;
        size_t ntargets, alloc;
        uint64_t total_cap;
        size_t nskipped;  /* clients left out: nothing left to give (skip) */
        /* The pass below low visited these tenants below their effective
         * low (shrink_node_memcgs() counts MEMCG_LOW on every memcg it
         * visits below low, not only on those with pages of their own):
         * the intermediate ones, and the leaves whose clients were all
         * skipped; the other leaves' are in the targets (low). */
        struct tenant **low_visited;
        size_t nlow_visited, low_visited_alloc;
};

/**
 * reclaim_plan_add_clients - for the clients callback: split @offer pages of
 * leaf @t among @clients (@n of them, each holding > 0) in proportion to
 * what each holds, at most what they hold together (a drain plan asks each
 * for all it holds); the rounding remainder goes to the clients in order,
 * each up to what it holds.  Clients marked skip are only counted
 * (nskipped; a leaf below low whose clients were all skipped goes into
 * low_visited).  0 or -ENOMEM.
 */
int reclaim_plan_add_clients(struct reclaim_plan *p, struct tenant *t, uint64_t offer, bool low,
                             const struct reclaim_plan_client *clients, size_t n);

/**
 * reclaim_plan_build - fill @p (inputs set, results zero) with the targets
 * for @goal pages (ignored for a drain plan): the pass that respects low,
 * then, when it found nobody (not even a client with nothing left) and
 * skipped a tenant below low and @p->allow_low, the pass below low; then the goal split over the targets
 * (reclaim_plan_distribute()).  0, -ENOMEM or the callback's error; on
 * error the plan may hold partial targets (reclaim_plan_done() frees).
 */
int reclaim_plan_build(struct reclaim_plan *p, uint64_t goal);

/**
 * reclaim_plan_distribute - split @goal pages over the targets in
 * proportion to their caps (each target's ask, at most its cap); the
 * remainder goes one page at a time to the target with the most left.
 */
void reclaim_plan_distribute(struct reclaim_plan *p, uint64_t goal);

/* Free the targets (the handles are the caller's) and low_visited, zero
 * nskipped; the inputs stay. */
void reclaim_plan_done(struct reclaim_plan *p);

/**
 * reclaim_plan_excess_above_low - pages that the leaves of @root's subtree
 * hold above their effective protection (max of emin and elow) relative to
 * @root: what host-pressure reclaim may take without touching low.
 */
uint64_t reclaim_plan_excess_above_low(struct tenant *root, bool recursive);
