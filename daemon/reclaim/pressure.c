/* SPDX-License-Identifier: MIT */
/*
 * pressure.c - PSI trigger as a reclaim source (see pressure.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "macros.h"
#include "pressure.h"

#define PRESSURE_FIFO_READ_BYTES 4096

struct pressure {
        pressure_cb_t cb;
        void *userdata;
        char *path;
        char *trigger; /* armed on path; NULL for a FIFO */
        int fd;       /* the PSI file with its trigger, or the FIFO */
        int epfd;     /* epoll set holding fd for EPOLLPRI (PSI only) */
        bool fifo;
        struct event *ev;
};

static void pressure_cb(evutil_socket_t fd, short what, void *userdata) {
        struct pressure *p = userdata;

        if (p->fifo) {
                char buf[PRESSURE_FIFO_READ_BYTES];
                ssize_t n;
                bool any = false;

                /* Every write is one event; take all that is there. */
                while ((n = read(p->fd, buf, sizeof(buf))) > 0)
                        any = true;
                if (!any)
                        return;
        } else {
                struct epoll_event ev;
                int n;

                /* Clear the readiness; the outer poll may have consumed the
                 * trigger's event already, so any wake-up counts. */
                n = epoll_wait(p->epfd, &ev, 1, 0);
                if (n > 0 && (ev.events & (EPOLLERR | EPOLLHUP))) {
                        log_warning("memory pressure source %s went away (its cgroup was removed?); "
                                    "no more pressure reclaim",
                                    p->path);
                        event_del(p->ev);
                        return;
                }
        }
        log_info("memory pressure reported by %s: reclaiming from the tenants above their effective low", p->path);
        p->cb(p->userdata);
}

/* Open @path and arm @trigger on it.  Negative errno. */
static int psi_arm(const char *path, const char *trigger, int *ret_fd) {
        _cleanup_(closep) int fd = -1;
        size_t len = strlen(trigger) + 1; /* the kernel takes the string with its NUL */

        fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (write(fd, trigger, len) != (ssize_t) len)
                return errno ? -errno : -EIO;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The daemon's own cgroup's memory.pressure (cgroup v2), or NULL. */
static char *own_cgroup_pressure_path(void) {
        _cleanup_(fclosep) FILE *f = NULL;
        char line[4096];

        f = fopen("/proc/self/cgroup", "re");
        if (!f)
                return NULL;
        while (fgets(line, sizeof(line), f)) {
                char *p, *path = NULL;

                line[strcspn(line, "\n")] = 0;
                if (strncmp(line, "0::", 3) != 0)
                        continue;
                p = line + 3;
                if (asprintf(&path, "/sys/fs/cgroup%s%smemory.pressure", p,
                             p[0] && p[strlen(p) - 1] == '/' ? "" : "/") < 0)
                        return NULL;
                return path;
        }
        return NULL;
}

int pressure_new(struct event_base *base, const char *path, const char *trigger, pressure_cb_t cb, void *userdata,
                 struct pressure **ret) {
        _cleanup_(freep) struct pressure *p = NULL;
        struct epoll_event ev = { .events = EPOLLPRI };
        struct stat st;
        int r;

        if (!cb)
                return -EINVAL;
        if (!trigger)
                trigger = PRESSURE_DEFAULT_TRIGGER;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->cb = cb;
        p->userdata = userdata;
        p->fd = p->epfd = -1;

        if (path && stat(path, &st) == 0 && S_ISFIFO(st.st_mode)) {
                /* An injected source: held open both ways, so that writers
                 * may come and go without an EOF. */
                p->fifo = true;
                p->fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
                if (p->fd < 0)
                        return log_error_errno(-errno, "cannot open the pressure FIFO %s: %m", path);
                p->path = strdup(path);
                if (!p->path) {
                        close(p->fd);
                        return -ENOMEM;
                }
                p->ev = event_new(base, p->fd, EV_READ | EV_PERSIST, pressure_cb, p);
        } else {
                const char *tried = path ? path : PRESSURE_DEFAULT_PATH;

                r = psi_arm(tried, trigger, &p->fd);
                if (r < 0 && !path && (r == -EPERM || r == -EACCES || r == -EOPNOTSUPP || r == -ENOENT)) {
                        _cleanup_(freep) char *own = own_cgroup_pressure_path();
                        int k;

                        if (own) {
                                k = psi_arm(own, trigger, &p->fd);
                                if (k >= 0) {
                                        log_info("%s refused a trigger (%s); using %s", tried, strerror(-r), own);
                                        tried = own;
                                        r = 0;
                                }
                        }
                }
                if (r < 0)
                        return log_error_errno(r, "cannot arm the memory pressure trigger \"%s\" on %s: %m",
                                               trigger, tried);
                p->path = strdup(tried);
                p->trigger = strdup(trigger);
                if (!p->path || !p->trigger) {
                        free(p->path);
                        free(p->trigger);
                        close(p->fd);
                        return -ENOMEM;
                }
                p->epfd = epoll_create1(EPOLL_CLOEXEC);
                if (p->epfd < 0 || epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->fd, &ev) < 0) {
                        r = -errno;
                        pressure_free(TAKE_PTR(p));
                        return log_error_errno(r, "cannot watch the pressure trigger: %m");
                }
                p->ev = event_new(base, p->epfd, EV_READ | EV_PERSIST, pressure_cb, p);
        }
        if (!p->ev || event_add(p->ev, NULL) < 0) {
                pressure_free(TAKE_PTR(p));
                return -ENOMEM;
        }
        if (p->fifo)
                log_info("watching memory pressure: %s (a FIFO: every write is one event)", p->path);
        else
                log_info("watching memory pressure: %s, trigger \"%s\"", p->path, trigger);
        *ret = TAKE_PTR(p);
        return 0;
}

void pressure_free(struct pressure *p) {
        if (!p)
                return;
        if (p->ev)
                event_free(p->ev);
        if (p->epfd >= 0)
                close(p->epfd);
        if (p->fd >= 0)
                close(p->fd);
        free(p->path);
        free(p->trigger);
        free(p);
}

const char *pressure_path(const struct pressure *p) {
        return p->path;
}

const char *pressure_trigger(const struct pressure *p) {
        return p->trigger;
}
