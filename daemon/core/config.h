/* SPDX-License-Identifier: MIT */
/*
 * config.h - membroker.conf and tenants.d/NAME.conf (design.md §7).
 *
 * systemd-style INI, parsed with libinih.  Every error is reported as
 * "file:line: what is wrong"; on error nothing is returned (no partial
 * configuration).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "tenant.h"

#define MB_DEFAULT_CONFIG_DIR "/etc/membroker"
#define MB_DEFAULT_SOCKET "/run/membroker/membroker.sock"
#define MB_DEFAULT_STATE_DIR "/var/lib/membroker"
#define MB_LIMIT_MAX UINT64_MAX /* "infinity" / "max" */

struct mb_broker_config {
        uint64_t capacity_bytes;       /* Capacity= resolved (bytes or % of RAM), default 25% */
        uint64_t page_size;            /* PageSize=, default 4096 */
        unsigned charge_batch;         /* ChargeBatch=, default 64 */
        char *socket_path;             /* Socket= */
        unsigned stats_flush_interval_sec; /* StatsFlushIntervalSec=, default 2 */
        unsigned workers;              /* Workers=, 0 = one per CPU */
        unsigned reclaim_timeout_msec; /* ReclaimTimeoutMSec=, default 250 */
        bool pressure_reclaim;         /* PressureReclaim=, default no */
        bool memory_recursiveprot;     /* MemoryRecursiveProtection=, default no */
};

struct mb_tenant_config {
        char *path;
        uint64_t max, high, low, min; /* bytes; MB_LIMIT_MAX = max; low/min default 0 */
        unsigned charge_batch;        /* 0 = inherit */
        enum mb_oom_policy oom_policy;
        uid_t *allow_users;
        size_t n_allow_users;
        gid_t *allow_groups;
        size_t n_allow_groups;
        char *cgroup;
        char *file; /* where it was defined */
        unsigned line;
};

struct mb_config {
        struct mb_broker_config broker;
        struct mb_tenant_config *tenants;
        size_t ntenants;
};

/**
 * mb_config_load - read @dir/membroker.conf (optional: defaults when absent)
 * and @dir/tenants.d/ *.conf in lexical order.  On error returns a negative
 * errno and sets *@ret_error to a malloc'ed "file:line: reason".
 */
int mb_config_load(const char *dir, struct mb_config **ret, char **ret_error);
void mb_config_free(struct mb_config *c);

/**
 * mb_parse_size - "4096", "4K", "1.5G", "25%" (of @ram_bytes), "infinity",
 * "max".  Suffixes K/M/G/T are powers of 1024.  Returns -EINVAL / -ERANGE.
 */
int mb_parse_size(const char *s, uint64_t ram_bytes, uint64_t *ret);

/* Physical RAM in bytes (sysconf). */
uint64_t mb_physical_memory(void);

/**
 * mb_config_build_tree - a tenant tree from @c: the root's max is the
 * capacity, every tenant created with its limits (bytes rounded down to
 * pages, as page_counter_memparse() does) and access settings.
 */
int mb_config_build_tree(const struct mb_config *c, unsigned ncpus, struct tenant_tree **ret,
                         char **ret_error);

/* Apply one tenant's limits/settings from @tc to @t (used by build and reload). */
int mb_config_apply_tenant(const struct mb_config *c, const struct mb_tenant_config *tc, struct tenant *t);
