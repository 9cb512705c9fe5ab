/* SPDX-License-Identifier: MIT */
/*
 * config-files.c - reading the configuration files for the pure parser
 * (daemon/core/config.c): the directory walk of tenants.d/, the checks that
 * keep odd entries (FIFOs, sockets, devices, directories, broken links) out,
 * and the NSS lookups of user and group names.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config-files.h"
#include "log.h"
#include "macros.h"

#define READ_CHUNK_BYTES 4096
#define CONFIG_FILE_MAX_BYTES (64U << 20) /* a larger "configuration file" is a mistake */
#define NSS_BUFFER_MAX_BYTES (1U << 20)

DEFINE_TRIVIAL_CLEANUP_FUNC(struct mb_config *, mb_config_free);

uint64_t mb_physical_memory(void) {
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

        if (pages <= 0 || size <= 0)
                return 0;
        return (uint64_t) pages * (uint64_t) size;
}

/* getpwnam_r() / getgrnam_r() of one AllowUsers=/AllowGroups= name. */
static int resolve_name_nss(const char *word, bool group, uint32_t *ret, void *userdata) {
        _cleanup_(freep) char *buf = NULL;
        long hint = sysconf(group ? _SC_GETGR_R_SIZE_MAX : _SC_GETPW_R_SIZE_MAX);
        size_t size = hint > 0 ? (size_t) hint : 1024;

        (void) userdata;
        for (;;) {
                int err;

                buf = malloc(size);
                if (!buf)
                        return -ENOMEM;

                if (group) {
                        struct group gr, *res = NULL;

                        err = getgrnam_r(word, &gr, buf, size, &res);
                        if (err == 0 && res) {
                                *ret = res->gr_gid;
                                return 0;
                        }
                } else {
                        struct passwd pw, *res = NULL;

                        err = getpwnam_r(word, &pw, buf, size, &res);
                        if (err == 0 && res) {
                                *ret = res->pw_uid;
                                return 0;
                        }
                }
                if (err == ERANGE && size < NSS_BUFFER_MAX_BYTES) {
                        free(TAKE_PTR(buf));
                        size *= 2;
                        continue;
                }
                /* "Not found" is 0 with no result, or one of these,
                 * depending on the NSS module (getpwnam_r(3)). */
                if (err == 0 || err == ENOENT || err == ESRCH || err == EBADF || err == EPERM)
                        return -ENOENT;
                return -err;
        }
}

void mb_config_env_system(struct mb_config_env *ret) {
        long size = sysconf(_SC_PAGESIZE);

        *ret = (struct mb_config_env) {
                .ram_bytes = mb_physical_memory(),
                .sys_page_size = size > 0 ? (uint64_t) size : 4096,
                .resolve_name = resolve_name_nss,
        };
}

static _printf_(2, 3) int set_error(char **ret_error, const char *fmt, ...) {
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(ret_error, fmt, ap);
        va_end(ap);
        if (n < 0)
                *ret_error = NULL;
        return 0;
}

/* What an entry that is not a regular file is, for the warning. */
static const char *odd_kind(mode_t mode) {
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

/*
 * Read all of @fd (open on @path) into *@buf (grown as needed, *@size
 * bytes allocated); *@ret_len bytes read.  A read error is "path: read
 * error: ...".
 */
static int read_all(int fd, const char *path, char **buf, size_t *size, size_t *ret_len, char **ret_error) {
        size_t len = 0;

        for (;;) {
                ssize_t n;

                if (*size - len < READ_CHUNK_BYTES) {
                        size_t want = MB_MAX(*size * 2, (size_t) 2 * READ_CHUNK_BYTES);
                        char *b;

                        if (want > CONFIG_FILE_MAX_BYTES + READ_CHUNK_BYTES) {
                                set_error(ret_error, "%s: larger than %u bytes", path, CONFIG_FILE_MAX_BYTES);
                                return -EFBIG;
                        }
                        b = realloc(*buf, want);
                        if (!b)
                                return -ENOMEM;
                        *buf = b;
                        *size = want;
                }
                n = read(fd, *buf + len, *size - len);
                if (n < 0) {
                        int r = -errno;

                        if (r == -EINTR)
                                continue;
                        set_error(ret_error, "%s: read error: %s", path, strerror(-r));
                        return r;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        *ret_len = len;
        return 0;
}

/*
 * Open @name in @dfd (@path in messages) for reading without ever blocking:
 * it is checked with stat() first, and opened with O_NONBLOCK so that a
 * FIFO swapped in between cannot block either; a link to a regular file is
 * followed.  Returns 1 with the descriptor in *@ret_fd, 0 when the entry
 * was skipped (with a warning), or a negative errno with *@ret_error set.
 */
static int open_tenant_file(int dfd, const char *name, const char *path, int *ret_fd, char **ret_error) {
        _cleanup_(closep) int fd = -1;
        struct stat st;

        if (fstatat(dfd, name, &st, 0) < 0) {
                int r = -errno;

                if (r == -ELOOP)
                        log_warning("%s: symbolic link loop, skipped", path);
                else if (r == -ENOENT)
                        log_warning("%s: dangling symbolic link, skipped", path);
                else
                        log_warning("%s: cannot stat: %s, skipped", path, strerror(-r));
                return 0;
        }
        if (!S_ISREG(st.st_mode)) {
                log_warning("%s: is %s, skipped", path, odd_kind(st.st_mode));
                return 0;
        }

        fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
                int r = -errno;

                if (r == -ENOENT || r == -ELOOP || r == -ENXIO) {
                        log_warning("%s: changed while being read (%s), skipped", path, strerror(-r));
                        return 0;
                }
                set_error(ret_error, "%s: %s", path, strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0) {
                int r = -errno;

                set_error(ret_error, "%s: %s", path, strerror(-r));
                return r;
        }
        if (!S_ISREG(st.st_mode)) {
                log_warning("%s: is %s, skipped", path, odd_kind(st.st_mode));
                return 0;
        }
        *ret_fd = TAKE_FD(fd);
        return 1;
}

static bool conf_name_ok(const char *name) {
        size_t n = strlen(name);

        return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".conf") == 0;
}

static int cmp_strp(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void names_free(char **names, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
}

/* tenants.d/ names ending in ".conf", sorted bytewise (lexical order that
 * does not depend on the locale); what they are is checked when they are
 * read.  -ENOENT when the directory is absent. */
static int list_conf_files(DIR *d, char ***ret, size_t *ret_n) {
        struct dirent *de;
        char **names = NULL;
        size_t n = 0, alloc = 0;

        while ((errno = 0, de = readdir(d))) {
                if (!conf_name_ok(de->d_name))
                        continue;
                if (n == alloc) {
                        size_t want = MB_MAX(alloc * 2, (size_t) 64);
                        char **a = reallocarray(names, want, sizeof(*names));

                        if (!a) {
                                names_free(names, n);
                                return -ENOMEM;
                        }
                        names = a;
                        alloc = want;
                }
                names[n] = strdup(de->d_name);
                if (!names[n]) {
                        names_free(names, n);
                        return -ENOMEM;
                }
                n++;
        }
        if (errno != 0) {
                int r = -errno;

                names_free(names, n);
                return r;
        }
        if (n > 1)
                qsort(names, n, sizeof(*names), cmp_strp);
        *ret = names;
        *ret_n = n;
        return 0;
}

/* membroker.conf: -ENOENT (no message) when absent; anything but a regular
 * file (or a directory, which fails at read() as it always did) is an
 * error. */
static int parse_broker_file(struct mb_config *c, const struct mb_config_env *env, const char *path, char **buf,
                             size_t *size, char **ret_error) {
        _cleanup_(closep) int fd = -1;
        struct stat st;
        size_t len = 0;
        int r;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
                r = -errno;
                if (r != -ENOENT)
                        set_error(ret_error, "%s: %s", path, strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                set_error(ret_error, "%s: %s", path, strerror(-r));
                return r;
        }
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
                set_error(ret_error, "%s: is %s, not a configuration file", path, odd_kind(st.st_mode));
                return -EINVAL;
        }
        r = read_all(fd, path, buf, size, &len, ret_error);
        if (r < 0)
                return r;
        return mb_config_parse_buffer(c, env, path, *buf, len, true, ret_error);
}

static int parse_tenants_dir(struct mb_config *c, const struct mb_config_env *env, const char *tdir, char **buf,
                             size_t *size, char **ret_error) {
        DIR *d;
        char **names = NULL;
        size_t n = 0;
        int r;

        d = opendir(tdir);
        if (!d) {
                r = -errno;
                if (r == -ENOENT || r == -ENOTDIR)
                        return 0;
                set_error(ret_error, "%s: %s", tdir, strerror(-r));
                return r;
        }
        r = list_conf_files(d, &names, &n);
        if (r < 0) {
                closedir(d);
                set_error(ret_error, "%s: %s", tdir, strerror(-r));
                return r;
        }

        for (size_t i = 0; i < n && r >= 0; i++) {
                _cleanup_(freep) char *file = NULL;
                _cleanup_(closep) int fd = -1;
                size_t len = 0;

                if (asprintf(&file, "%s/%s", tdir, names[i]) < 0) {
                        file = NULL;
                        r = -ENOMEM;
                        break;
                }
                r = open_tenant_file(dirfd(d), names[i], file, &fd, ret_error);
                if (r == 0)
                        c->nskipped++;
                if (r <= 0)
                        continue;
                r = read_all(fd, file, buf, size, &len, ret_error);
                if (r >= 0)
                        r = mb_config_parse_buffer(c, env, file, *buf, len, false, ret_error);
        }
        names_free(names, n);
        closedir(d);
        return r;
}

int mb_config_load(const char *dir, struct mb_config **ret, char **ret_error) {
        _cleanup_(mb_config_freep) struct mb_config *c = NULL;
        _cleanup_(freep) char *path = NULL, *tdir = NULL, *buf = NULL;
        struct mb_config_env env;
        struct stat st;
        size_t size = 0;
        int r;

        *ret_error = NULL;
        mb_config_env_system(&env);

        /* A mistyped --config-dir must not start a broker on defaults: the
         * directory has to exist (an empty one means the defaults). */
        if (stat(dir, &st) < 0) {
                r = -errno;
                set_error(ret_error, "%s: cannot use the configuration directory: %s", dir, strerror(-r));
                goto fail;
        }
        if (!S_ISDIR(st.st_mode)) {
                r = -ENOTDIR;
                set_error(ret_error, "%s: the configuration directory is not a directory", dir);
                goto fail;
        }

        r = mb_config_new(&env, &c);
        if (r < 0)
                goto fail;
        if (asprintf(&path, "%s/membroker.conf", dir) < 0 || asprintf(&tdir, "%s/tenants.d", dir) < 0) {
                r = -ENOMEM;
                goto fail;
        }

        r = parse_broker_file(c, &env, path, &buf, &size, ret_error);
        if (r < 0 && r != -ENOENT)
                goto fail;
        r = parse_tenants_dir(c, &env, tdir, &buf, &size, ret_error);
        if (r < 0)
                goto fail;
        r = mb_config_finish(c, ret_error);
        if (r < 0)
                goto fail;

        *ret = TAKE_PTR(c);
        return 0;

fail:
        if (!*ret_error)
                *ret_error = strdup(r == -ENOMEM ? "out of memory" : strerror(-r));
        return r;
}
