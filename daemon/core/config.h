/* SPDX-License-Identifier: MIT */
/*
 * config.h - membroker.conf and tenants.d/NAME.conf (docs/design.md).
 *
 * systemd-style INI, parsed with libinih.  Every error is reported as
 * "file:line: what is wrong"; on error nothing is returned (no partial
 * configuration).  Pure: the parser reads memory buffers and asks its
 * caller (struct mb_config_env) for the machine's RAM and page size and for
 * user/group names; reading the files and NSS are the daemon's
 * (daemon/manager/config-files.h).
 *
 * Syntax (systemd's, plus the trailing comments docs/design.md shows):
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
#include "mb_limits.h" /* MB_LIMIT_MAX, MB_CHARGE_MAX_PAGES */
#include "tenant.h"

#ifdef MB_SYSCONFDIR
#  define MB_DEFAULT_CONFIG_DIR MB_SYSCONFDIR "/membroker" /* from configure --sysconfdir */
#else
#  define MB_DEFAULT_CONFIG_DIR "/etc/membroker"
#endif
#define MB_DEFAULT_SOCKET "/run/membroker/membroker.sock"
#define MB_DEFAULT_STATE_DIR "/var/lib/membroker"
#define MB_DEFAULT_MAX_CONNECTIONS_PER_USER 256U /* dbus-daemon's max_connections_per_user */
#define MB_DEFAULT_FRAME_TIMEOUT_SEC 10U

/* ArenaBacking=: where the tenants' arenas live. */
enum mb_arena_backing {
        MB_ARENA_BACKING_AUTO = 0, /* a tmpfs instance each when possible, else a memfd */
        MB_ARENA_BACKING_TMPFS,    /* a tmpfs instance each, or refuse to start */
        MB_ARENA_BACKING_MEMFD,    /* sealed memfds (bounded by the audit only) */
};

enum mb_huge_pages {
        MB_HUGE_PAGES_NO = 0,    /* 4 KiB shmem pages, whatever PageSize= */
        MB_HUGE_PAGES_THP,       /* shmem THP: each tmpfs instance huge=always */
        MB_HUGE_PAGES_HUGETLBFS, /* a memfd of 2 MiB hugetlb pages per tenant */
};

/* The PMD size of x86-64 and arm64 with 4 KiB pages: what a shmem THP and
 * a default hugetlb page are. */
#define MB_HUGE_PAGE_SIZE_BYTES (UINT64_C(2) << 20)

struct mb_broker_config {
        uint64_t capacity_bytes;       /* Capacity= resolved (bytes or % of RAM), default 25% */
        uint64_t page_size;            /* PageSize=, default 4096 */
        unsigned charge_batch;         /* ChargeBatch=, default 64 */
        char *socket_path;             /* Socket= */
        unsigned stats_flush_interval_sec; /* StatsFlushIntervalSec=, default 2 */
        unsigned workers;              /* Workers=, 0 = one per CPU */
        unsigned reclaim_timeout_msec; /* ReclaimTimeoutMSec=, default 250 */
        unsigned rightsize_interval_msec; /* RightSizeIntervalMSec=, default 1000: the right-sizing tick */
        bool pressure_reclaim;         /* PressureReclaim=, default no */
        bool memory_recursiveprot;     /* MemoryRecursiveProtection=, default no */
        enum mb_arena_backing arena_backing; /* ArenaBacking=, default auto */
        enum mb_huge_pages huge_pages; /* HugePages=, default no */
        unsigned restart_grace_sec;    /* RestartGraceSec=, default 30: how long pages kept across a
                                        * restart wait for their client (daemon/service/restart.h) */
        unsigned max_connections_per_user; /* MaxConnectionsPerUser=, default 256, 0 = no cap; uid 0 exempt */
        unsigned frame_timeout_sec;    /* FrameTimeoutSec=, default 10: to send the Hello after connecting,
                                        * and to finish a frame once its first byte came */
};

struct mb_tenant_config {
        char *path;
        uint64_t max, high, low, min; /* bytes; MB_LIMIT_MAX = max; low/min default 0 */
        unsigned charge_batch;        /* 0 = inherit */
        enum mb_oom_policy oom_policy;
        enum mb_overrun_policy overrun_policy; /* OverrunPolicy=, default punch */
        bool oom_group;               /* OOMGroup= (memory.oom.group), default no */
        struct rightsize_target pressure_target; /* MemoryPressureTarget=, default off */
        uid_t *allow_users;
        size_t n_allow_users;
        gid_t *allow_groups;
        size_t n_allow_groups;
        char *cgroup;
        struct mb_delegate delegate; /* Delegate= (daemon/core/delegate.h) */
        char *file; /* where it was defined */
        unsigned line;
};

struct mb_config {
        struct mb_broker_config broker;
        struct mb_tenant_config *tenants;
        size_t ntenants, tenants_alloc;
        size_t *index;     /* by path: open addressing of tenant index + 1 (mb_config_finish()) */
        size_t index_size; /* slots, a power of two */
        unsigned nskipped; /* entries of tenants.d/ skipped, with a warning, when the files were read */
};

/* What the pure parser needs to know of the machine. */
struct mb_config_env {
        uint64_t ram_bytes;     /* physical RAM: Capacity=N% and the default 25% */
        uint64_t sys_page_size; /* the system page size: PageSize= lower bound and default */
        /* Resolve an AllowUsers=/AllowGroups= name (never called for a
         * decimal id): 0 with *ret set, -ENOENT for an unknown name,
         * another negative errno when the lookup failed.  NULL: every name
         * is unknown. */
        int (*resolve_name)(const char *name, bool group, uint32_t *ret, void *userdata);
        void *userdata;
};


/**
 * mb_config_new - an empty configuration with the built-in broker defaults
 * for the machine @env describes (no tenants).  -ENOMEM.
 */
int mb_config_new(const struct mb_config_env *env, struct mb_config **ret);

/**
 * mb_config_parse_buffer - parse @len bytes of @text, the contents of
 * @file (the name used in messages), into @c: the [Broker] section when
 * @broker_file, else [Tenant] sections appended to c->tenants.  Files are
 * parsed in order (membroker.conf first, so that percentages of Capacity=
 * resolve), then mb_config_finish() once.  On error returns a negative
 * errno (-EINVAL for a bad file, -ENOMEM), sets *@ret_error to a malloc'ed
 * "file:line: reason" (NULL for -ENOMEM) and @c is only good to be freed.
 */
int mb_config_parse_buffer(struct mb_config *c, const struct mb_config_env *env, const char *file,
                           const char *text, size_t len, bool broker_file, char **ret_error);

/**
 * mb_config_finish - after the last file: refuse two [Tenant] sections with
 * the same Path= ("file:line: duplicate Path=..., first defined at
 * file:line" in *@ret_error, -EINVAL) and index the tenants by path for
 * mb_config_find_tenant().  O(n log n).  -EINVAL, -ENOMEM.
 */
int mb_config_finish(struct mb_config *c, char **ret_error);
void mb_config_free(struct mb_config *c);

/* The built-in defaults (no file) for the machine @env describes: Capacity
 * 25% of RAM, PageSize 4K (or the system page size when larger),
 * ChargeBatch 64, ...  @ret's socket_path is malloc'ed: free with
 * mb_broker_config_done().  -ENOMEM. */
int mb_broker_config_defaults(const struct mb_config_env *env, struct mb_broker_config *ret);
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

/* Find a tenant's configuration by path (any accepted spelling), NULL when
 * absent or before mb_config_finish().  O(length of @path). */
const struct mb_tenant_config *mb_config_find_tenant(const struct mb_config *c, const char *path);
/* The same for a path already normalised (tenant_path_normalize()). */
const struct mb_tenant_config *mb_config_find_normalized(const struct mb_config *c, const char *path);

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
 * AllowUsers/AllowGroups/Cgroup, Delegate; marks @t from_config.  -EINVAL, -ENOMEM. */
int mb_config_apply_tenant(const struct mb_config *c, const struct mb_tenant_config *tc, struct tenant *t);
