/* SPDX-License-Identifier: MIT */
/*
 * client-events.h - memory events told to the clients.
 *
 * When a tenant's memory.events count moves (the bus signal is emitted on
 * the main thread), every client attached in the tenant's subtree gets an
 * Event{event, count, tenant} frame, like a process polling
 * memory.events of a cgroup above it (cgroup_file_notify()).  The frames
 * are written by the connections' worker threads: this module hands them
 * over through one mailbox per worker (daemon/base/mailbox.h), of its own, and
 * reaches the connections through struct reclaim_client_ops.send_event.
 */
#pragma once

#include <stdint.h>

#include "tenant.h"

struct broker;
struct client_events;
struct reclaim_client_ops;

/* One mailbox per worker of @b (the workers exist).  Main thread.  0 or
 * -ENOMEM. */
int client_events_new(struct broker *b, const struct reclaim_client_ops *ops, struct client_events **ret);

/* Queue Event{@event, @count, @t->path} to every client attached in @t's
 * subtree.  Main thread; NULL @ce is a no-op. */
void client_events_deliver(struct client_events *ce, struct tenant *t, enum mb_event event, uint64_t count);

/* No more deliveries (what is queued is dropped); call before the workers
 * are freed.  NULL is a no-op. */
void client_events_shutdown(struct client_events *ce);
/* Free (after the workers are gone); NULL is a no-op. */
void client_events_free(struct client_events *ce);
