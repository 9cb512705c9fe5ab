/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macros.h"
#include "mb_limits.h"
#include "state.h"
#include "tenant.h"

#define STATE_HASH_BUCKETS_MIN 64u

struct state {
        char *dir;
        struct state_entry **buckets;
        size_t nbuckets;
        size_t nentries;
        bool runtime_dirty;
};

/* One parsed [Tenant] section. */
struct state_item {
        char *path;
        struct mb_limits limits;
        bool created;
        unsigned line;
};

static const struct mb_limits limits_unset = {
        .max = MB_LIMIT_UNSET,
        .high = MB_LIMIT_UNSET,
        .low = MB_LIMIT_UNSET,
        .min = MB_LIMIT_UNSET,
        .charge_batch = MB_LIMIT_UNSET,
        .pressure_target = MB_LIMIT_UNSET,
};

static bool limits_any(const struct mb_limits *l) {
        return l->max != MB_LIMIT_UNSET || l->high != MB_LIMIT_UNSET || l->low != MB_LIMIT_UNSET ||
               l->min != MB_LIMIT_UNSET || l->charge_batch != MB_LIMIT_UNSET || l->pressure_target != MB_LIMIT_UNSET;
}

void state_limits_merge(struct mb_limits *l, const struct mb_limits *top) {
        if (top->max != MB_LIMIT_UNSET)
                l->max = top->max;
        if (top->high != MB_LIMIT_UNSET)
                l->high = top->high;
        if (top->low != MB_LIMIT_UNSET)
                l->low = top->low;
        if (top->min != MB_LIMIT_UNSET)
                l->min = top->min;
        if (top->charge_batch != MB_LIMIT_UNSET)
                l->charge_batch = top->charge_batch;
        if (top->pressure_target != MB_LIMIT_UNSET)
                l->pressure_target = top->pressure_target;
}

/* Clear in @l every field that @top sets. */
static void limits_drop(struct mb_limits *l, const struct mb_limits *top) {
        if (top->max != MB_LIMIT_UNSET)
                l->max = MB_LIMIT_UNSET;
        if (top->high != MB_LIMIT_UNSET)
                l->high = MB_LIMIT_UNSET;
        if (top->low != MB_LIMIT_UNSET)
                l->low = MB_LIMIT_UNSET;
        if (top->min != MB_LIMIT_UNSET)
                l->min = MB_LIMIT_UNSET;
        if (top->charge_batch != MB_LIMIT_UNSET)
                l->charge_batch = MB_LIMIT_UNSET;
        if (top->pressure_target != MB_LIMIT_UNSET)
                l->pressure_target = MB_LIMIT_UNSET;
}

/* ---- the table ---- */

static uint64_t hash_path(const char *p) {
        uint64_t h = UINT64_C(1469598103934665603); /* FNV-1a */

        for (; *p; p++)
                h = (h ^ (uint8_t) *p) * UINT64_C(1099511628211);
        return h;
}

int state_new(const char *dir, struct state **ret) {
        struct state *s = calloc(1, sizeof(*s));

        if (!s)
                return -ENOMEM;
        s->nbuckets = STATE_HASH_BUCKETS_MIN;
        s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
        if (dir)
                s->dir = strdup(dir);
        if (!s->buckets || (dir && !s->dir)) {
                state_free(s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}

static void entry_free(struct state_entry *e) {
        if (!e)
                return;
        free(e->path);
        free(e);
}

void state_free(struct state *s) {
        if (!s)
                return;
        for (size_t i = 0; s->buckets && i < s->nbuckets; i++)
                while (s->buckets[i]) {
                        struct state_entry *e = s->buckets[i];
                        s->buckets[i] = e->next;
                        entry_free(e);
                }
        free(s->buckets);
        free(s->dir);
        free(s);
}

static struct state_entry **entry_slot(const struct state *s, const char *path) {
        struct state_entry **p = &s->buckets[hash_path(path) % s->nbuckets];

        for (; *p; p = &(*p)->next)
                if (strcmp((*p)->path, path) == 0)
                        break;
        return p;
}

const struct state_entry *state_get(const struct state *s, const char *path) {
        return *entry_slot(s, path);
}

static void table_grow(struct state *s) {
        size_t n = s->nbuckets * 2;
        struct state_entry **b = calloc(n, sizeof(*b));

        if (!b)
                return; /* longer chains, still correct */
        for (size_t i = 0; i < s->nbuckets; i++)
                while (s->buckets[i]) {
                        struct state_entry *e = s->buckets[i];
                        size_t k = hash_path(e->path) % n;

                        s->buckets[i] = e->next;
                        e->next = b[k];
                        b[k] = e;
                }
        free(s->buckets);
        s->buckets = b;
        s->nbuckets = n;
}

static int entry_get_or_add(struct state *s, const char *path, struct state_entry **ret) {
        struct state_entry **p = entry_slot(s, path), *e;

        if (*p) {
                *ret = *p;
                return 0;
        }
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->path = strdup(path);
        if (!e->path) {
                free(e);
                return -ENOMEM;
        }
        e->persisted = limits_unset;
        e->runtime = limits_unset;
        *p = e;
        s->nentries++;
        if (s->nentries > s->nbuckets * 2)
                table_grow(s);
        *ret = e;
        return 0;
}

/* Remove @e when no layer says anything about it any more. */
static void entry_gc(struct state *s, struct state_entry *e) {
        struct state_entry **p;

        if (e->created || limits_any(&e->persisted) || limits_any(&e->runtime))
                return;
        p = entry_slot(s, e->path);
        if (*p != e)
                return;
        *p = e->next;
        s->nentries--;
        entry_free(e);
}

int state_foreach(const struct state *s, int (*cb)(const struct state_entry *e, void *userdata), void *userdata) {
        for (size_t i = 0; i < s->nbuckets; i++)
                for (struct state_entry *e = s->buckets[i], *next; e; e = next) {
                        int r;

                        next = e->next;
                        r = cb(e, userdata);
                        if (r != 0)
                                return r;
                }
        return 0;
}

bool state_overlay(const struct state *s, const char *path, struct mb_limits *ret) {
        const struct state_entry *e = state_get(s, path);

        *ret = limits_unset;
        if (!e)
                return false;
        state_limits_merge(ret, &e->persisted);
        state_limits_merge(ret, &e->runtime);
        return limits_any(ret);
}

bool state_runtime_dirty(const struct state *s) {
        return s->runtime_dirty;
}

/* ---- text format ---- */

static int fmt_limit(FILE *f, const char *key, uint64_t v) {
        if (v == MB_LIMIT_UNSET)
                return 0;
        if (v == UINT64_MAX)
                return fprintf(f, "%s=max\n", key) < 0 ? -EIO : 0;
        return fprintf(f, "%s=%" PRIu64 "\n", key, v) < 0 ? -EIO : 0;
}

/* Write the entries of one layer to @f. */
static int write_layer(const struct state *s, FILE *f, bool runtime) {
        for (size_t i = 0; i < s->nbuckets; i++)
                for (const struct state_entry *e = s->buckets[i]; e; e = e->next) {
                        const struct mb_limits *l = runtime ? &e->runtime : &e->persisted;
                        bool created = runtime && e->created;

                        if (!limits_any(l) && !created)
                                continue;
                        fprintf(f, "[Tenant]\nPath=%s\n", e->path);
                        if (created)
                                fprintf(f, "Created=yes\n");
                        fmt_limit(f, "MemoryMax", l->max);
                        fmt_limit(f, "MemoryHigh", l->high);
                        fmt_limit(f, "MemoryLow", l->low);
                        fmt_limit(f, "MemoryMin", l->min);
                        fmt_limit(f, "ChargeBatch", l->charge_batch);
                        if (l->pressure_target != MB_LIMIT_UNSET) {
                                struct rightsize_target rt;
                                char buf[RIGHTSIZE_TARGET_STRING_MAX];

                                if (rightsize_target_unpack(l->pressure_target, &rt) == 0)
                                        fprintf(f, "MemoryPressureTarget=%s\n",
                                                rightsize_target_format(&rt, buf, sizeof(buf)));
                        }
                        fputc('\n', f);
                }
        return ferror(f) ? -EIO : 0;
}

static int parse_u64(const char *v, bool allow_max, uint64_t *ret) {
        char *end;
        unsigned long long x;

        if (allow_max && (strcmp(v, "max") == 0 || strcmp(v, "infinity") == 0)) {
                *ret = UINT64_MAX;
                return 0;
        }
        if (*v < '0' || *v > '9')
                return -EINVAL;
        errno = 0;
        x = strtoull(v, &end, 10);
        if (errno != 0 || *end != 0 || x >= MB_LIMIT_UNSET)
                return -EINVAL;
        *ret = x;
        return 0;
}

static void items_free(struct state_item *items, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(items[i].path);
        free(items);
}

static int set_error(char **ret_error, const char *what, unsigned line, const char *fmt, ...) _printf_(4, 5);
static int set_error(char **ret_error, const char *what, unsigned line, const char *fmt, ...) {
        if (ret_error) {
                char msg[256];
                va_list ap;

                va_start(ap, fmt);
                vsnprintf(msg, sizeof(msg), fmt, ap);
                va_end(ap);
                if (asprintf(ret_error, "%s:%u: %s", what, line, msg) < 0)
                        *ret_error = NULL;
        }
        return -EINVAL;
}

/* Check and close the section being read. */
static int item_finish(struct state_item *it, const char *what, char **ret_error) {
        char *norm = NULL;
        int r;

        if (!it->path)
                return set_error(ret_error, what, it->line, "%s", "[Tenant] section without Path=");
        r = tenant_path_normalize(it->path, &norm);
        if (r < 0)
                return set_error(ret_error, what, it->line, "invalid tenant path \"%s\"", it->path);
        free(it->path);
        it->path = norm;
        return 0;
}

/*
 * Parse @text (systemd-style: "[Tenant]" sections of Key=Value lines, '#'
 * and ';' comments, blank lines) into an array of items.  Created= only in
 * the runtime format.
 */
static int parse_text(const char *text, size_t len, bool runtime, const char *what, struct state_item **ret,
                      size_t *ret_n, char **ret_error) {
        struct state_item *items = NULL, *it = NULL;
        size_t n = 0;
        unsigned lineno = 0;
        const char *p = text, *end = text + len;
        int r;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t ll = nl ? (size_t) (nl - p) : (size_t) (end - p);
                _cleanup_(freep) char *line = strndup(p, ll);
                char *s, *eq, *key, *val, *t;

                p += ll + (nl ? 1 : 0);
                lineno++;
                if (!line) {
                        r = -ENOMEM;
                        goto fail;
                }
                s = line + strspn(line, " \t\r");
                /* Trailing whitespace and comments after whitespace. */
                for (t = s; *t; t++)
                        if ((*t == '#' || *t == ';') && t > s && (t[-1] == ' ' || t[-1] == '\t')) {
                                *t = 0;
                                break;
                        }
                for (t = s + strlen(s); t > s && (t[-1] == ' ' || t[-1] == '\t' || t[-1] == '\r'); t--)
                        t[-1] = 0;
                if (*s == 0 || *s == '#' || *s == ';')
                        continue;

                if (*s == '[') {
                        struct state_item *ni;

                        if (strcmp(s, "[Tenant]") != 0) {
                                r = set_error(ret_error, what, lineno, "unknown section %s", s);
                                goto fail;
                        }
                        if (it && (r = item_finish(it, what, ret_error)) < 0)
                                goto fail;
                        ni = realloc(items, (n + 1) * sizeof(*items));
                        if (!ni) {
                                r = -ENOMEM;
                                goto fail;
                        }
                        items = ni;
                        it = &items[n++];
                        *it = (struct state_item) { .limits = limits_unset, .line = lineno };
                        continue;
                }

                eq = strchr(s, '=');
                if (!eq) {
                        r = set_error(ret_error, what, lineno, "expected Key=Value, got \"%s\"", s);
                        goto fail;
                }
                *eq = 0;
                key = s;
                val = eq + 1;
                for (t = key + strlen(key); t > key && (t[-1] == ' ' || t[-1] == '\t'); t--)
                        t[-1] = 0;
                val += strspn(val, " \t");
                if (!it) {
                        r = set_error(ret_error, what, lineno, "%s= outside of a [Tenant] section", key);
                        goto fail;
                }

                if (strcmp(key, "Path") == 0) {
                        if (it->path) {
                                r = set_error(ret_error, what, lineno, "%s", "Path= given twice");
                                goto fail;
                        }
                        it->path = strdup(val);
                        if (!it->path) {
                                r = -ENOMEM;
                                goto fail;
                        }
                } else if (strcmp(key, "MemoryMax") == 0 || strcmp(key, "MemoryHigh") == 0 ||
                           strcmp(key, "MemoryLow") == 0 || strcmp(key, "MemoryMin") == 0) {
                        uint64_t v;

                        if (parse_u64(val, true, &v) < 0) {
                                r = set_error(ret_error, what, lineno, "invalid size \"%s\" (bytes or max)", val);
                                goto fail;
                        }
                        if (key[6] == 'M' && key[7] == 'a')
                                it->limits.max = v;
                        else if (key[6] == 'H')
                                it->limits.high = v;
                        else if (key[6] == 'L')
                                it->limits.low = v;
                        else
                                it->limits.min = v;
                } else if (strcmp(key, "ChargeBatch") == 0) {
                        uint64_t v;

                        if (parse_u64(val, false, &v) < 0 || v > MB_CHARGE_MAX_PAGES) {
                                r = set_error(ret_error, what, lineno, "invalid ChargeBatch= \"%s\"", val);
                                goto fail;
                        }
                        it->limits.charge_batch = v;
                } else if (strcmp(key, "MemoryPressureTarget") == 0) {
                        struct rightsize_target rt;
                        const char *why = NULL;

                        if (rightsize_target_parse(val, &rt, &why) < 0) {
                                r = set_error(ret_error, what, lineno, "invalid MemoryPressureTarget= \"%s\": %s", val,
                                              why);
                                goto fail;
                        }
                        it->limits.pressure_target = rightsize_target_pack(&rt);
                } else if (runtime && strcmp(key, "Created") == 0) {
                        if (strcmp(val, "yes") == 0)
                                it->created = true;
                        else if (strcmp(val, "no") == 0)
                                it->created = false;
                        else {
                                r = set_error(ret_error, what, lineno, "invalid Created= \"%s\"", val);
                                goto fail;
                        }
                } else {
                        r = set_error(ret_error, what, lineno, "unknown key %s", key);
                        goto fail;
                }
        }
        if (it && (r = item_finish(it, what, ret_error)) < 0)
                goto fail;
        *ret = items;
        *ret_n = n;
        return 0;

fail:
        items_free(items, n);
        return r;
}

/* Replace one layer with @items.  Allocation failures leave a consistent
 * (possibly partial) table; the caller reports them. */
static int apply_layer(struct state *s, struct state_item *items, size_t n, bool runtime) {
        int r = 0;

        /* Clear the layer... */
        for (size_t i = 0; i < s->nbuckets; i++)
                for (struct state_entry *e = s->buckets[i]; e; e = e->next) {
                        if (runtime) {
                                e->runtime = limits_unset;
                                e->created = false;
                        } else
                                e->persisted = limits_unset;
                }
        /* ...fill it... */
        for (size_t i = 0; i < n; i++) {
                struct state_entry *e;

                r = entry_get_or_add(s, items[i].path, &e);
                if (r < 0)
                        break;
                if (runtime) {
                        state_limits_merge(&e->runtime, &items[i].limits);
                        e->created = e->created || items[i].created;
                } else
                        state_limits_merge(&e->persisted, &items[i].limits);
        }
        /* ...and drop what is now empty. */
        for (size_t i = 0; i < s->nbuckets; i++)
                for (struct state_entry *e = s->buckets[i], *next; e; e = next) {
                        next = e->next;
                        entry_gc(s, e);
                }
        return r;
}

/* ---- the persisted layer on disk ---- */

/* What an entry that is not a regular file is, for the message. */
static const char *odd_kind(mode_t mode) {
        if (S_ISLNK(mode))
                return "a symbolic link";
        if (S_ISDIR(mode))
                return "a directory";
        if (S_ISFIFO(mode))
                return "a FIFO";
        if (S_ISSOCK(mode))
                return "a socket";
        if (S_ISCHR(mode) || S_ISBLK(mode))
                return "a device";
        return "not a regular file";
}

static _printf_(2, 3) void file_error(char **ret_error, const char *fmt, ...) {
        va_list ap;

        if (!ret_error)
                return;
        va_start(ap, fmt);
        if (vasprintf(ret_error, fmt, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
}

/*
 * Open @path for reading only when it is a regular file of at most
 * STATE_FILE_MAX_BYTES: the entry is looked at without following a link
 * (lstat), then opened with O_NOFOLLOW | O_NONBLOCK (a FIFO or a device
 * put there between the two neither blocks the open nor is followed) and
 * checked again on the descriptor.  Returns the descriptor, -ENOENT, or
 * -EPERM with *@ret_error naming the file and what it is (refused), or
 * another negative errno.
 */
static int open_state_file(const char *path, char **ret_error) {
        _cleanup_(closep) int fd = -1;
        struct stat st;

        if (lstat(path, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode)) {
                file_error(ret_error, "%s: is %s, not a state file", path, odd_kind(st.st_mode));
                return -EPERM;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
                if (errno == ELOOP) {
                        file_error(ret_error, "%s: is a symbolic link, not a state file", path);
                        return -EPERM;
                }
                return -errno;
        }
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode)) {
                file_error(ret_error, "%s: is %s, not a state file", path, odd_kind(st.st_mode));
                return -EPERM;
        }
        if (st.st_size > STATE_FILE_MAX_BYTES) {
                file_error(ret_error, "%s: %lld bytes, larger than the %u bytes a state file may have", path,
                           (long long) st.st_size, STATE_FILE_MAX_BYTES);
                return -EPERM;
        }
        return TAKE_FD(fd);
}

/* All of @fd, at most STATE_FILE_MAX_BYTES (a file that grows past it
 * while read is refused like one that was larger already). */
static int read_state_file(int fd, const char *path, char **ret, size_t *ret_len, char **ret_error) {
        _cleanup_(freep) char *buf = NULL;
        size_t len = 0, cap = 0;

        for (;;) {
                ssize_t k;

                if (len + 4096 + 1 > cap) {
                        char *nb;

                        cap = MB_MAX(cap * 2, (size_t) 8192);
                        nb = realloc(buf, cap);
                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                }
                k = read(fd, buf + len, cap - len - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                len += (size_t) k;
                if (len > STATE_FILE_MAX_BYTES) {
                        file_error(ret_error, "%s: larger than the %u bytes a state file may have", path,
                                   STATE_FILE_MAX_BYTES);
                        return -EPERM;
                }
        }
        buf[len] = 0;
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

int state_load_persisted(struct state *s, char **ret_error) {
        _cleanup_(freep) char *path = NULL, *text = NULL;
        _cleanup_(closep) int fd = -1;
        struct state_item *items = NULL;
        size_t len = 0, n = 0;
        int r;

        if (!s->dir)
                return 0;
        if (asprintf(&path, "%s/%s", s->dir, STATE_LIMITS_FILE) < 0)
                return -ENOMEM;
        fd = open_state_file(path, ret_error);
        if (fd == -ENOENT)
                return apply_layer(s, NULL, 0, false);
        if (fd >= 0) {
                r = read_state_file(fd, path, &text, &len, ret_error);
        } else {
                r = fd;
                fd = -1;
        }
        if (r == -EPERM) {
                /* Refused: the persisted layer is empty, as without the
                 * file; the caller says why. */
                r = apply_layer(s, NULL, 0, false);
                return r < 0 ? r : 1;
        }
        if (r < 0) {
                file_error(ret_error, "%s: cannot read: %s", path, strerror(-r));
                return r;
        }
        r = parse_text(text, len, false, path, &items, &n, ret_error);
        if (r < 0)
                return r;
        r = apply_layer(s, items, n, false);
        items_free(items, n);
        return r;
}

/* Write the persisted layer to STATE_DIR/limits.conf atomically. */
static int save_persisted(const struct state *s) {
        _cleanup_(freep) char *path = NULL, *tmp = NULL;
        _cleanup_(closep) int dfd = -1;
        FILE *f;
        int fd, r;

        if (!s->dir)
                return -EROFS;
        if (asprintf(&path, "%s/%s", s->dir, STATE_LIMITS_FILE) < 0 ||
            asprintf(&tmp, "%s/.%s.tmp", s->dir, STATE_LIMITS_FILE) < 0)
                return -ENOMEM;
        /* Whatever is in the temporary file's place (a FIFO would block an
         * open for writing) goes; the file is made anew. */
        (void) unlink(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        f = fdopen(fd, "w");
        if (!f) {
                r = -errno;
                close(fd);
                (void) unlink(tmp);
                return r;
        }
        fprintf(f, "# Tenant limits set with SetTenantLimits(..., runtime=false), written by\n"
                   "# membrokerd.  They apply over the configuration files; see membrokerd(8).\n\n");
        r = write_layer(s, f, false);
        if (r >= 0 && fflush(f) != 0)
                r = -errno;
        if (r >= 0 && fsync(fileno(f)) < 0)
                r = -errno;
        if (fclose(f) != 0 && r >= 0)
                r = -errno;
        if (r >= 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlink(tmp);
                return r;
        }
        dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0)
                (void) fsync(dfd);
        return 0;
}

/* ---- changes ---- */

int state_set_limits(struct state *s, const char *path, const struct mb_limits *l, bool runtime) {
        struct state_entry *e;
        struct mb_limits saved_p, saved_r;
        int r;

        if (!limits_any(l))
                return 0;
        if (!runtime && !s->dir)
                return -EROFS;
        r = entry_get_or_add(s, path, &e);
        if (r < 0)
                return r;
        saved_p = e->persisted;
        saved_r = e->runtime;
        if (runtime) {
                state_limits_merge(&e->runtime, l);
                s->runtime_dirty = true;
                return 0;
        }
        state_limits_merge(&e->persisted, l);
        r = save_persisted(s);
        if (r < 0) {
                e->persisted = saved_p;
                entry_gc(s, e);
                return r;
        }
        /* What was just set persistently is what applies now. */
        limits_drop(&e->runtime, l);
        if (memcmp(&saved_r, &e->runtime, sizeof(saved_r)) != 0)
                s->runtime_dirty = true;
        entry_gc(s, e);
        return 0;
}

int state_revert(struct state *s, const char *path, const struct mb_limits *fields, bool runtime_only) {
        struct state_entry *e = *entry_slot(s, path);
        struct mb_limits saved_p, saved_r;
        int r;

        if (!e)
                return 0;
        saved_p = e->persisted;
        saved_r = e->runtime;
        limits_drop(&e->runtime, fields);
        if (!runtime_only) {
                limits_drop(&e->persisted, fields);
                if (memcmp(&saved_p, &e->persisted, sizeof(saved_p)) != 0) {
                        if (!s->dir) {
                                e->persisted = saved_p;
                                e->runtime = saved_r;
                                return -EROFS;
                        }
                        r = save_persisted(s);
                        if (r < 0) {
                                e->persisted = saved_p;
                                e->runtime = saved_r;
                                return r;
                        }
                }
        }
        if (memcmp(&saved_r, &e->runtime, sizeof(saved_r)) != 0)
                s->runtime_dirty = true;
        r = memcmp(&saved_p, &e->persisted, sizeof(saved_p)) != 0 ||
            memcmp(&saved_r, &e->runtime, sizeof(saved_r)) != 0;
        entry_gc(s, e);
        return r;
}

int state_set_created(struct state *s, const char *path, bool created) {
        struct state_entry *e;
        int r;

        if (!created) {
                struct state_entry *x = *entry_slot(s, path);

                if (x && x->created) {
                        x->created = false;
                        s->runtime_dirty = true;
                        entry_gc(s, x);
                }
                return 0;
        }
        r = entry_get_or_add(s, path, &e);
        if (r < 0)
                return r;
        if (!e->created)
                s->runtime_dirty = true;
        e->created = true;
        return 0;
}

int state_forget(struct state *s, const char *path) {
        struct state_entry **p = entry_slot(s, path), *e = *p;
        bool had_persisted;

        if (!e)
                return 0;
        had_persisted = limits_any(&e->persisted);
        if (limits_any(&e->runtime) || e->created)
                s->runtime_dirty = true;
        *p = e->next;
        s->nentries--;
        entry_free(e);
        return had_persisted ? save_persisted(s) : 0;
}

int state_runtime_serialize(struct state *s, char **ret, size_t *ret_len) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f;
        int r;

        f = open_memstream(&buf, &len);
        if (!f)
                return -ENOMEM;
        r = write_layer(s, f, true);
        if (fclose(f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0) {
                free(buf);
                return r;
        }
        s->runtime_dirty = false;
        *ret = buf;
        *ret_len = len;
        return 0;
}

int state_runtime_parse(struct state *s, const char *text, size_t len, const char *what, char **ret_error) {
        struct state_item *items = NULL;
        size_t n = 0;
        int r;

        r = parse_text(text, len, true, what, &items, &n, ret_error);
        if (r < 0)
                return r;
        r = apply_layer(s, items, n, true);
        items_free(items, n);
        s->runtime_dirty = false;
        return r;
}
