/* SPDX-License-Identifier: MIT */
/*
 * guard.h - what keeps one process or one user from exhausting the daemon,
 * and what ties a session to the process that opened it.
 *
 *  - The peer's pidfd, taken when a connection is accepted: SO_PEERPIDFD
 *    (the process that called connect(), Linux 6.5), else pidfd_open() of
 *    the SO_PEERCRED pid with the process's credentials checked against
 *    the socket's, so that a pid reused meanwhile is not trusted.  The
 *    session ends when that process exits (conn.c watches the pidfd), and
 *    signals go through the pidfd, never to a pid that could be reused.
 *  - MaxConnectionsPerUser=: connections counted per uid across all workers
 *    (uid 0 exempt), like dbus-daemon's max_connections_per_user, from
 *    accept() on: a connection that has not said Hello yet counts too.
 *  - A global bound on the connections that have not finished their Hello
 *    (dbus-daemon's max_incomplete_connections): GUARD_INCOMPLETE_MAX, or a
 *    quarter of RLIMIT_NOFILE when that is less, so that descriptors
 *    remain for the sessions and the arenas whatever the users connecting.
 *    Both are checked on the main thread when the connection is accepted,
 *    before a worker sees it.
 *  - FrameTimeoutSec=: how long a connection may take to send its Hello,
 *    and to finish a frame it started (conn.c arms the timers).
 *  - A descriptor in reserve for the listener: when accept() fails for want
 *    of descriptors, the spare one is closed, a pending connection taken,
 *    told why and closed, and the spare reopened (the listener is paused
 *    meanwhile, manager.c), instead of spinning on accept() errors.
 *  - Log lines about refusals, timeouts and shed connections are rate
 *    limited (a burst per interval, like the kernel's printk_ratelimit())
 *    and carry a running count of their kind.
 *
 * Thread-safe unless said otherwise.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "core/config.h"
#include "macros.h"

/* The kinds of event counted and logged at a bounded rate. */
enum guard_event {
        GUARD_REFUSED_USER_CAP, /* over MaxConnectionsPerUser= */
        GUARD_REFUSED_DEAD,     /* the opener exited before the daemon took the connection */
        GUARD_REFUSED_OTHER,    /* the peer cannot be identified (no descriptor, ...) */
        GUARD_SHED,             /* accepted and closed for want of descriptors */
        GUARD_ACCEPT_ERROR,     /* accept() failed otherwise */
        GUARD_HELLO_TIMEOUT,    /* no Hello within FrameTimeoutSec= */
        GUARD_FRAME_TIMEOUT,    /* a frame not finished within FrameTimeoutSec= */
        GUARD_REFUSED_INCOMPLETE, /* over the bound on connections before their Hello */
        GUARD_OUTPUT_STALL,     /* a session that left its replies unread too long */
        _GUARD_EVENT_MAX,
};

struct guard;

/* -ENOMEM.  The spare descriptor is opened here (a failure to open it is
 * logged and tried again at the next shed). */
int guard_new(struct guard **ret);
void guard_free(struct guard *g);

/* Take MaxConnectionsPerUser= and FrameTimeoutSec= from @b (start-up and
 * every reload; applies to connections accepted from then on). */
void guard_configure(struct guard *g, const struct mb_broker_config *b);
unsigned guard_frame_timeout_sec(const struct guard *g);

/**
 * guard_peer_pidfd - the pidfd of the process at the other end of the
 * connected socket @sock, whose SO_PEERCRED is @pid, @uid, @gid.
 * SO_PEERPIDFD where the kernel has it; else pidfd_open(@pid), accepted only
 * when that process's effective uid and gid are the socket's (a pid reused
 * meanwhile by another user's process is refused).  Returns 0 with
 * *@ret_pidfd (close-on-exec; -1 when the kernel offers no pidfd at all,
 * before Linux 5.3), -ESRCH when the process has exited already, another
 * negative errno (-EMFILE, ...) otherwise.
 */
int guard_peer_pidfd(int sock, pid_t pid, uid_t uid, gid_t gid, int *ret_pidfd);

/* True when the process of @pidfd has exited (pidfd_poll() reports it
 * readable); false for -1. */
bool guard_pidfd_exited(int pidfd);

/**
 * guard_pidfd_kill - send @sig to the process of @pidfd with
 * pidfd_send_signal(): the very process the pidfd was taken for, never a
 * pid that could have been reused.  Returns 0 when sent, or when the
 * process has exited already; -EOPNOTSUPP when @pidfd is -1 or the kernel
 * lacks pidfd_send_signal(); another negative errno (-EPERM) otherwise.
 */
int guard_pidfd_kill(int pidfd, int sig);

/**
 * guard_user_get - count one more connection of @uid; -EUSERS (counting
 * nothing) when @uid already has MaxConnectionsPerUser= of them.  uid 0 is
 * counted but never refused.  Each success needs one guard_user_put().
 */
int guard_user_get(struct guard *g, uid_t uid, unsigned *ret_max);
void guard_user_put(struct guard *g, uid_t uid);

/* The bound on connections before their Hello, and its floor. */
#define GUARD_INCOMPLETE_MAX 1024u
#define GUARD_INCOMPLETE_MIN 16u

/* The bound in force (guard_configure() computes it) and the connections
 * admitted that have not finished their Hello. */
unsigned guard_max_incomplete(const struct guard *g);
unsigned guard_incomplete(const struct guard *g);

/**
 * guard_admit - admit the connection @fd just accepted: its peer's pid and
 * uid (SO_PEERCRED) in *@ret_pid, *@ret_uid, counted among the connections
 * before their Hello and in its user's MaxConnectionsPerUser=.  Returns 0;
 * -EAGAIN over the bound on connections before their Hello, -EUSERS over
 * the user's cap (*@ret_max is the bound that refused), or another negative
 * errno, counting nothing.  uid 0 is counted but never refused.  Each
 * success needs one guard_release(), and guard_hello_done() once the Hello
 * is through.
 */
int guard_admit(struct guard *g, int fd, pid_t *ret_pid, uid_t *ret_uid, unsigned *ret_max);
void guard_hello_done(struct guard *g);
/* The connection admitted for @uid is gone; @incomplete: before
 * guard_hello_done(). */
void guard_release(struct guard *g, uid_t uid, bool incomplete);

/*
 * What the daemon holds for its peers in replies they have not read yet
 * (dbus-daemon's max_outgoing_bytes, per session and in total): a session
 * stops being read while its own output is over GUARD_OUTPUT_SESSION_BYTES,
 * or over GUARD_OUTPUT_SHARE_BYTES while the output of all of them is over
 * GUARD_OUTPUT_TOTAL_BYTES; one whose output stays over the bound for
 * GUARD_OUTPUT_STALL_SEC is cut, its pages returned, in a log line that
 * says why.  The memory of a flood goes back to the system once its
 * sessions are gone (guard_output_freed()).
 */
#define GUARD_OUTPUT_SESSION_BYTES (128u * 1024u)
#define GUARD_OUTPUT_SHARE_BYTES (16u * 1024u)
#define GUARD_OUTPUT_TOTAL_BYTES (32u * 1024u * 1024u)
#define GUARD_OUTPUT_STALL_SEC 5u
/* Sessions whose output peaked over GUARD_TRIM_PEAK_BYTES are summed when
 * freed; past GUARD_TRIM_AFTER_BYTES, malloc_trim(). */
#define GUARD_TRIM_PEAK_BYTES (16u * 1024u)
#define GUARD_TRIM_AFTER_BYTES (4u * 1024u * 1024u)

/* @delta bytes more (or fewer) queued for some peer; any thread. */
void guard_output_add(struct guard *g, int64_t delta);
uint64_t guard_output_bytes(const struct guard *g);
/* A session whose output peaked at @peak_bytes was freed: give the memory
 * of floods back to the system (malloc_trim() once enough was freed). */
void guard_output_freed(struct guard *g, uint64_t peak_bytes);

/**
 * guard_refuse - tell the peer of the fresh connection @fd why it is
 * refused (Error{@code, @reason}, one non-blocking send) and close @fd.
 */
void guard_refuse(int fd, int code, const char *reason);

/**
 * guard_refuse_peer - refuse the fresh connection @fd of @pid/@uid because
 * of @error: -EUSERS (over MaxConnectionsPerUser=, which is @max), -EAGAIN
 * (@max connections before their Hello already), -ESRCH
 * (the process that connected has exited), anything else (it cannot be
 * identified).  The reason goes to the peer (guard_refuse()) and to the log
 * at a bounded rate.
 */
void guard_refuse_peer(struct guard *g, int fd, int error, pid_t pid, uid_t uid, unsigned max);

/**
 * guard_accept_failed - accept() on the listening socket @listen_fd failed
 * with @error (negative errno).  For want of descriptors (-EMFILE, -ENFILE)
 * or memory, shed what waits in the backlog with the spare descriptor
 * (each gets an Error naming the reason) and return true: the caller
 * pauses the listener briefly.  Logged at a bounded rate.  Main thread.
 */
bool guard_accept_failed(struct guard *g, int listen_fd, int error);

/* Count one @ev; log the message (notice) with the running count when the
 * rate limit allows. */
void guard_log(struct guard *g, enum guard_event ev, const char *fmt, ...) _printf_(3, 4);

/* How many @ev happened since the start (logged or suppressed), and the
 * event's key in the state dump ("hello_timeouts", ...). */
uint64_t guard_event_total(struct guard *g, enum guard_event ev);
const char *guard_event_key(enum guard_event ev);
