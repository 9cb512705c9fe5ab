/* SPDX-License-Identifier: MIT */
/*
 * config.c - membroker.conf and tenants.d/ *.conf.
 *
 * Why libinih's ini_parse_stream() with our own reader, rather than
 * ini_parse() or a hand-written parser:
 *   - libinih does the INI splitting ([section], key=value, whitespace, ';'
 *     comments) and is the well-kept parser Debian ships (libinih-dev).
 *   - But its handler is not told the line number: the INI_HANDLER_LINENO
 *     option changes the handler's signature when libinih itself is built,
 *     and Debian's libinih1 is built without it, so defining it in our build
 *     would call the library with the wrong prototype.  ini_parse_stream()
 *     calls the reader exactly once per line and the handler synchronously
 *     for the line just read, so a reader that counts lines knows the line
 *     of every handler call: "file:line" for every error, with any libinih
 *     build.
 *   - The reader also sees every section header, which the handler does
 *     not (INI_CALL_HANDLER_ON_NEW_SECTION is another build-time option):
 *     two consecutive [Tenant] sections are two tenants, and an empty
 *     [Tenant] section is a "[Tenant] section without Path=".
 *   - The reader hands libinih lines without leading whitespace (so
 *     libinih's multi-line continuation, which systemd does not have, never
 *     applies), without "  # trailing comments" (docs/design.md writes them,
 *     libinih only knows ';'), and refuses lines libinih would truncate or
 *     not understand, with a precise message.
 *
 * Pure: the text comes from memory buffers, the facts of the machine (RAM,
 * page size) and the user/group lookups from the caller's struct
 * mb_config_env; reading the files, walking tenants.d/ and NSS live in the
 * daemon (daemon/manager/config-files.c).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include <ini.h>

#include "config.h"
#include "delegate.h"
#include "mb_size.h"
#include "macros.h"

#define MB_DEFAULT_CAPACITY_PERCENT 25
#define MB_DEFAULT_PAGE_SIZE_BYTES 4096ULL
#define MB_PAGE_SIZE_MAX_BYTES (1ULL << 30)
#define MB_DEFAULT_CHARGE_BATCH 64U
#define MB_DEFAULT_FLUSH_INTERVAL_SEC 2U
#define MB_FLUSH_INTERVAL_MAX_SEC 86400U
#define MB_WORKERS_MAX 1024U
#define MB_DEFAULT_RECLAIM_TIMEOUT_MSEC 250U
#define MB_DEFAULT_RIGHTSIZE_INTERVAL_MSEC 1000U
#define MB_RIGHTSIZE_INTERVAL_MAX_MSEC 3600000U
#define MB_RECLAIM_TIMEOUT_MAX_MSEC 3600000U
#define MB_DEFAULT_RESTART_GRACE_SEC 30U
#define MB_RESTART_GRACE_MAX_SEC 86400U
#define MB_FRAME_TIMEOUT_MAX_SEC 3600U

/* ---- small parsers ------------------------------------------------------ */

int mb_parse_size(const char *s, uint64_t ram_bytes, uint64_t *ret) {
        return mb_size_parse(s, ram_bytes, MB_SIZE_PERCENT | MB_SIZE_INFINITY, ret);
}

unsigned long mb_bytes_to_pages(uint64_t bytes, uint64_t page_size) {
        uint64_t pages;

        if (bytes == MB_LIMIT_MAX || page_size == 0)
                return (unsigned long) PAGE_COUNTER_MAX;
        pages = bytes / page_size;
        return pages > (uint64_t) PAGE_COUNTER_MAX ? (unsigned long) PAGE_COUNTER_MAX : (unsigned long) pages;
}

/* A decimal number without sign, spaces or suffix, within [min, max]. */
static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *ret) {
        unsigned long long v = 0;

        if (!isdigit((unsigned char) *s))
                return -EINVAL;
        for (; *s; s++) {
                if (!isdigit((unsigned char) *s))
                        return -EINVAL;
                v = v * 10 + (unsigned) (*s - '0');
                if (v > UINT32_MAX)
                        return -ERANGE;
        }
        if (v < min || v > max)
                return -ERANGE;
        *ret = (unsigned) v;
        return 0;
}

/* systemd's parse_boolean() for the spellings the documentation names. */
static int parse_boolean(const char *s) {
        static const char *const yes[] = { "1", "yes", "true", "on" };
        static const char *const no[] = { "0", "no", "false", "off" };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (strcasecmp(s, yes[i]) == 0)
                        return 1;
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (strcasecmp(s, no[i]) == 0)
                        return 0;
        return -EINVAL;
}

/* ---- defaults ----------------------------------------------------------- */

/* Capacity=25%, computed exactly as mb_parse_size() computes "25%". */
static uint64_t default_capacity_bytes(const struct mb_config_env *env) {
        return (uint64_t) ((unsigned __int128) env->ram_bytes * MB_DEFAULT_CAPACITY_PERCENT / 100);
}

static uint64_t env_page_size(const struct mb_config_env *env) {
        return env->sys_page_size > 0 ? env->sys_page_size : MB_DEFAULT_PAGE_SIZE_BYTES;
}

int mb_broker_config_defaults(const struct mb_config_env *env, struct mb_broker_config *ret) {
        uint64_t page = MB_MAX(MB_DEFAULT_PAGE_SIZE_BYTES, env_page_size(env));
        char *socket = strdup(MB_DEFAULT_SOCKET);

        if (!socket)
                return -ENOMEM;

        *ret = (struct mb_broker_config) {
                .capacity_bytes = default_capacity_bytes(env),
                .page_size = page,
                .charge_batch = MB_DEFAULT_CHARGE_BATCH,
                .socket_path = socket,
                .stats_flush_interval_sec = MB_DEFAULT_FLUSH_INTERVAL_SEC,
                .workers = 0,
                .reclaim_timeout_msec = MB_DEFAULT_RECLAIM_TIMEOUT_MSEC,
                .rightsize_interval_msec = MB_DEFAULT_RIGHTSIZE_INTERVAL_MSEC,
                .pressure_reclaim = false,
                .memory_recursiveprot = false,
                .restart_grace_sec = MB_DEFAULT_RESTART_GRACE_SEC,
                .max_connections_per_user = MB_DEFAULT_MAX_CONNECTIONS_PER_USER,
                .frame_timeout_sec = MB_DEFAULT_FRAME_TIMEOUT_SEC,
        };
        return 0;
}

void mb_broker_config_done(struct mb_broker_config *b) {
        free(b->socket_path);
        b->socket_path = NULL;
}

static void tenant_config_done(struct mb_tenant_config *tc) {
        free(tc->path);
        free(tc->allow_users);
        free(tc->allow_groups);
        free(tc->cgroup);
        mb_delegate_done(&tc->delegate);
        free(tc->file);
}

void mb_config_free(struct mb_config *c) {
        if (!c)
                return;
        mb_broker_config_done(&c->broker);
        for (size_t i = 0; i < c->ntenants; i++)
                tenant_config_done(&c->tenants[i]);
        free(c->tenants);
        free(c->index);
        free(c);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct mb_config *, mb_config_free);

/* ---- the parser --------------------------------------------------------- */

enum section {
        SECTION_NONE,
        SECTION_BROKER,
        SECTION_TENANT,
};

struct parse_ctx {
        const char *file; /* as reported in messages */
        const char *text; /* the file's contents */
        size_t len, pos;  /* bytes in text, start of the next line */
        bool broker_file; /* membroker.conf (vs. tenants.d/) */
        struct mb_config *config;
        const struct mb_config_env *env;

        unsigned line;     /* of the line handed to libinih last */
        char *buf;         /* the current line, NUL-terminated */
        size_t bufsize;

        enum section section;
        unsigned section_line;
        ssize_t tenant;    /* index of the [Tenant] being read, or -1 */

        /* Lines of the broker keys checked against each other at the end. */
        unsigned capacity_line, page_size_line, huge_pages_line;

        int r;             /* first error */
        char *error;       /* "file:line: reason" */
};

static _printf_(4, 0) void ctx_verror(struct parse_ctx *ctx, unsigned line, int r, const char *fmt,
                                      va_list ap) {
        _cleanup_(freep) char *msg = NULL;

        if (ctx->r < 0)
                return; /* keep the first error */
        ctx->r = r;
        if (vasprintf(&msg, fmt, ap) < 0) {
                msg = NULL;
                ctx->r = -ENOMEM;
                return;
        }
        if (line > 0) {
                if (asprintf(&ctx->error, "%s:%u: %s", ctx->file, line, msg) < 0)
                        ctx->error = NULL;
        } else if (asprintf(&ctx->error, "%s: %s", ctx->file, msg) < 0)
                ctx->error = NULL;
}

/* Record an error at the current line; returns 0 (libinih's "stop"). */
static _printf_(2, 3) int ctx_error(struct parse_ctx *ctx, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        ctx_verror(ctx, ctx->line, -EINVAL, fmt, ap);
        va_end(ap);
        return 0;
}

static _printf_(3, 4) int ctx_error_at(struct parse_ctx *ctx, unsigned line, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        ctx_verror(ctx, line, -EINVAL, fmt, ap);
        va_end(ap);
        return 0;
}

static int ctx_oom(struct parse_ctx *ctx) {
        if (ctx->r >= 0)
                ctx->r = -ENOMEM;
        return 0;
}

static struct mb_tenant_config *ctx_tenant(struct parse_ctx *ctx) {
        return ctx->tenant >= 0 ? &ctx->config->tenants[ctx->tenant] : NULL;
}

/* The end of a section (a new header or the end of the file). */
static void section_end(struct parse_ctx *ctx) {
        struct mb_tenant_config *tc = ctx_tenant(ctx);

        if (ctx->section == SECTION_TENANT && tc && !tc->path)
                ctx_error_at(ctx, ctx->section_line, "[Tenant] section without Path=");
        ctx->section = SECTION_NONE;
        ctx->tenant = -1;
}

static void section_begin(struct parse_ctx *ctx, const char *name) {
        section_end(ctx);
        if (ctx->r < 0)
                return;
        ctx->section_line = ctx->line;

        if (ctx->broker_file) {
                if (strcmp(name, "Broker") != 0) {
                        ctx_error(ctx, "unknown section [%s], expected [Broker]", name);
                        return;
                }
                ctx->section = SECTION_BROKER;
                return;
        }

        if (strcmp(name, "Tenant") != 0) {
                ctx_error(ctx, "unknown section [%s], expected [Tenant]", name);
                return;
        }

        struct mb_config *c = ctx->config;
        struct mb_tenant_config *tenants, *tc;

        if (c->ntenants == c->tenants_alloc) {
                /* Doubling: a copy per section would be quadratic. */
                size_t want = MB_MAX(c->tenants_alloc * 2, (size_t) 8);

                tenants = reallocarray(c->tenants, want, sizeof(*tenants));
                if (!tenants) {
                        ctx_oom(ctx);
                        return;
                }
                c->tenants = tenants;
                c->tenants_alloc = want;
        }
        tenants = c->tenants;
        tc = &tenants[c->ntenants];
        *tc = (struct mb_tenant_config) {
                .max = MB_LIMIT_MAX,
                .high = MB_LIMIT_MAX,
                .oom_policy = MB_OOM_FAIL,
                .line = ctx->line,
        };
        tc->file = strdup(ctx->file);
        c->ntenants++; /* counted before the check: mb_config_free() frees it */
        if (!tc->file) {
                ctx_oom(ctx);
                return;
        }
        ctx->tenant = (ssize_t) (c->ntenants - 1);
        ctx->section = SECTION_TENANT;
}

/*
 * The ini_reader: one physical line per call (see the comment at the top).
 * Returns @str filled with the cleaned line, or NULL at the end of the file
 * and after an error (libinih then stops).
 */
static char *config_reader(char *str, int num, void *stream) {
        struct parse_ctx *ctx = stream;
        ssize_t n;
        char *s, *e;

        if (ctx->r < 0)
                return NULL;

        if (ctx->pos >= ctx->len)
                goto end;
        {
                const char *start = ctx->text + ctx->pos, *nl;
                size_t avail = ctx->len - ctx->pos;

                nl = memchr(start, '\n', avail);
                n = (ssize_t) (nl ? (size_t) (nl - start) + 1 : avail);
                if ((size_t) n + 1 > ctx->bufsize) {
                        size_t size = MB_MAX((size_t) n + 1, (size_t) 256);
                        char *b = realloc(ctx->buf, size);

                        if (!b)
                                return ctx_oom(ctx), NULL;
                        ctx->buf = b;
                        ctx->bufsize = size;
                }
                memcpy(ctx->buf, start, (size_t) n);
                ctx->buf[n] = '\0';
                ctx->pos += (size_t) n;
        }
        ctx->line++;

        s = ctx->buf;
        if ((size_t) n != strlen(s))
                return ctx_error(ctx, "NUL byte in line"), NULL;
        if (ctx->line == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
                s += 3; /* UTF-8 byte order mark */

        while (*s == ' ' || *s == '\t')
                s++;
        e = s + strlen(s);
        if (*s == '#' || *s == ';')
                e = s; /* comment line: hand libinih an empty line */
        else
                /* A trailing comment starts at '#' after whitespace; ';'
                 * after whitespace is libinih's own inline comment. */
                for (char *p = s; *p; p++)
                        if ((*p == '#' || *p == ';') && p > s && (p[-1] == ' ' || p[-1] == '\t')) {
                                e = p;
                                break;
                        }
        while (e > s && isspace((unsigned char) e[-1]))
                e--;
        *e = '\0';

        /* libinih would cut a longer line and parse the rest as a line of
         * its own. */
        if (num <= 0 || (size_t) (e - s) >= (size_t) num)
                return ctx_error(ctx, "line too long (more than %d characters)", num > 0 ? num - 1 : 0),
                       NULL;

        if (*s == '[') {
                char *close = strchr(s, ']');

                if (!close)
                        return ctx_error(ctx, "missing ']' in section header"), NULL;
                if (close[1] != '\0')
                        return ctx_error(ctx, "unexpected text after section header"), NULL;
                *close = '\0';
                section_begin(ctx, s + 1);
                if (ctx->r < 0)
                        return NULL;
                *close = ']';
        } else if (*s) {
                char *eq = strchr(s, '='), *colon = strchr(s, ':');

                /* libinih also splits at ':'; systemd's syntax does not. */
                if (!eq || (colon && colon < eq))
                        return ctx_error(ctx, "expected Key=Value, a [Section] header or a comment"), NULL;
                if (eq == s)
                        return ctx_error(ctx, "missing key name before '='"), NULL;
                if (ctx->section == SECTION_NONE) {
                        while (eq > s && (eq[-1] == ' ' || eq[-1] == '\t'))
                                eq--;
                        *eq = '\0';
                        return ctx_error(ctx, "%s= outside of any section", s), NULL;
                }
        }

        memcpy(str, s, (size_t) (e - s) + 1);
        return str;

end:
        section_end(ctx);
        return NULL;
}

static int set_size(struct parse_ctx *ctx, const char *key, const char *value, uint64_t percent_of,
                    uint64_t dflt, uint64_t *ret) {
        if (!*value) {
                *ret = dflt;
                return 1;
        }
        if (mb_parse_size(value, percent_of, ret) < 0)
                return ctx_error(ctx, "bad size '%s' for %s= (bytes with K/M/G/T, a percentage, or infinity)",
                                 value, key);
        return 1;
}

/* @value one of the @n @names (empty: the first), its index in *@ret. */
static int set_choice(struct parse_ctx *ctx, const char *key, const char *value, const char *const *names, int n,
                      int *ret) {
        for (int i = 0; i < n; i++)
                if ((i == 0 && !*value) || strcmp(value, names[i]) == 0) {
                        *ret = i;
                        return 1;
                }
        if (n == 2)
                return ctx_error(ctx, "%s= must be %s or %s, not '%s'", key, names[0], names[1], value);
        return ctx_error(ctx, "%s= must be %s, %s or %s, not '%s'", key, names[0], names[1], names[2], value);
}

static int set_uint(struct parse_ctx *ctx, const char *key, const char *value, unsigned min,
                    unsigned max, unsigned dflt, unsigned *ret) {
        int r;

        if (!*value) {
                *ret = dflt;
                return 1;
        }
        r = parse_uint(value, min, max, ret);
        if (r == -ERANGE)
                return ctx_error(ctx, "%s=%s is out of range (%u..%u)", key, value, min, max);
        if (r < 0)
                return ctx_error(ctx, "bad number '%s' for %s=", value, key);
        return 1;
}

static int set_bool(struct parse_ctx *ctx, const char *key, const char *value, bool *ret) {
        int b;

        if (!*value) {
                *ret = false;
                return 1;
        }
        b = parse_boolean(value);
        if (b < 0)
                return ctx_error(ctx, "bad boolean '%s' for %s= (yes/no, true/false, on/off, 1/0)", value,
                                 key);
        *ret = b;
        return 1;
}

static int broker_key(struct parse_ctx *ctx, const char *key, const char *value) {
        struct mb_broker_config *b = &ctx->config->broker;

        if (strcmp(key, "Capacity") == 0) {
                uint64_t ram = ctx->env->ram_bytes, v;

                if (!*value)
                        v = default_capacity_bytes(ctx->env);
                else if (!set_size(ctx, key, value, ram, 0, &v))
                        return 0;
                if (v == MB_LIMIT_MAX)
                        return ctx_error(ctx, "Capacity= must be a size or a percentage of RAM, not '%s'", value);
                b->capacity_bytes = v;
                ctx->capacity_line = ctx->line;
                return 1;
        }

        if (strcmp(key, "PageSize") == 0) {
                uint64_t sys = env_page_size(ctx->env), v;

                if (!*value)
                        v = MB_MAX(MB_DEFAULT_PAGE_SIZE_BYTES, sys);
                else if (value[strlen(value) - 1] == '%' || mb_parse_size(value, 0, &v) < 0 ||
                         v == MB_LIMIT_MAX)
                        return ctx_error(ctx, "bad size '%s' for PageSize= (bytes with K/M/G/T)", value);
                if (v < sys || (v & (v - 1)) != 0 || v % sys != 0 || v > MB_PAGE_SIZE_MAX_BYTES)
                        return ctx_error(ctx,
                                         "PageSize=%s is not a power of two multiple of the system page size "
                                         "(%" PRIu64 " bytes) up to 1G",
                                         value, sys);
                b->page_size = v;
                ctx->page_size_line = ctx->line;
                return 1;
        }

        if (strcmp(key, "ChargeBatch") == 0)
                return set_uint(ctx, key, value, 1, MB_CHARGE_MAX_PAGES, MB_DEFAULT_CHARGE_BATCH,
                                &b->charge_batch);

        if (strcmp(key, "Socket") == 0) {
                const char *v = *value ? value : MB_DEFAULT_SOCKET;
                char *copy;

                if (v[0] != '/')
                        return ctx_error(ctx, "Socket=%s is not an absolute path", v);
                if (strlen(v) >= sizeof(((struct sockaddr_un *) NULL)->sun_path))
                        return ctx_error(ctx, "Socket= path is longer than %zu bytes",
                                         sizeof(((struct sockaddr_un *) NULL)->sun_path) - 1);
                copy = strdup(v);
                if (!copy)
                        return ctx_oom(ctx);
                free(b->socket_path);
                b->socket_path = copy;
                return 1;
        }

        if (strcmp(key, "StatsFlushIntervalSec") == 0)
                return set_uint(ctx, key, value, 1, MB_FLUSH_INTERVAL_MAX_SEC, MB_DEFAULT_FLUSH_INTERVAL_SEC,
                                &b->stats_flush_interval_sec);
        if (strcmp(key, "Workers") == 0)
                return set_uint(ctx, key, value, 0, MB_WORKERS_MAX, 0, &b->workers);
        if (strcmp(key, "ReclaimTimeoutMSec") == 0)
                return set_uint(ctx, key, value, 1, MB_RECLAIM_TIMEOUT_MAX_MSEC,
                                MB_DEFAULT_RECLAIM_TIMEOUT_MSEC, &b->reclaim_timeout_msec);
        if (strcmp(key, "RightSizeIntervalMSec") == 0)
                return set_uint(ctx, key, value, 10, MB_RIGHTSIZE_INTERVAL_MAX_MSEC,
                                MB_DEFAULT_RIGHTSIZE_INTERVAL_MSEC, &b->rightsize_interval_msec);
        if (strcmp(key, "RestartGraceSec") == 0)
                return set_uint(ctx, key, value, 1, MB_RESTART_GRACE_MAX_SEC, MB_DEFAULT_RESTART_GRACE_SEC,
                                &b->restart_grace_sec);
        if (strcmp(key, "MaxConnectionsPerUser") == 0) /* 0: no cap */
                return set_uint(ctx, key, value, 0, UINT32_MAX, MB_DEFAULT_MAX_CONNECTIONS_PER_USER,
                                &b->max_connections_per_user);
        if (strcmp(key, "FrameTimeoutSec") == 0)
                return set_uint(ctx, key, value, 1, MB_FRAME_TIMEOUT_MAX_SEC, MB_DEFAULT_FRAME_TIMEOUT_SEC,
                                &b->frame_timeout_sec);
        if (strcmp(key, "ArenaBacking") == 0)
                return set_choice(ctx, key, value, (const char *const[]) { "auto", "tmpfs", "memfd" }, 3,
                                  (int *) &b->arena_backing);
        if (strcmp(key, "HugePages") == 0) {
                ctx->huge_pages_line = ctx->line;
                return set_choice(ctx, key, value, (const char *const[]) { "no", "thp", "hugetlbfs" }, 3,
                                  (int *) &b->huge_pages);
        }
        if (strcmp(key, "PressureReclaim") == 0)
                return set_bool(ctx, key, value, &b->pressure_reclaim);
        if (strcmp(key, "MemoryRecursiveProtection") == 0)
                return set_bool(ctx, key, value, &b->memory_recursiveprot);

        return ctx_error(ctx, "unknown key %s= in section [Broker]", key);
}

/* Resolve one AllowUsers=/AllowGroups= word to an id: a decimal id is taken
 * as it is (like systemd's User=), a name is handed to the caller's
 * resolver (getpwnam_r()/getgrnam_r() in the daemon).  Returns 0, -ENOENT
 * for an unknown name, -EINVAL for a bad number, another negative errno when
 * the lookup itself failed. */
static int resolve_id(const struct mb_config_env *env, const char *word, bool group, uint32_t *ret) {
        unsigned v;

        if (isdigit((unsigned char) word[0])) {
                if (parse_uint(word, 0, UINT32_MAX - 1, &v) < 0)
                        return -EINVAL; /* (uid_t) -1 is "no id" */
                *ret = v;
                return 0;
        }
        if (!env->resolve_name)
                return -ENOENT;
        return env->resolve_name(word, group, ret, env->userdata);
}

static int set_ids(struct parse_ctx *ctx, const char *key, const char *value, bool group, uint32_t **ids,
                   size_t *n) {
        _cleanup_(freep) char *copy = NULL;
        char *save = NULL;

        if (!*value) {
                free(*ids);
                *ids = NULL;
                *n = 0;
                return 1;
        }

        copy = strdup(value);
        if (!copy)
                return ctx_oom(ctx);

        for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                uint32_t id = 0, *a;
                int r;

                r = resolve_id(ctx->env, w, group, &id);
                if (r == -ENOENT)
                        return ctx_error(ctx, "unknown %s '%s' in %s=", group ? "group" : "user", w, key);
                if (r == -EINVAL)
                        return ctx_error(ctx, "bad %s id '%s' in %s=", group ? "group" : "user", w, key);
                if (r == -ENOMEM)
                        return ctx_oom(ctx);
                if (r < 0)
                        return ctx_error(ctx, "cannot look up %s '%s' in %s=: %s", group ? "group" : "user", w,
                                         key, strerror(-r));

                a = reallocarray(*ids, *n + 1, sizeof(**ids));
                if (!a)
                        return ctx_oom(ctx);
                a[(*n)++] = id;
                *ids = a;
        }
        return 1;
}

_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t),
               "ids are 32 bit");

static int tenant_key(struct parse_ctx *ctx, const char *key, const char *value) {
        struct mb_tenant_config *tc = ctx_tenant(ctx);
        uint64_t capacity = ctx->config->broker.capacity_bytes;

        if (!tc)
                return ctx_oom(ctx); /* the section could not be started */

        if (strcmp(key, "Path") == 0) {
                char *p;
                int r;

                if (tc->path)
                        return ctx_error(ctx, "Path= set twice in one [Tenant] section");
                if (!*value)
                        return ctx_error(ctx, "Path= must not be empty");
                r = tenant_path_normalize(value, &p);
                if (r == -ENOMEM)
                        return ctx_oom(ctx);
                if (r < 0)
                        return ctx_error(ctx,
                                         "bad tenant path '%s' (components of [A-Za-z0-9_.-] separated by '/', "
                                         "at most %d deep)",
                                         value, TENANT_MAX_DEPTH);
                if (strcmp(p, "/") == 0) {
                        free(p);
                        return ctx_error(ctx, "Path=/ is the root tenant, its limit is Capacity= in membroker.conf");
                }
                tc->path = p;
                tc->line = ctx->line;
                return 1;
        }

        if (strcmp(key, "MemoryMax") == 0)
                return set_size(ctx, key, value, capacity, MB_LIMIT_MAX, &tc->max);
        if (strcmp(key, "MemoryHigh") == 0)
                return set_size(ctx, key, value, capacity, MB_LIMIT_MAX, &tc->high);
        if (strcmp(key, "MemoryLow") == 0)
                return set_size(ctx, key, value, capacity, 0, &tc->low);
        if (strcmp(key, "MemoryMin") == 0)
                return set_size(ctx, key, value, capacity, 0, &tc->min);
        if (strcmp(key, "ChargeBatch") == 0)
                return set_uint(ctx, key, value, 1, MB_CHARGE_MAX_PAGES, 0, &tc->charge_batch);
        if (strcmp(key, "MemoryPressureTarget") == 0) {
                const char *why = NULL;

                if (rightsize_target_parse(value, &tc->pressure_target, &why) < 0)
                        return ctx_error(ctx, "bad MemoryPressureTarget=%s: %s", value, why);
                return 1;
        }

        if (strcmp(key, "OOMPolicy") == 0)
                return set_choice(ctx, key, value, (const char *const[]) { "fail", "kill" }, 2,
                                  (int *) &tc->oom_policy);
        if (strcmp(key, "OOMGroup") == 0)
                return set_bool(ctx, key, value, &tc->oom_group);
        if (strcmp(key, "OverrunPolicy") == 0)
                return set_choice(ctx, key, value, (const char *const[]) { "punch", "kill" }, 2,
                                  (int *) &tc->overrun_policy);

        if (strcmp(key, "AllowUsers") == 0)
                return set_ids(ctx, key, value, false, (uint32_t **) &tc->allow_users, &tc->n_allow_users);
        if (strcmp(key, "AllowGroups") == 0)
                return set_ids(ctx, key, value, true, (uint32_t **) &tc->allow_groups, &tc->n_allow_groups);

        if (strcmp(key, "Delegate") == 0) {
                _cleanup_(freep) char *why = NULL;
                int r = mb_delegate_parse(value, ctx->env->resolve_name, ctx->env->userdata,
                                          &tc->delegate, &why);

                if (r == -ENOMEM)
                        return ctx_oom(ctx);
                return r < 0 ? ctx_error(ctx, "%s", why) : 1;
        }

        if (strcmp(key, "DelegateMaxDescendants") == 0)
                return set_uint(ctx, key, value, 1, MB_DELEGATE_MAX_MAX_DESCENDANTS, 0,
                                &tc->delegate.max_descendants);

        if (strcmp(key, "Cgroup") == 0) {
                char *copy;
                size_t len;

                if (!*value) {
                        free(tc->cgroup);
                        tc->cgroup = NULL;
                        return 1;
                }
                if (value[0] != '/' || strstr(value, "/../") || strstr(value, "/./") ||
                    strcmp(value + strlen(value) - (strlen(value) >= 3 ? 3 : 0), "/..") == 0 ||
                    strpbrk(value, " \t"))
                        return ctx_error(ctx, "Cgroup=%s is not an absolute cgroup path", value);
                copy = strdup(value);
                if (!copy)
                        return ctx_oom(ctx);
                len = strlen(copy);
                while (len > 1 && copy[len - 1] == '/')
                        copy[--len] = '\0'; /* "/a/b/" is "/a/b" */
                free(tc->cgroup);
                tc->cgroup = copy;
                return 1;
        }

        return ctx_error(ctx, "unknown key %s= in section [Tenant]", key);
}

static int config_handler(void *user, const char *section, const char *name, const char *value) {
        struct parse_ctx *ctx = user;

        (void) section; /* ours (ctx->section) also tells [Tenant] sections apart */

        if (ctx->r < 0)
                return 0;
        switch (ctx->section) {
        case SECTION_BROKER:
                return broker_key(ctx, name, value);
        case SECTION_TENANT:
                return tenant_key(ctx, name, value);
        default:
                return ctx_error(ctx, "%s= outside of any section", name);
        }
}

int mb_config_new(const struct mb_config_env *env, struct mb_config **ret) {
        _cleanup_(mb_config_freep) struct mb_config *c = NULL;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        r = mb_broker_config_defaults(env, &c->broker);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

int mb_config_parse_buffer(struct mb_config *c, const struct mb_config_env *env, const char *file,
                           const char *text, size_t len, bool broker_file, char **ret_error) {
        struct parse_ctx ctx = {
                .file = file,
                .text = text,
                .len = len,
                .broker_file = broker_file,
                .config = c,
                .env = env,
                .tenant = -1,
        };
        int r;

        *ret_error = NULL;
        r = ini_parse_stream(config_reader, &ctx, config_handler, &ctx);
        free(ctx.buf);

        if (ctx.r >= 0 && r == -2)
                ctx.r = -ENOMEM;
        else if (ctx.r >= 0 && r != 0)
                /* Our reader refuses every line libinih would; keep a
                 * message should a libinih build disagree. */
                ctx_error_at(&ctx, r > 0 ? (unsigned) r : 0, "syntax error");

        if (ctx.r >= 0 && broker_file) {
                struct mb_broker_config *b = &c->broker;

                if (b->capacity_bytes < b->page_size)
                        ctx_error_at(&ctx, ctx.capacity_line ?: ctx.page_size_line,
                                     "Capacity= (%" PRIu64 " bytes) is smaller than one page (%" PRIu64 " bytes)",
                                     b->capacity_bytes, b->page_size);
                else if (b->capacity_bytes / b->page_size > (uint64_t) PAGE_COUNTER_MAX)
                        ctx_error_at(&ctx, ctx.capacity_line ?: ctx.page_size_line,
                                     "Capacity= (%" PRIu64 " bytes) is more than %ld pages", b->capacity_bytes,
                                     (long) PAGE_COUNTER_MAX);
                else if (b->huge_pages != MB_HUGE_PAGES_NO && b->page_size != MB_HUGE_PAGE_SIZE_BYTES)
                        ctx_error_at(&ctx, ctx.huge_pages_line,
                                     "HugePages=%s needs PageSize=2M (the size of a huge page), not %" PRIu64
                                     " bytes",
                                     b->huge_pages == MB_HUGE_PAGES_THP ? "thp" : "hugetlbfs", b->page_size);
        }

        if (ctx.r < 0) {
                *ret_error = ctx.error;
                return ctx.r;
        }
        free(ctx.error);
        return 0;
}
