/* SPDX-License-Identifier: MIT */
/*
 * manager-broker.c - the manager's side of struct broker (daemon/service/broker.h):
 * the hooks through which the modules below the manager report to it and
 * reach the fd store, without seeing the manager.
 */
#include "manager.h"
#include "restart.h"
#include "tenant_state.h"

static void hook_queue_event(struct broker *b, struct tenant *t, enum mb_event event) {
        manager_queue_event(manager_of_broker(b), t, event);
}

static void hook_client_detached(struct broker *b, struct tenant *t) {
        manager_client_detached(manager_of_broker(b), t);
}

static int hook_arena_new(struct broker *b, struct tenant_state *ts, uint64_t npages, struct arena **ret) {
        mb_assert_mutex_held(&ts->lock);
        return restart_arena_new(manager_of_broker(b)->restart, ts, npages, ret);
}

static uint64_t hook_client_attach(struct broker *b, struct arena *a, uint32_t owner, uint64_t token) {
        return restart_client_attach(manager_of_broker(b)->restart, a, owner, token);
}

static void hook_client_detach(struct broker *b, struct arena *a, uint32_t owner) {
        restart_client_detach(manager_of_broker(b)->restart, a, owner);
}

static int hook_claim(struct broker *b, struct tenant_state *ts, uint64_t token, uint32_t owner,
                      const struct arena_extent *extents, size_t n, bool more, uint64_t *ret_pages,
                      uint64_t *ret_bad_page) {
        return restart_claim(manager_of_broker(b)->restart, ts, token, owner, extents, n, more, ret_pages, ret_bad_page);
}

static bool hook_preserving(struct broker *b) {
        return restart_preserving(manager_of_broker(b)->restart);
}

const struct broker_ops manager_broker_ops = {
        .queue_event = hook_queue_event,
        .client_detached = hook_client_detached,
        .arena_new = hook_arena_new,
        .client_attach = hook_client_attach,
        .client_detach = hook_client_detach,
        .claim = hook_claim,
        .preserving = hook_preserving,
};
