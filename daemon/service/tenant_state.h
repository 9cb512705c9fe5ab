/* SPDX-License-Identifier: MIT */
/*
 * tenant_state.h - what the daemon keeps per tenant (tenant->userdata).
 *
 * Every tenant of the tree has one, created on the main thread with the
 * tenant.  The arena and the daemon's own stats source are created when the
 * first client attaches (so 10,000 tenants without clients cost nothing) and
 * live until the tenant is removed.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "arena.h"
#include "mb_stats_abi.h"
#include "rightsize.h"
#include "rstat.h"
#include "tenant.h"

struct reclaim_client;

struct tenant_state {
        struct tenant *tenant;

        pthread_mutex_t lock;  /* creation of arena and daemon_slots */
        struct arena *arena;   /* NULL until the first client */

        /* Daemon-side counters (charge/uncharge requests, pgscan, ...): one
         * slot per worker, each written only by its worker.  Attached as an
         * rstat source of the tenant (under broker->stats_lock). */
        struct mb_stat_slot *daemon_slots;
        unsigned ndaemon_slots;
        struct rstat_source *daemon_src;

        /* The attached clients (daemon/reclaim/reclaim.h), under `lock`: whom the
         * reclaimer asks to give pages back. */
        struct reclaim_client *clients;

        /* On broker->active while it has stats sources (stats_lock): the
         * periodic flush and manager_stats_refresh() poll only these. */
        bool active;
        struct tenant_state *active_prev, *active_next;

        /* Bits (1 << enum mb_event) queued to the main thread, not yet
         * delivered: coalesces bursts of events into one signal. */
        _Atomic unsigned events_queued;

        /* The arena audit (daemon/reclaim/audit.c, main thread): memory backing the
         * arena beyond what is charged as of the last audit, and when an
         * overrun was last logged. */
        uint64_t unaccounted_bytes;
        bool unaccounted_logged;

        /* MemoryPressureTarget= (daemon/reclaim/rightsizer.h, main thread): the
         * loop, the target generation it was started from, and whether
         * its step's reclaim runs. */
        struct rightsize rightsize;
        unsigned rightsize_gen;
        bool rightsize_busy;

        /* The uid of its first client, and whether clients of a second uid
         * were admitted (logged once: they share the arena), under `lock`
         * (daemon/conn/session.h). */
        uid_t first_uid;
        bool has_first_uid, multi_uid_logged;
        uint64_t overrun_logged_usec;
        uint64_t overrun_pages_unlogged;
};

static inline struct tenant_state *tenant_state_of(const struct tenant *t) {
        return t->userdata;
}
