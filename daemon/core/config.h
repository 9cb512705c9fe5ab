/* SPDX-License-Identifier: MIT */
/*
 * config.h - membroker.conf and tenants.d/NAME.conf (design.md §7).
 *
 * systemd-style INI, parsed with libinih.  Every error is reported as
 * "file:line: what is wrong"; on error nothing is returned (no partial
 * configuration).
 *
 * Syntax (systemd's, plus the trailing comments design.md §7 shows):
 *   - "[Section]" headers, "Key=Value" assignments, comment lines starting
 *     with '#' or ';', blank lines; leading whitespace is ignored.
 *   - A '#' or ';' preceded by whitespace starts a trailing comment
 *     ("Capacity=25%   # of RAM"), so a value cannot contain " #".
 *   - Keys and section names are case-sensitive.  A key given twice in a
 *     section: the last assignment wins (systemd), except Path=, which names
 *     the section and may be given once.  An empty value resets the key to
 *     its default (AllowUsers=/AllowGroups= then start an empty list; several
 *     AllowUsers= lines add up).
 *   - One line holds at most 199 characters once leading whitespace and
 *     comments are stripped (libinih's line buffer, INI_MAX_LINE in
 *     Debian's build); a longer one is an error, never silently cut.  Split
 *     long AllowUsers= lists over several lines.
 *   - membroker.conf holds one [Broker] section; every tenants.d/ *.conf
 *     file (lexical order, names starting with '.' and names not ending in
 *     ".conf" are ignored) holds any number of [Tenant] sections.
 *
 * Sizes: bytes, optionally with a K/M/G/T suffix (powers of 1024, upper or
 * lower case, a fraction such as 1.5G allowed with a suffix), or a
 * percentage: of physical RAM for Capacity=, of the Capacity for the tenant
 * limits.  "infinity" and "max" mean no limit (not allowed for Capacity=
 * and PageSize=).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "tenant.h"

#ifdef MB_SYSCONFDIR
#  define MB_DEFAULT_CONFIG_DIR MB_SYSCONFDIR "/membroker" /* from configure --sysconfdir */
#else
#  define MB_DEFAULT_CONFIG_DIR "/etc/membroker"
#endif
#define MB_DEFAULT_SOCKET "/run/membroker/membroker.sock"
#define MB_DEFAULT_STATE_DIR "/var/lib/membroker"
#define MB_LIMIT_MAX UINT64_MAX /* "infinity" / "max" */

/* ArenaBacking=: where the tenants' arenas live. */
enum mb_arena_backing {
        MB_ARENA_BACKING_AUTO = 0, /* a tmpfs instance each when possible, else a memfd */
        MB_ARENA_BACKING_TMPFS,    /* a tmpfs instance each, or refuse to start */
        MB_ARENA_BACKING_MEMFD,    /* sealed memfds (bounded by the audit only) */
};

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
        enum mb_arena_backing arena_backing; /* ArenaBacking=, default auto */
        unsigned restart_grace_sec;    /* RestartGraceSec=, default 30: how long pages kept across a
                                        * restart wait for their client (daemon/restart.h) */
};

struct mb_tenant_config {
        char *path;
        uint64_t max, high, low, min; /* bytes; MB_LIMIT_MAX = max; low/min default 0 */
        unsigned charge_batch;        /* 0 = inherit */
        enum mb_oom_policy oom_policy;
        enum mb_overrun_policy overrun_policy; /* OverrunPolicy=, default punch */
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

#define MB_CHARGE_BATCH_MAX 16384U

/**
 * mb_config_load - read @dir/membroker.conf (optional: defaults when absent,
 * as when @dir itself is absent) and @dir/tenants.d/ *.conf in lexical
 * (byte) order.  On error returns a negative errno (-EINVAL for a bad file,
 * the read error otherwise), sets *@ret_error to a malloc'ed
 * "file:line: reason" ("file: reason" when no line applies) and returns no
 * configuration.
 */
int mb_config_load(const char *dir, struct mb_config **ret, char **ret_error);
void mb_config_free(struct mb_config *c);

/* The built-in defaults (no file): Capacity 25% of RAM, PageSize 4K (or the
 * system page size when larger), ChargeBatch 64, ...  @ret's socket_path is
 * malloc'ed: free with mb_broker_config_done().  -ENOMEM. */
int mb_broker_config_defaults(struct mb_broker_config *ret);
void mb_broker_config_done(struct mb_broker_config *b);

/**
 * mb_parse_size - "4096", "4K", "1.5G", "25%" (of @ram_bytes, rounded down,
 * at most 100%), "infinity", "max" (MB_LIMIT_MAX).  Suffixes K/M/G/T (either
 * case) are powers of 1024; a fraction needs a suffix.  Returns 0, -EINVAL
 * for garbage, -ERANGE when the value does not fit (>= MB_LIMIT_MAX bytes,
 * or above 100%).
 */
int mb_parse_size(const char *s, uint64_t ram_bytes, uint64_t *ret);

/* page_counter_memparse(): bytes to pages, rounded down, MB_LIMIT_MAX and
 * anything above PAGE_COUNTER_MAX pages to PAGE_COUNTER_MAX. */
unsigned long mb_bytes_to_pages(uint64_t bytes, uint64_t page_size);

/* Find a tenant's configuration by normalised path, NULL when absent. */
const struct mb_tenant_config *mb_config_find_tenant(const struct mb_config *c, const char *path);

/* Physical RAM in bytes (sysconf). */
uint64_t mb_physical_memory(void);

/**
 * mb_config_build_tree - a tenant tree from @c: the root's max is the
 * capacity, every tenant created with its limits (bytes rounded down to
 * pages, as page_counter_memparse() does) and access settings; ancestors a
 * file does not define are created without limits; the tree's
 * recursive_protection follows MemoryRecursiveProtection=.  On error
 * *@ret_error is "file:line: reason".
 */
int mb_config_build_tree(const struct mb_config *c, unsigned ncpus, struct tenant_tree **ret,
                         char **ret_error);

/* Apply one tenant's limits/settings from @tc to @t (used by build and
 * reload): max as memory_max_write() sets it (even below the current usage:
 * the caller reclaims the excess), high, low, min, ChargeBatch, OOMPolicy,
 * AllowUsers/AllowGroups/Cgroup; marks @t from_config.  -EINVAL, -ENOMEM. */
int mb_config_apply_tenant(const struct mb_config *c, const struct mb_tenant_config *tc, struct tenant *t);
