/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "guard.h"
#include "log.h"
#include "macros.h"
#include "membroker.pb-c.h"
#include "wire.h"

#ifndef SO_PEERPIDFD
#  define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

/* At most this many lines of one kind per interval (a printk_ratelimit()
 * of each kind). */
#define GUARD_LOG_INTERVAL_USEC (10ULL * 1000 * 1000)
#define GUARD_LOG_BURST 5u
/* Connections shed from the backlog per failed accept(); the listener is
 * paused after each round. */
#define GUARD_SHED_BATCH 64u
#define GUARD_PROC_LINE_BYTES 256
#define GUARD_REASON_MAX_BYTES 256

struct guard_user {
        uid_t uid;
        unsigned n;
};

struct guard_ratelimit {
        uint64_t begin_usec;
        unsigned printed;
        uint64_t suppressed;
        uint64_t total;
};

struct guard {
        _Atomic unsigned max_per_user;      /* 0: no cap */
        _Atomic unsigned frame_timeout_sec;
        _Atomic unsigned max_incomplete;    /* connections before their Hello, all users */
        _Atomic unsigned incomplete;
        _Atomic uint64_t output_bytes;      /* replies queued, all sessions */
        _Atomic uint64_t untrimmed_bytes;   /* output freed since the last malloc_trim() */

        pthread_mutex_t lock; /* users[], limits[] */
        struct guard_user *users;
        size_t nusers, users_alloc;
        struct guard_ratelimit limits[_GUARD_EVENT_MAX];

        int spare_fd; /* main thread (the listener's error callback) */
};

/* Tests force the fallback of kernels without SO_PEERPIDFD with
 * MEMBROKERD_NO_PEERPIDFD=1; read once by guard_new(), before any worker. */
static bool no_peerpidfd;

static const char *const event_kind[_GUARD_EVENT_MAX] = {
        [GUARD_REFUSED_USER_CAP] = "connections refused over MaxConnectionsPerUser=",
        [GUARD_REFUSED_DEAD] = "connections of exited processes refused",
        [GUARD_REFUSED_OTHER] = "connections refused unidentified",
        [GUARD_SHED] = "connections shed for want of descriptors",
        [GUARD_ACCEPT_ERROR] = "accept() errors",
        [GUARD_HELLO_TIMEOUT] = "Hello timeouts",
        [GUARD_FRAME_TIMEOUT] = "unfinished frame timeouts",
        [GUARD_REFUSED_INCOMPLETE] = "connections refused with too many before their Hello",
        [GUARD_OUTPUT_STALL] = "sessions cut for not reading their replies",
};

/* The keys of the state dump's "connections" line. */
static const char *const event_key[_GUARD_EVENT_MAX] = {
        [GUARD_REFUSED_USER_CAP] = "refused_user_cap",
        [GUARD_REFUSED_DEAD] = "refused_exited",
        [GUARD_REFUSED_OTHER] = "refused_unidentified",
        [GUARD_SHED] = "shed",
        [GUARD_ACCEPT_ERROR] = "accept_errors",
        [GUARD_HELLO_TIMEOUT] = "hello_timeouts",
        [GUARD_FRAME_TIMEOUT] = "frame_timeouts",
        [GUARD_REFUSED_INCOMPLETE] = "refused_before_hello",
        [GUARD_OUTPUT_STALL] = "cut_unread",
};

const char *guard_event_key(enum guard_event ev) {
        return ev < _GUARD_EVENT_MAX ? event_key[ev] : NULL;
}

uint64_t guard_event_total(struct guard *g, enum guard_event ev) {
        uint64_t n;

        if (ev >= _GUARD_EVENT_MAX)
                return 0;
        pthread_mutex_lock(&g->lock);
        n = g->limits[ev].total;
        pthread_mutex_unlock(&g->lock);
        return n;
}

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static unsigned incomplete_bound(void);

static int spare_open(void) {
        return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

int guard_new(struct guard **ret) {
        struct guard *g = calloc(1, sizeof(*g));
        const char *e;

        if (!g)
                return -ENOMEM;
        pthread_mutex_init(&g->lock, NULL);
        atomic_init(&g->max_per_user, MB_DEFAULT_MAX_CONNECTIONS_PER_USER);
        atomic_init(&g->frame_timeout_sec, MB_DEFAULT_FRAME_TIMEOUT_SEC);
        atomic_init(&g->max_incomplete, incomplete_bound());
        atomic_init(&g->incomplete, 0);
        e = getenv("MEMBROKERD_NO_PEERPIDFD");
        no_peerpidfd = e && strcmp(e, "1") == 0;
        g->spare_fd = spare_open();
        if (g->spare_fd < 0)
                log_warning_errno(-errno, "cannot open /dev/null as a descriptor in reserve: %m");
        *ret = g;
        return 0;
}

void guard_free(struct guard *g) {
        if (!g)
                return;
        if (g->spare_fd >= 0)
                close(g->spare_fd);
        free(g->users);
        pthread_mutex_destroy(&g->lock);
        free(g);
}

/* GUARD_INCOMPLETE_MAX, or a quarter of the descriptors the daemon may
 * open, whichever is less (at least GUARD_INCOMPLETE_MIN). */
static unsigned incomplete_bound(void) {
        struct rlimit rl;
        uint64_t quarter;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
                return GUARD_INCOMPLETE_MAX;
        quarter = (uint64_t) rl.rlim_cur / 4;
        return (unsigned) MB_MAX(MB_MIN(quarter, (uint64_t) GUARD_INCOMPLETE_MAX), (uint64_t) GUARD_INCOMPLETE_MIN);
}

void guard_configure(struct guard *g, const struct mb_broker_config *b) {
        atomic_store(&g->max_per_user, b->max_connections_per_user);
        atomic_store(&g->frame_timeout_sec, MB_MAX(b->frame_timeout_sec, 1u));
        atomic_store(&g->max_incomplete, incomplete_bound());
}

unsigned guard_max_incomplete(const struct guard *g) {
        return atomic_load(&g->max_incomplete);
}

unsigned guard_incomplete(const struct guard *g) {
        return atomic_load(&g->incomplete);
}

unsigned guard_frame_timeout_sec(const struct guard *g) {
        return atomic_load(&g->frame_timeout_sec);
}

/* ---- the peer's pidfd ---- */

bool guard_pidfd_exited(int pidfd) {
        struct pollfd p = { .fd = pidfd, .events = POLLIN };

        return pidfd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP));
}

/* The effective uid and gid of @pid ("Uid:"/"Gid:" of /proc/PID/status,
 * second field). */
static int proc_effective_ids(pid_t pid, uid_t *ret_uid, gid_t *ret_gid) {
        _cleanup_(fclosep) FILE *f = NULL;
        char path[64], line[GUARD_PROC_LINE_BYTES];
        unsigned long r, e;
        bool have_uid = false, have_gid = false;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? -ESRCH : -errno;
        while (fgets(line, sizeof(line), f)) {
                if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2) {
                        *ret_uid = (uid_t) e;
                        have_uid = true;
                } else if (sscanf(line, "Gid: %lu %lu", &r, &e) == 2) {
                        *ret_gid = (gid_t) e;
                        have_gid = true;
                }
        }
        return have_uid && have_gid ? 0 : -EIO;
}

int guard_peer_pidfd(int sock, pid_t pid, uid_t uid, gid_t gid, int *ret_pidfd) {
        _cleanup_(closep) int pidfd = -1;
        socklen_t len = sizeof(pidfd);
        uid_t puid = 0;
        gid_t pgid = 0;
        int r;

        if (!no_peerpidfd) {
                if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0) {
                        if (guard_pidfd_exited(pidfd))
                                return -ESRCH;
                        *ret_pidfd = TAKE_FD(pidfd);
                        return 0;
                }
                pidfd = -1;
                /* pidfd_prepare(): no task any more behind the peer's pid. */
                if (errno == ESRCH || errno == EINVAL)
                        return -ESRCH;
                if (errno != ENOPROTOOPT && errno != EOPNOTSUPP && errno != ENODATA)
                        return -errno;
        }

        /* A peer in a pid namespace the daemon does not see: no pid to
         * open, the session ends with the socket. */
        if (pid <= 0) {
                *ret_pidfd = -1;
                return 0;
        }
        /* Before Linux 6.5: the pid SO_PEERCRED recorded at connect(), which
         * another process may have by now.  Take its pidfd first, then check
         * that this process runs with the socket's credentials and is still
         * alive after that check (so what was read is its own). */
#ifdef SYS_pidfd_open
        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
#else
        errno = ENOSYS;
#endif
        if (pidfd < 0) {
                if (errno == ENOSYS) {
                        *ret_pidfd = -1; /* Linux < 5.3: the socket alone ends the session */
                        return 0;
                }
                return errno == ESRCH ? -ESRCH : -errno;
        }
        if (fcntl(pidfd, F_SETFD, FD_CLOEXEC) < 0)
                return -errno;
        r = proc_effective_ids(pid, &puid, &pgid);
        if (r < 0)
                return r;
        if (puid != uid || pgid != gid) {
                log_debug("pid %d runs as %u:%u, its socket was opened as %u:%u: the pid was reused", (int) pid,
                          (unsigned) puid, (unsigned) pgid, (unsigned) uid, (unsigned) gid);
                return -ESRCH;
        }
        if (guard_pidfd_exited(pidfd))
                return -ESRCH;
        *ret_pidfd = TAKE_FD(pidfd);
        return 0;
}

int guard_pidfd_kill(int pidfd, int sig) {
        if (pidfd < 0)
                return -EOPNOTSUPP;
#ifdef SYS_pidfd_send_signal
        if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) == 0)
                return 0;
        if (errno == ESRCH)
                return 0; /* gone already: its pidfd is readable, its session ends */
        return errno == ENOSYS ? -EOPNOTSUPP : -errno;
#else
        return -EOPNOTSUPP;
#endif
}

/* ---- connections per user ---- */

static struct guard_user *user_find(struct guard *g, uid_t uid) {
        for (size_t i = 0; i < g->nusers; i++)
                if (g->users[i].uid == uid)
                        return &g->users[i];
        return NULL;
}

int guard_user_get(struct guard *g, uid_t uid, unsigned *ret_max) {
        unsigned max = atomic_load(&g->max_per_user);
        struct guard_user *u;
        int r = 0;

        *ret_max = max;
        pthread_mutex_lock(&g->lock);
        u = user_find(g, uid);
        if (!u) {
                if (g->nusers == g->users_alloc) {
                        size_t n = MB_MAX(g->users_alloc * 2, (size_t) 16);
                        struct guard_user *p = realloc(g->users, n * sizeof(*p));

                        if (!p) {
                                r = -ENOMEM;
                                goto out;
                        }
                        g->users = p;
                        g->users_alloc = n;
                }
                u = &g->users[g->nusers++];
                *u = (struct guard_user) { .uid = uid };
        }
        if (uid != 0 && max > 0 && u->n >= max)
                r = -EUSERS;
        else
                u->n++;
        if (u->n == 0)
                *u = g->users[--g->nusers];
out:
        pthread_mutex_unlock(&g->lock);
        return r;
}

void guard_user_put(struct guard *g, uid_t uid) {
        struct guard_user *u;

        pthread_mutex_lock(&g->lock);
        u = user_find(g, uid);
        if (u && u->n > 0 && --u->n == 0)
                *u = g->users[--g->nusers];
        pthread_mutex_unlock(&g->lock);
}

/* ---- admission at accept() ---- */

int guard_admit(struct guard *g, int fd, pid_t *ret_pid, uid_t *ret_uid, unsigned *ret_max) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        unsigned n;
        int r;

        *ret_pid = 0;
        *ret_uid = (uid_t) -1;
        *ret_max = 0;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        *ret_pid = cred.pid;
        *ret_uid = cred.uid;
        /* The global bound first: a connection over it is never counted
         * for its user.  uid 0 is exempt, as from the per-user cap. */
        n = atomic_fetch_add(&g->incomplete, 1);
        if (cred.uid != 0 && n >= atomic_load(&g->max_incomplete)) {
                atomic_fetch_sub(&g->incomplete, 1);
                *ret_max = atomic_load(&g->max_incomplete);
                return -EAGAIN;
        }
        r = guard_user_get(g, cred.uid, ret_max);
        if (r < 0) {
                atomic_fetch_sub(&g->incomplete, 1);
                return r;
        }
        return 0;
}

void guard_hello_done(struct guard *g) {
        atomic_fetch_sub(&g->incomplete, 1);
}

void guard_release(struct guard *g, uid_t uid, bool incomplete) {
        if (incomplete)
                guard_hello_done(g);
        guard_user_put(g, uid);
}

/* ---- output queued for peers ---- */

void guard_output_add(struct guard *g, int64_t delta) {
        if (delta >= 0)
                atomic_fetch_add(&g->output_bytes, (uint64_t) delta);
        else
                atomic_fetch_sub(&g->output_bytes, (uint64_t) -delta);
}

uint64_t guard_output_bytes(const struct guard *g) {
        return atomic_load(&g->output_bytes);
}

void guard_output_freed(struct guard *g, uint64_t peak_bytes) {
        uint64_t n;

        if (peak_bytes < GUARD_TRIM_PEAK_BYTES)
                return;
        n = atomic_fetch_add(&g->untrimmed_bytes, peak_bytes) + peak_bytes;
        if (n < GUARD_TRIM_AFTER_BYTES)
                return;
        /* One thread trims; the others go on.  glibc keeps what a flood's
         * buffers took in the arenas of the threads that freed it:
         * malloc_trim() gives the free pages of every arena back. */
        if (!atomic_compare_exchange_strong(&g->untrimmed_bytes, &n, 0))
                return;
#ifdef __GLIBC__
        (void) malloc_trim(0);
#endif
}

/* ---- rate-limited log lines ---- */

static void guard_logv(struct guard *g, enum guard_event ev, uint64_t count, const char *fmt, va_list ap) _printf_(4, 0);

static void guard_log_count(struct guard *g, enum guard_event ev, uint64_t count, const char *fmt, ...)
        _printf_(4, 5);
static void guard_log_count(struct guard *g, enum guard_event ev, uint64_t count, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        guard_logv(g, ev, count, fmt, ap);
        va_end(ap);
}

void guard_log(struct guard *g, enum guard_event ev, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        guard_logv(g, ev, 1, fmt, ap);
        va_end(ap);
}

/* ---- refusing and shedding ---- */

void guard_refuse(int fd, int code, const char *reason) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Error err = MB__ERROR__INIT;
        _cleanup_(freep) uint8_t *buf = NULL;
        size_t len;

        err.code = code;
        err.reason = (char *) reason;
        msg.body_case = MB__MSG__BODY_ERROR;
        msg.error = &err;
        /* A fresh socket's buffer is empty: this fits or nothing is lost. */
        if (wire_frame_pack(&msg, &buf, &len) == 0)
                (void) send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        close(fd);
}

void guard_refuse_peer(struct guard *g, int fd, int error, pid_t pid, uid_t uid, unsigned max) {
        char reason[GUARD_REASON_MAX_BYTES];
        enum guard_event ev = GUARD_REFUSED_OTHER;

        if (error == -EUSERS) {
                ev = GUARD_REFUSED_USER_CAP;
                snprintf(reason, sizeof(reason), "uid %u has %u connections already (MaxConnectionsPerUser=%u)",
                         (unsigned) uid, max, max);
        } else if (error == -EAGAIN) {
                ev = GUARD_REFUSED_INCOMPLETE;
                snprintf(reason, sizeof(reason),
                         "%u connections have not finished their Hello yet, the most membrokerd keeps; connect "
                         "again later",
                         max);
        } else if (error == -ESRCH) {
                ev = GUARD_REFUSED_DEAD;
                snprintf(reason, sizeof(reason), "the process that connected (pid %d) has exited", (int) pid);
        } else {
                snprintf(reason, sizeof(reason), "cannot identify the process that connected: %s", strerror(-error));
        }
        guard_log(g, ev, "refused a connection of pid %d, uid %u: %s", (int) pid, (unsigned) uid, reason);
        guard_refuse(fd, -error, reason);
}

bool guard_accept_failed(struct guard *g, int listen_fd, int error) {
        unsigned shed = 0;

        if (error != -EMFILE && error != -ENFILE && error != -ENOBUFS && error != -ENOMEM) {
                guard_log(g, GUARD_ACCEPT_ERROR, "accept() failed: %s", strerror(-error));
                return false;
        }
        /* The accept-and-close of libev's documentation: the descriptor in
         * reserve makes room for one connection at a time, which is told
         * why and closed, so that the backlog empties instead of the
         * listener firing again at once for the same connections. */
        while (shed < GUARD_SHED_BATCH) {
                int fd;

                if (g->spare_fd >= 0) {
                        close(g->spare_fd);
                        g->spare_fd = -1;
                }
                fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        break;
                guard_refuse(fd, EMFILE,
                             "membrokerd is out of file descriptors; connect again later");
                shed++;
                g->spare_fd = spare_open();
                if (g->spare_fd < 0)
                        break;
        }
        if (g->spare_fd < 0)
                g->spare_fd = spare_open();
        guard_log_count(g, GUARD_SHED, shed, "out of file descriptors (%s): shed %u pending connections%s",
                        strerror(-error), shed, g->spare_fd < 0 ? ", none in reserve" : "");
        return true;
}

/* printk_ratelimit(): a burst of lines per interval, the rest counted and
 * reported with the next line printed. */
static void guard_logv(struct guard *g, enum guard_event ev, uint64_t count, const char *fmt, va_list ap) {
        struct guard_ratelimit *rl = &g->limits[ev];
        char msg[512], note[96] = "";
        uint64_t now = now_usec(), total, suppressed = 0;
        bool print;

        pthread_mutex_lock(&g->lock);
        total = rl->total += count;
        if (rl->begin_usec == 0 || now - rl->begin_usec >= GUARD_LOG_INTERVAL_USEC) {
                suppressed = rl->suppressed;
                rl->begin_usec = now;
                rl->printed = 0;
                rl->suppressed = 0;
        }
        print = rl->printed < GUARD_LOG_BURST;
        if (print)
                rl->printed++;
        else
                rl->suppressed++;
        pthread_mutex_unlock(&g->lock);
        if (!print)
                return;

        vsnprintf(msg, sizeof(msg), fmt, ap);
        if (suppressed > 0)
                snprintf(note, sizeof(note), "; %" PRIu64 " similar lines suppressed before", suppressed);
        log_notice("%s (%s: %" PRIu64 " so far%s)", msg, event_kind[ev], total, note);
}
