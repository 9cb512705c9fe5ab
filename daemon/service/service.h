/* SPDX-License-Identifier: MIT */
/*
 * service.h - membrokerd as a systemd service (docs/design.md): the
 * sd_notify(3) protocol (READY=1, STATUS=, RELOADING=1, STOPPING=1,
 * WATCHDOG=1), the file descriptor store (FDSTORE=1 / FDSTOREREMOVE=1 with
 * FDNAME=) and the descriptors handed back at start ($LISTEN_FDS,
 * $LISTEN_FDNAMES), all through libsystemd's sd-daemon.
 *
 * Without a service manager ($NOTIFY_SOCKET unset) every notification is a
 * no-op and service_fdstore_add() returns 0: the daemon then runs as before,
 * and its memory does not survive a restart.
 *
 * Thread-safety: the notification functions may be called from any thread
 * (each is one sendmsg(2) on a datagram socket); the watchdog belongs to
 * the main loop.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct event;

/* systemd's limit on an FDNAME= (fdname_is_valid()): at most 255 ASCII
 * characters, no control characters and no ':' (the separator of
 * $LISTEN_FDNAMES). */
#define SERVICE_FDNAME_MAX 255

/* A descriptor the service manager passed at start. */
struct service_fd {
        int fd;     /* -1 once taken */
        char *name; /* its FDNAME=, "unknown" when it had none */
};

/**
 * service_take_listen_fds - the descriptors passed with $LISTEN_FDS (the fd
 * store's contents, when this start follows a restart) with their
 * $LISTEN_FDNAMES.  Unsets the variables, so that nothing we start inherits
 * them, and marks the descriptors close-on-exec.  *@ret is an array of
 * *@ret_n entries (NULL and 0 when none were passed); free it with
 * service_fds_free().  0 or a negative errno.
 */
int service_take_listen_fds(struct service_fd **ret, size_t *ret_n);

/* Close the descriptors of @fds that were not taken (fd >= 0) and free the
 * array. */
void service_fds_free(struct service_fd *fds, size_t n);

/* True when a service manager listens for notifications ($NOTIFY_SOCKET). */
bool service_notify_enabled(void);

/* Send one notification (several "KEY=VALUE" lines); returns what
 * sd_notify() does: > 0 sent, 0 no service manager, < 0 error. */
int service_notify(const char *state);
int service_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* STATUS=... (a single line; newlines are replaced by spaces). */
void service_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/**
 * service_fdstore_add - hand @fd to the service manager's fd store under
 * @name (see SERVICE_FDNAME_MAX; -EINVAL otherwise) with FDPOLL=0, so that it
 * is kept even though it never becomes readable.  The manager gets its own
 * copy; the caller keeps @fd.  Returns 1 when sent, 0 without a service
 * manager, or a negative errno.
 */
int service_fdstore_add(int fd, const char *name);

/* Ask the service manager to close and forget every stored descriptor named
 * @name (FDSTOREREMOVE=1).  Same return values. */
int service_fdstore_remove(const char *name);

/* True when @name is acceptable as an FDNAME=. */
bool service_fdname_is_valid(const char *name);

/**
 * service_watchdog_start - when the service manager wants watchdog pings
 * (sd_watchdog_enabled(): $WATCHDOG_USEC, and $WATCHDOG_PID is ours), send
 * WATCHDOG=1 from @base's loop every half interval, as sd_watchdog_enabled(3)
 * recommends: the pings stop when the main loop stalls, and then the
 * service manager restarts us.  *@ret is the timer (NULL when no watchdog is
 * wanted; event_free() it).  *@ret_usec (may be NULL) the interval, 0 when
 * none.  0 or a negative errno.
 */
int service_watchdog_start(struct event_base *base, struct event **ret, uint64_t *ret_usec);
