/* SPDX-License-Identifier: MIT */
/*
 * audit.h - the arena audit: memory backing a tenant's arena beyond what is
 * charged to its clients is found and revoked (arena_audit()), an `overrun`
 * event counted on the tenant (local and hierarchical, like the
 * memory.events the kernel counts), and with OverrunPolicy=kill every
 * connected client of the tenant is killed.  Runs on the main thread every
 * AUDIT_INTERVAL_USEC over the arenas of the tenants that have had clients.
 *
 * With tmpfs backing the kernel already keeps an arena within what is
 * charged plus 2 x ChargeBatch pages; the audit then punches what a client
 * wrote into pages it did not hold once the instance is full, so that its
 * honest co-tenants do not fault on a full instance.  With memfd backing the
 * audit is the only bound: memory a client backs beyond its charge lives at
 * most one interval (plus the time to punch it).
 */
#pragma once

#include <stdint.h>

#include "broker.h"

struct audit;
struct event_base;

#define AUDIT_INTERVAL_USEC 100000u       /* 10 audits a second */
#define AUDIT_LOG_INTERVAL_USEC 1000000u  /* at most one warning a second per tenant */

/**
 * audit_choose_backing - decide, from ArenaBacking= (b->config), whether new
 * arenas get a tmpfs instance each (b->arena_tmpfs) and log the choice
 * once.  Call before any arena is made.  Main thread.  Returns 0, or a
 * negative errno with a message in *@ret_error when ArenaBacking=tmpfs and
 * no tmpfs instance can be made.
 */
int audit_choose_backing(struct broker *b, char **ret_error);

/* Start the periodic audit of the arenas of @b's active tenants on @base,
 * the main thread's loop; counted events go through b->ops, kills through
 * b->reclaimer.  Main thread.  0 or -ENOMEM. */
int audit_start(struct broker *b, struct event_base *base, struct audit **ret);
/* Stop and free; NULL is a no-op. */
void audit_free(struct audit *a);

/* Bytes backing @t's arena beyond what is charged, as of the last audit,
 * 0 when none or when the tenant has no arena.  Main thread. */
uint64_t audit_tenant_unaccounted(const struct tenant *t);
