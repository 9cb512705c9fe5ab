/* SPDX-License-Identifier: MIT */
/*
 * charge.c - the charge decision (see charge.h).
 */
#include <stddef.h>

#include "charge.h"
#include "config.h"
#include "macros.h"

static struct tenant *tenant_of_counter(struct page_counter *pc) {
        return (struct tenant *) ((char *) pc - offsetof(struct tenant, memory));
}

static void charge_add_event(struct tenant_charge *res, struct tenant *t, enum mb_event event) {
        if (res->nevents < TENANT_CHARGE_MAX_EVENTS)
                res->events[res->nevents++] = (struct tenant_charge_event) { .tenant = t, .event = event };
}

void tenant_charge_check_high(struct tenant *t, struct tenant_charge *ret) {
        /* try_charge_memcg(): a level above its high makes the charging
         * task handle the overage on its way out
         * (memcg_nr_pages_over_high); the `high` events are counted there,
         * by reclaim_high(), once per reclaim pass of every level over. */
        for (struct tenant *x = t; x; x = x->parent)
                if (page_counter_read(&x->memory) > page_counter_get_high(&x->memory)) {
                        ret->over_high = true;
                        return;
                }
}

bool tenant_try_charge(struct tenant *t, unsigned long nr_pages, unsigned long need, unsigned flags,
                       struct tenant_charge *ret) {
        struct page_counter *fail = NULL;
        unsigned long batch = nr_pages;

        /* Not the whole struct: the event array is written as needed (this
         * is every charge's path). */
        ret->charged = 0;
        ret->over = NULL;
        ret->over_high = false;
        ret->nevents = 0;
        /* try_charge_memcg(): lock-free and hierarchical; a batch that does
         * not fit falls back to what is needed before anything is
         * counted. */
        if (!page_counter_try_charge(&t->memory, batch, &fail)) {
                if (need >= batch || !page_counter_try_charge(&t->memory, need, &fail)) {
                        ret->over = tenant_of_counter(fail);
                        /* memcg_memory_event(mem_over_limit, MEMCG_MAX),
                         * once per charge. */
                        if (!(flags & TENANT_CHARGE_RETRY))
                                charge_add_event(ret, ret->over, MB_EVENT_MAX);
                        return false;
                }
                batch = need;
        }
        ret->charged = batch;
        tenant_charge_check_high(t, ret);
        return true;
}

enum tenant_charge_action tenant_charge_next(struct tenant_charge *failed, unsigned long nr_pages,
                                             const struct tenant_charge_retry *retry,
                                             unsigned long *ret_reclaim_pages) {
        struct tenant *over = failed->over;
        unsigned long usage, max, margin;

        *ret_reclaim_pages = 0;
        if (!retry->drained)
                return TENANT_CHARGE_DRAIN;
        /* try_charge_memcg(): "if (gfp_mask & __GFP_NORETRY) goto nomem;"
         * after the first reclaim, before the retries and the OOM path. */
        if (retry->noretry && (retry->reclaim_rounds > 0 || retry->reclaim_exhausted))
                return TENANT_CHARGE_NOMEM;
        if (!retry->reclaim_exhausted && retry->fruitless < MAX_RECLAIM_RETRIES && retry->elapsed_usec < RECLAIM_MAX_USEC) {
                usage = page_counter_read(&over->memory);
                max = page_counter_get_max(&over->memory);
                margin = max > usage ? max - usage : 0;
                *ret_reclaim_pages = MB_MAX(nr_pages > margin ? nr_pages - margin : 1,
                                            (unsigned long) RECLAIM_CLUSTER_PAGES);
                return TENANT_CHARGE_RECLAIM;
        }
        /* mem_cgroup_oom(): counted whatever the policy does next. */
        charge_add_event(failed, over, MB_EVENT_OOM);
        return over->oom_policy == MB_OOM_KILL ? TENANT_CHARGE_OOM_KILL : TENANT_CHARGE_NOMEM;
}

unsigned tenant_unlimited_charge_batch(unsigned batch) {
        return MB_MIN(batch * TENANT_UNLIMITED_CHARGE_BATCH_FACTOR, MB_CHARGE_MAX_PAGES);
}

unsigned tenant_effective_charge_batch(const struct tenant *t, unsigned broker_batch, unsigned current) {
        unsigned batch = tenant_charge_batch(t, broker_batch), big = tenant_unlimited_charge_batch(batch);
        const struct tenant *root = t->tree->root;
        unsigned long usage, capacity;

        if (!tenant_is_unlimited(t))
                return batch;
        usage = page_counter_read(&root->memory);
        capacity = page_counter_get_max(&root->memory);
        if (usage < capacity / 4)
                return big;
        if (usage > capacity / 2)
                return batch;
        return current == big ? big : batch;
}
