/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "log.h"
#include "macros.h"
#include "service.h"

#define SERVICE_STATUS_MAX_BYTES 512

bool service_fdname_is_valid(const char *name) {
        size_t n = 0;

        if (!name || !*name)
                return false;
        for (const char *p = name; *p; p++, n++) {
                /* fdname_is_valid() in systemd: printable ASCII, no ':'. */
                if (*p < ' ' || *p >= 0x7f || *p == ':')
                        return false;
        }
        return n <= SERVICE_FDNAME_MAX;
}

int service_take_listen_fds(struct service_fd **ret, size_t *ret_n) {
        char **names = NULL;
        struct service_fd *fds;
        int n;

        *ret = NULL;
        *ret_n = 0;
        /* Unsets LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES and sets FD_CLOEXEC on
         * every passed descriptor. */
        n = sd_listen_fds_with_names(true, &names);
        if (n < 0)
                return n;
        if (n == 0) {
                free(names);
                return 0;
        }

        fds = calloc((size_t) n, sizeof(*fds));
        if (!fds) {
                for (int i = 0; i < n; i++) {
                        close(SD_LISTEN_FDS_START + i);
                        free(names ? names[i] : NULL);
                }
                free(names);
                return -ENOMEM;
        }
        for (int i = 0; i < n; i++) {
                fds[i].fd = SD_LISTEN_FDS_START + i;
                /* sd_listen_fds_with_names() fills "unknown" for nameless
                 * descriptors; be safe if a name is missing anyway. */
                fds[i].name = names && names[i] ? names[i] : strdup("unknown");
        }
        free(names);
        *ret = fds;
        *ret_n = (size_t) n;
        return 0;
}

void service_fds_free(struct service_fd *fds, size_t n) {
        for (size_t i = 0; fds && i < n; i++) {
                if (fds[i].fd >= 0)
                        close(fds[i].fd);
                free(fds[i].name);
        }
        free(fds);
}

bool service_notify_enabled(void) {
        const char *e = getenv("NOTIFY_SOCKET");

        return e && *e;
}

int service_notify(const char *state) {
        return sd_notify(false, state);
}

int service_notifyf(const char *fmt, ...) {
        _cleanup_(freep) char *s = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        return sd_notify(false, s);
}

void service_status(const char *fmt, ...) {
        char buf[SERVICE_STATUS_MAX_BYTES];
        char msg[SERVICE_STATUS_MAX_BYTES + 8];
        va_list ap;

        if (!service_notify_enabled())
                return;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        for (char *p = buf; *p; p++)
                if (*p == '\n')
                        *p = ' ';
        snprintf(msg, sizeof(msg), "STATUS=%s", buf);
        (void) sd_notify(false, msg);
}

int service_fdstore_add(int fd, const char *name) {
        char msg[SERVICE_FDNAME_MAX + 64];

        if (!service_fdname_is_valid(name))
                return -EINVAL;
        if (!service_notify_enabled())
                return 0;
        /* FDPOLL=0: a memfd never signals POLLHUP/POLLERR, so there is
         * nothing for the service manager to watch (systemd >= 246). */
        snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s\nFDPOLL=0", name);
        return sd_pid_notify_with_fds(0, false, msg, &fd, 1);
}

int service_fdstore_remove(const char *name) {
        char msg[SERVICE_FDNAME_MAX + 64];

        if (!service_fdname_is_valid(name))
                return -EINVAL;
        if (!service_notify_enabled())
                return 0;
        snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
        return sd_notify(false, msg);
}

static void watchdog_cb(evutil_socket_t fd, short what, void *userdata) {
        (void) sd_notify(false, "WATCHDOG=1");
}

int service_watchdog_start(struct event_base *base, struct event **ret, uint64_t *ret_usec) {
        struct event *ev;
        struct timeval tv;
        uint64_t usec = 0, half;
        int r;

        *ret = NULL;
        if (ret_usec)
                *ret_usec = 0;
        /* Keep the variables: sd_watchdog_enabled() is also how a later
         * check (and our tests) learn the interval. */
        r = sd_watchdog_enabled(false, &usec);
        if (r < 0)
                return log_warning_errno(r, "cannot read $WATCHDOG_USEC: %m");
        if (r == 0 || usec == 0)
                return 0;

        half = usec / 2;
        if (half == 0)
                half = 1;
        tv = (struct timeval) { .tv_sec = (time_t) (half / 1000000), .tv_usec = (suseconds_t) (half % 1000000) };
        ev = event_new(base, -1, EV_PERSIST, watchdog_cb, NULL);
        if (!ev)
                return -ENOMEM;
        if (event_add(ev, &tv) < 0) {
                event_free(ev);
                return -ENOMEM;
        }
        /* One ping at once: the interval starts when we were started. */
        (void) sd_notify(false, "WATCHDOG=1");
        *ret = ev;
        if (ret_usec)
                *ret_usec = usec;
        return 0;
}
