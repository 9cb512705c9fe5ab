/* SPDX-License-Identifier: MIT */
/*
 * reclaim_plan.c - target selection for cooperative reclaim (see
 * reclaim_plan.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "macros.h"
#include "protection.h"
#include "reclaim_plan.h"

static int plan_push(struct reclaim_plan *p, const struct reclaim_target *tg) {
        if (p->ntargets == p->alloc) {
                size_t a = MB_MAX(p->alloc * 2, (size_t) 16);
                struct reclaim_target *v = realloc(p->targets, a * sizeof(*v));

                if (!v)
                        return -ENOMEM;
                p->targets = v;
                p->alloc = a;
        }
        p->targets[p->ntargets++] = *tg;
        p->total_cap += tg->cap;
        return 0;
}

static int plan_low_visited(struct reclaim_plan *p, struct tenant *t) {
        if (p->nlow_visited == p->low_visited_alloc) {
                size_t a = MB_MAX(p->low_visited_alloc * 2, (size_t) 4);
                struct tenant **v = realloc(p->low_visited, a * sizeof(*v));

                if (!v)
                        return -ENOMEM;
                p->low_visited = v;
                p->low_visited_alloc = a;
        }
        p->low_visited[p->nlow_visited++] = t;
        return 0;
}

int reclaim_plan_add_clients(struct reclaim_plan *p, struct tenant *t, uint64_t offer, bool low,
                             const struct reclaim_plan_client *clients, size_t n) {
        uint64_t sum = 0, given = 0;
        size_t first = p->ntargets, skipped = 0;
        int r;

        for (size_t i = 0; i < n; i++) {
                if (clients[i].skip)
                        skipped++;
                else
                        sum += clients[i].held;
        }
        p->nskipped += skipped;
        if (sum == 0)
                /* Visited below low all the same (shrink_node_memcgs()
                 * counts the visit, not what it found). */
                return low && skipped > 0 ? plan_low_visited(p, t) : 0;
        offer = MB_MIN(offer, sum);
        for (size_t i = 0; i < n; i++) {
                uint64_t share;

                if (clients[i].skip)
                        continue;
                share = p->drain ? clients[i].held : (uint64_t) ((unsigned __int128) offer * clients[i].held / sum);
                r = plan_push(p, &(struct reclaim_target) { .handle = clients[i].handle, .tenant = t,
                                                            .held = clients[i].held, .cap = share, .low = low });
                if (r < 0)
                        return r;
                given += share;
        }
        /* The rounding remainder goes to the clients in order, each up to
         * what it holds. */
        for (size_t i = first; !p->drain && given < offer && i < p->ntargets; i++) {
                struct reclaim_target *tg = &p->targets[i];
                uint64_t add = MB_MIN(offer - given, tg->held > tg->cap ? tg->held - tg->cap : 0);

                tg->cap += add;
                p->total_cap += add;
                given += add;
        }
        return 0;
}

static int plan_walk_cb(struct tenant *t, void *userdata) {
        struct reclaim_plan *p = userdata;
        unsigned long usage, emin, elow, protection;
        bool low = false;
        int r;

        /* mem_cgroup_calculate_protection() relative to the reclaim root,
         * parents before children: the walk is pre-order, as
         * mem_cgroup_iter(), so every parent's emin/elow is fresh when its
         * children use it. */
        if (!p->drain)
                page_counter_calculate_protection(&p->root->memory, &t->memory, p->recursive);
        if (t->nchildren > 0) {
                /* Pages live in leaves; but a visit below low in the pass
                 * below low is a `low` event of this level too. */
                if (page_counter_below_min(&p->root->memory, &t->memory) ||
                    !page_counter_below_low(&p->root->memory, &t->memory))
                        return 0;
                if (!p->low_pass) {
                        p->low_skipped = true;
                        return 0;
                }
                return plan_low_visited(p, t);
        }
        usage = page_counter_read(&t->memory);
        if (usage == 0)
                return 0;
        if (p->drain) {
                r = p->clients(p, t, usage, false, p->userdata);
                return r < 0 ? r : 0;
        }

        if (page_counter_below_min(&p->root->memory, &t->memory))
                return 0; /* hard protection: never reclaimed */
        if (page_counter_below_low(&p->root->memory, &t->memory)) {
                if (!p->low_pass) {
                        p->low_skipped = true; /* soft protection */
                        return 0;
                }
                low = true;
        }

        /* get_scan_count(): in proportion to the usage above protection;
         * in the pass below low only min protects. */
        page_counter_protection(&p->root->memory, &t->memory, &emin, &elow);
        protection = p->low_pass ? emin : MB_MAX(emin, elow);
        if (usage <= protection)
                return 0;
        r = p->clients(p, t, usage - protection, low, p->userdata);
        return r < 0 ? r : 0;
}

static int plan_pass(struct reclaim_plan *p) {
        return tenant_walk(p->root, plan_walk_cb, p);
}

int reclaim_plan_build(struct reclaim_plan *p, uint64_t goal) {
        int r;

        p->low_pass = !p->drain && p->allow_low && p->low_first;
        p->low_skipped = false;
        r = plan_pass(p);
        if (r < 0)
                return r;
        if (p->drain)
                return 0;
        if (p->ntargets == 0 && p->nskipped == 0 && p->low_skipped && p->allow_low && !p->low_pass) {
                /* do_try_to_free_pages(): nothing without touching low,
                 * so go below it.  Clients with nothing left make a pass
                 * that frees nothing: the caller's next round goes below
                 * low, as after a round whose clients gave nothing. */
                reclaim_plan_done(p);
                p->low_pass = true;
                r = plan_pass(p);
                if (r < 0)
                        return r;
        }
        reclaim_plan_distribute(p, goal);
        return 0;
}

void reclaim_plan_distribute(struct reclaim_plan *p, uint64_t goal) {
        uint64_t given = 0;

        if (p->total_cap == 0)
                return;
        if (goal >= p->total_cap) {
                for (size_t i = 0; i < p->ntargets; i++)
                        p->targets[i].ask = p->targets[i].cap;
                return;
        }
        for (size_t i = 0; i < p->ntargets; i++) {
                p->targets[i].ask = (uint64_t) ((unsigned __int128) goal * p->targets[i].cap / p->total_cap);
                given += p->targets[i].ask;
        }
        while (given < goal) {
                size_t best = SIZE_MAX;

                for (size_t i = 0; i < p->ntargets; i++)
                        if (p->targets[i].ask < p->targets[i].cap &&
                            (best == SIZE_MAX || p->targets[i].cap - p->targets[i].ask >
                                                         p->targets[best].cap - p->targets[best].ask))
                                best = i;
                if (best == SIZE_MAX)
                        break;
                p->targets[best].ask++;
                given++;
        }
}

void reclaim_plan_done(struct reclaim_plan *p) {
        free(p->targets);
        p->targets = NULL;
        p->ntargets = p->alloc = 0;
        p->total_cap = 0;
        p->nskipped = 0;
        free(p->low_visited);
        p->low_visited = NULL;
        p->nlow_visited = p->low_visited_alloc = 0;
}

struct excess_walk {
        struct tenant *root;
        bool recursive;
        uint64_t excess;
};

static int excess_cb(struct tenant *t, void *userdata) {
        struct excess_walk *ew = userdata;
        unsigned long usage, emin, elow, protection;

        page_counter_calculate_protection(&ew->root->memory, &t->memory, ew->recursive);
        if (t->nchildren > 0)
                return 0;
        usage = page_counter_read(&t->memory);
        if (usage == 0)
                return 0;
        page_counter_protection(&ew->root->memory, &t->memory, &emin, &elow);
        protection = MB_MAX(emin, elow);
        if (usage > protection)
                ew->excess += usage - protection;
        return 0;
}

uint64_t reclaim_plan_excess_above_low(struct tenant *root, bool recursive) {
        struct excess_walk ew = { .root = root, .recursive = recursive };

        (void) tenant_walk(root, excess_cb, &ew);
        return ew.excess;
}
