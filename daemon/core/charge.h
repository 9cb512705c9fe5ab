/* SPDX-License-Identifier: MIT */
/*
 * charge.h - the charge decision: try_charge_memcg() as pure code.
 *
 * The kernel keeps in one function everything that decides a charge: the
 * hierarchical page_counter_try_charge(), the fall-back from the batch to
 * what is needed, which ancestor failed, the MEMCG_MAX / MEMCG_HIGH /
 * MEMCG_OOM events, and the retries around reclaim.  Here that decision is
 * one module of the accounting core, so that the worker's fast path and the
 * reclaimer's retries take it from the same code.  It decides; it does not
 * act: the events to count are returned to the caller (which counts them
 * with tenant_memory_event() and notifies whoever listens), and the next
 * step after a failure (drain, reclaim, OOM) is returned as an action.
 *
 * Also here: the charge batch a client is told (the per-CPU stock size,
 * MEMCG_CHARGE_BATCH), with the larger batch of a tenant that has nothing
 * limited while the broker is far from its capacity.
 *
 * Thread-safety: everything here is lock-free (page_counter) and may run on
 * any thread; the tenant and its ancestors must stay alive (a tenant with
 * clients cannot be removed).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenant.h"

/* try_charge_memcg(): reclaim rounds that free nothing before a charge
 * gives up (MAX_RECLAIM_RETRIES). */
#define MAX_RECLAIM_RETRIES 16u
/* How long one charge or proactive request may keep reclaiming while its
 * rounds make progress (they do not use up the retries above).  The kernel
 * has no such bound (a task reclaims until it fits or a fatal signal comes);
 * a client waiting for its Grant gets one. */
#define RECLAIM_MAX_USEC (10ULL * 1000 * 1000)
/* try_to_free_mem_cgroup_pages() asks for max(nr_pages, SWAP_CLUSTER_MAX):
 * a charge short of a page still reclaims a cluster, so that the next
 * charges find room and the split between tenants stays proportional. */
#define RECLAIM_CLUSTER_PAGES 32u

/* While a tenant and its ancestors have nothing limited and the broker is
 * far from its capacity, a client charges this many times ChargeBatch per
 * trip (the daemon's way to make the unlimited case cost close to nothing:
 * be asked less often). */
#define TENANT_UNLIMITED_CHARGE_BATCH_FACTOR 4u

/* Every level of the deepest tenant, root included, may have an event. */
#define TENANT_CHARGE_MAX_EVENTS (TENANT_MAX_DEPTH + 1)

/* One memcg_memory_event() the caller is to count. */
struct tenant_charge_event {
        struct tenant *tenant;
        enum mb_event event;
};

/* The outcome of one charge decision. */
struct tenant_charge {
        unsigned long charged;  /* pages charged; 0 when the charge failed */
        struct tenant *over;    /* failed: the level whose max was hit
                                 * (mem_over_limit); NULL on success */
        bool over_high;         /* charged: some level is above its high */
        size_t nevents;
        struct tenant_charge_event events[TENANT_CHARGE_MAX_EVENTS];
};

enum tenant_charge_flags {
        /* A retry after reclaim: a failure counts no `max` event (the
         * first failure of this charge counted it). */
        TENANT_CHARGE_RETRY = 1u << 0,
};

/**
 * tenant_try_charge - charge @nr_pages (a batch) to @t and its ancestors,
 * falling back to @need pages when the batch does not fit, as
 * try_charge_memcg() does ("if (batch > nr_pages) { batch = nr_pages; goto
 * retry; }") before anything is counted.  Mirrors the limit walk of
 * page_counter_try_charge(): it fails at the first ancestor whose usage
 * would pass its max, and nothing stays charged anywhere.
 *
 * Events (in @ret->events, not counted here): on failure `max` at the
 * failing level (unless @flags has TENANT_CHARGE_RETRY).  On success
 * @ret->over_high says that some level, @t up to the root, is left above
 * its high: the caller hands the charge to mem_cgroup_handle_over_high(),
 * which counts `high` on every level over at each reclaim pass
 * (reclaim_high()).
 *
 * The caller guarantees 1 <= @need <= @nr_pages and that @t stays alive.
 * Returns true when charged (@ret->charged pages: @nr_pages or @need).
 */
bool tenant_try_charge(struct tenant *t, unsigned long nr_pages, unsigned long need, unsigned flags,
                       struct tenant_charge *ret);

/**
 * tenant_charge_check_high - the high half of the decision alone, for a
 * charge that was made elsewhere (the reclaimer's retry): set
 * @ret->over_high (initialised by the caller, e.g. to all zeroes) when a
 * level of @t, root included, is above its high.  No event.
 */
void tenant_charge_check_high(struct tenant *t, struct tenant_charge *ret);

/* What a charge that failed at a max does next (try_charge_memcg()). */
enum tenant_charge_action {
        TENANT_CHARGE_DRAIN,    /* drain_all_stock() in the failing subtree */
        TENANT_CHARGE_RECLAIM,  /* try_to_free_mem_cgroup_pages() there */
        TENANT_CHARGE_OOM_KILL, /* mem_cgroup_out_of_memory(), OOMPolicy=kill */
        TENANT_CHARGE_NOMEM,    /* fail the charge with ENOMEM */
};

/* Where a failed charge stands in its retries. */
struct tenant_charge_retry {
        bool drained;            /* the stocks were drained (or nobody had any) */
        bool reclaim_exhausted;  /* the last reclaim found nobody to ask */
        uint64_t elapsed_usec;   /* since the charge first failed */
        unsigned fruitless;      /* reclaim rounds that freed nothing */
        bool noretry;            /* __GFP_NORETRY: one reclaim, no OOM */
        unsigned reclaim_rounds; /* reclaim rounds run so far */
};

/**
 * tenant_charge_next - after a failure at @failed->over, the next step of a
 * charge of @nr_pages: drain the stocks once, then reclaim (the amount in
 * *@ret_reclaim_pages: what is missing below the max, at least
 * RECLAIM_CLUSTER_PAGES) while fewer than MAX_RECLAIM_RETRIES rounds were
 * fruitless, less than RECLAIM_MAX_USEC passed and the last reclaim found
 * someone to ask, then out of memory: an `oom` event at the failing level
 * (appended to @failed->events, mem_cgroup_oom()) and OOM_KILL when that
 * level's OOMPolicy= is kill, else NOMEM.  With @retry->noretry
 * (__GFP_NORETRY) one reclaim round is all: then NOMEM, with no `oom`
 * event, as try_charge_memcg() gives up before mem_cgroup_oom().  @failed
 * comes from a failed tenant_try_charge().
 */
enum tenant_charge_action tenant_charge_next(struct tenant_charge *failed, unsigned long nr_pages,
                                             const struct tenant_charge_retry *retry,
                                             unsigned long *ret_reclaim_pages);

/**
 * tenant_unlimited_charge_batch - @batch times
 * TENANT_UNLIMITED_CHARGE_BATCH_FACTOR, at most MB_CHARGE_MAX_PAGES.
 */
unsigned tenant_unlimited_charge_batch(unsigned batch);

/**
 * tenant_effective_charge_batch - the batch a client of @t is told:
 * ChargeBatch= of @t (or its nearest ancestor, or @broker_batch), times
 * TENANT_UNLIMITED_CHARGE_BATCH_FACTOR while nothing is limited up the tree
 * -- and while the root, whose max is the capacity and which every tenant
 * shares, is far from it: the larger stocks of many clients would otherwise
 * fill the capacity with unused pages.  The factor is given below a quarter
 * of the capacity and taken back above a half; in between a client keeps
 * what it has (@current; 0 for a new client, which gets the plain batch),
 * so that a usage hovering around one threshold does not make the clients
 * trim and refill their stocks at every charge.  No lock: the limits, the
 * usage and the batch are read atomically.
 */
unsigned tenant_effective_charge_batch(const struct tenant *t, unsigned broker_batch, unsigned current);
