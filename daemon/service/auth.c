/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <grp.h>
#include <libcgroup.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "delegate.h"
#include "guard.h"
#include "macros.h"

#define AUTH_REASON_MAX_BYTES 1024
#define AUTH_NAME_MAX_BYTES 64

/* libcgroup keeps global tables; serialise our calls into it. */
static pthread_mutex_t cgroup_lock = PTHREAD_MUTEX_INITIALIZER;
static bool cgroup_ready;

void auth_setup(void) {
        if (cgroup_init() == 0)
                cgroup_ready = true;
}

int auth_peer_from_socket(int fd, struct auth_peer *ret) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        int pidfd = -1, r;

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        *ret = (struct auth_peer) {
                .pid = cred.pid,
                .uid = cred.uid,
                .gid = cred.gid,
                .pidfd = -1,
        };
        /* The process that connected, as a pidfd (SO_PEERPIDFD, or
         * pidfd_open() with its credentials checked). */
        r = guard_peer_pidfd(fd, cred.pid, cred.uid, cred.gid, &pidfd);
        if (r < 0)
                return r;
        ret->pidfd = pidfd;
        return 0;
}

void auth_peer_done(struct auth_peer *p) {
        if (p->pidfd >= 0)
                close(p->pidfd);
        p->pidfd = -1;
        free(p->groups);
        p->groups = NULL;
        free(p->cgroup);
        p->cgroup = NULL;
}

int auth_peer_confirm(const struct auth_peer *p) {
        return guard_pidfd_exited(p->pidfd) ? -ESRCH : 0;
}

/* /proc/PID/cgroup: the memory controller's line, else the unified "0::". */
static int cgroup_from_proc(pid_t pid, char **ret) {
        _cleanup_(fclosep) FILE *f = NULL;
        _cleanup_(freep) char *line = NULL, *unified = NULL;
        char path[64];
        size_t n = 0;

        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? -ESRCH : -errno;

        while (getline(&line, &n, f) > 0) {
                char *ctrl, *cg;

                line[strcspn(line, "\n")] = 0;
                ctrl = strchr(line, ':');
                if (!ctrl)
                        continue;
                ctrl++;
                cg = strchr(ctrl, ':');
                if (!cg)
                        continue;
                *cg++ = 0;
                if (*ctrl == 0) {
                        free(unified);
                        unified = strdup(cg);
                        if (!unified)
                                return -ENOMEM;
                        continue;
                }
                for (char *tok = ctrl, *save = NULL; (tok = strtok_r(tok, ",", &save)); tok = NULL)
                        if (strcmp(tok, "memory") == 0) {
                                char *r = strdup(cg);
                                if (!r)
                                        return -ENOMEM;
                                *ret = r;
                                return 0;
                        }
        }
        if (!unified)
                return -ENOENT;
        *ret = TAKE_PTR(unified);
        return 0;
}

int auth_peer_cgroup(struct auth_peer *p, const char **ret) {
        char *cg = NULL;
        int r = -ENOENT;

        if (p->cgroup_read) {
                *ret = p->cgroup;
                return p->cgroup ? 0 : -ENOENT;
        }

        if (cgroup_ready) {
                pthread_mutex_lock(&cgroup_lock);
                /* The memory controller's hierarchy on v1; libcgroup maps it
                 * to the unified hierarchy on a v2-only system. */
                r = cgroup_get_current_controller_path(p->pid, "memory", &cg);
                pthread_mutex_unlock(&cgroup_lock);
                r = r == 0 && cg ? 0 : -ENOENT;
        }
        if (r < 0) {
                free(cg);
                cg = NULL;
                r = cgroup_from_proc(p->pid, &cg);
                if (r < 0)
                        return r;
        }
        if (cg[0] == 0) {
                free(cg);
                cg = strdup("/");
                if (!cg)
                        return -ENOMEM;
        }
        r = auth_peer_confirm(p);
        if (r < 0) {
                free(cg);
                return r;
        }
        p->cgroup = cg;
        p->cgroup_read = true;
        *ret = cg;
        return 0;
}

static int peer_read_groups(struct auth_peer *p) {
        _cleanup_(fclosep) FILE *f = NULL;
        _cleanup_(freep) char *line = NULL;
        char path[64];
        size_t n = 0;

        if (p->groups_read)
                return 0;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) p->pid);
        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? -ESRCH : -errno;
        while (getline(&line, &n, f) > 0) {
                char *s, *end;
                size_t alloc = 0;

                if (strncmp(line, "Groups:", 7) != 0)
                        continue;
                for (s = line + 7;;) {
                        unsigned long g;

                        while (*s == ' ' || *s == '\t')
                                s++;
                        if (*s == 0 || *s == '\n')
                                break;
                        errno = 0;
                        g = strtoul(s, &end, 10);
                        if (end == s || errno != 0)
                                break;
                        s = end;
                        if (p->ngroups == alloc) {
                                gid_t *ng;
                                alloc = MB_MAX(alloc * 2, (size_t) 8);
                                ng = realloc(p->groups, alloc * sizeof(gid_t));
                                if (!ng)
                                        return -ENOMEM;
                                p->groups = ng;
                        }
                        p->groups[p->ngroups++] = (gid_t) g;
                }
                break;
        }
        p->groups_read = true;
        return auth_peer_confirm(p);
}

bool auth_cgroup_has_prefix(const char *cgroup, const char *prefix) {
        size_t n;

        if (!cgroup || !prefix)
                return false;
        /* Compare without trailing slashes: "/a/" means "/a". */
        n = strlen(prefix);
        while (n > 1 && prefix[n - 1] == '/')
                n--;
        if (n == 1 && prefix[0] == '/')
                return cgroup[0] == '/';
        if (strncmp(cgroup, prefix, n) != 0)
                return false;
        return cgroup[n] == 0 || cgroup[n] == '/';
}

bool auth_tenant_has_rules(const struct tenant *t) {
        return t->n_allow_users > 0 || t->n_allow_groups > 0 || t->cgroup;
}

static void append(char *buf, size_t size, size_t *pos, const char *fmt, ...) _printf_(4, 5);
static void append(char *buf, size_t size, size_t *pos, const char *fmt, ...) {
        va_list ap;
        int k;

        if (*pos >= size)
                return;
        va_start(ap, fmt);
        k = vsnprintf(buf + *pos, size - *pos, fmt, ap);
        va_end(ap);
        if (k > 0)
                *pos = MB_MIN(*pos + (size_t) k, size - 1);
}

static void user_name(uid_t uid, char *buf, size_t size) {
        char tmp[1024];
        struct passwd pw, *res = NULL;

        if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
                snprintf(buf, size, "%s", res->pw_name);
        else
                snprintf(buf, size, "%u", (unsigned) uid);
}

static void group_name(gid_t gid, char *buf, size_t size) {
        char tmp[1024];
        struct group gr, *res = NULL;

        if (getgrgid_r(gid, &gr, tmp, sizeof(tmp), &res) == 0 && res)
                snprintf(buf, size, "%s", res->gr_name);
        else
                snprintf(buf, size, "%u", (unsigned) gid);
}

/* The nearest strict ancestor of @t with a Delegate=, NULL when none. */
static const struct tenant *delegating_ancestor(const struct tenant *t) {
        for (const struct tenant *a = t->parent; a; a = a->parent)
                if (a->delegate.n_users > 0 || a->delegate.n_groups > 0)
                        return a;
        return NULL;
}

/* Delegate= on a strict ancestor names the peer's uid, gid or one of its
 * supplementary groups: those who manage the subtree may run clients in
 * it, as the owner of a delegated cgroup may move its own processes into
 * the cgroups below it.  1 when it does, 0 when not, or a negative errno. */
static int admit_delegate(struct auth_peer *p, const struct tenant *t) {
        bool groups = false;
        int r;

        if (!delegating_ancestor(t))
                return 0;
        for (const struct tenant *a = t->parent; a; a = a->parent)
                groups = groups || a->delegate.n_groups > 0;
        if (groups) {
                r = peer_read_groups(p);
                if (r < 0)
                        return r;
        }
        for (const struct tenant *a = t->parent; a; a = a->parent) {
                struct mb_caller c = { .uid = p->uid, .groups = p->groups, .ngroups = p->ngroups };
                struct mb_caller primary = { .uid = p->uid, .groups = &p->gid, .ngroups = 1 };

                if (mb_delegate_names(&a->delegate, &c) || mb_delegate_names(&a->delegate, &primary))
                        return 1;
        }
        return 0;
}

int auth_admit(struct auth_peer *p, const struct tenant *t, char **ret_reason) {
        char reason[AUTH_REASON_MAX_BYTES], name[AUTH_NAME_MAX_BYTES];
        const char *cg = NULL;
        size_t pos = 0;
        int r;

        if (p->uid == 0)
                return 0;

        for (size_t i = 0; i < t->n_allow_users; i++)
                if (t->allow_users[i] == p->uid)
                        return 0;

        if (t->n_allow_groups > 0) {
                r = peer_read_groups(p);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < t->n_allow_groups; i++) {
                        if (t->allow_groups[i] == p->gid)
                                return 0;
                        for (size_t j = 0; j < p->ngroups; j++)
                                if (t->allow_groups[i] == p->groups[j])
                                        return 0;
                }
        }

        r = admit_delegate(p, t);
        if (r != 0)
                return r < 0 ? r : 0;

        if (t->cgroup) {
                r = auth_peer_cgroup(p, &cg);
                if (r == -ESRCH)
                        return r;
                if (r >= 0 && auth_cgroup_has_prefix(cg, t->cgroup))
                        return 0;
        }

        user_name(p->uid, name, sizeof(name));
        append(reason, sizeof(reason), &pos, "uid %u (%s) is not allowed in tenant %s: ", (unsigned) p->uid, name,
               t->path);
        if (!auth_tenant_has_rules(t))
                append(reason, sizeof(reason), &pos,
                       "it has no AllowUsers=, AllowGroups= or Cgroup=, so only root may attach%s%s%s",
                       delegating_ancestor(t) ? ", and those Delegate= of " : "",
                       delegating_ancestor(t) ? delegating_ancestor(t)->path : "",
                       delegating_ancestor(t) ? " names" : "");
        if (t->n_allow_users > 0) {
                append(reason, sizeof(reason), &pos, "AllowUsers=");
                for (size_t i = 0; i < t->n_allow_users; i++) {
                        user_name(t->allow_users[i], name, sizeof(name));
                        append(reason, sizeof(reason), &pos, "%s%s", i ? " " : "", name);
                }
        }
        if (t->n_allow_groups > 0) {
                append(reason, sizeof(reason), &pos, "%sAllowGroups=", t->n_allow_users ? "; " : "");
                for (size_t i = 0; i < t->n_allow_groups; i++) {
                        group_name(t->allow_groups[i], name, sizeof(name));
                        append(reason, sizeof(reason), &pos, "%s%s", i ? " " : "", name);
                }
        }
        if (t->cgroup)
                append(reason, sizeof(reason), &pos, "%sCgroup=%s does not contain the client's cgroup %s",
                       t->n_allow_users || t->n_allow_groups ? "; " : "", t->cgroup, cg ? cg : "(unknown)");
        if (auth_tenant_has_rules(t) && delegating_ancestor(t))
                append(reason, sizeof(reason), &pos, "; Delegate= of %s does not name it",
                       delegating_ancestor(t)->path);

        *ret_reason = strdup(reason);
        if (!*ret_reason)
                return -ENOMEM;
        return -EACCES;
}
