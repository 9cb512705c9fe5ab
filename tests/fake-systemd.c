/* SPDX-License-Identifier: MIT */
/*
 * fake-systemd - plays the part of systemd for one Type=notify service, so
 * that tests can check membrokerd's sd_notify(3) protocol and its restart
 * through the file descriptor store on a machine without systemd:
 *
 *   - a notify socket (AF_UNIX datagram, SO_PASSCRED) at DIR/notify, passed
 *     as $NOTIFY_SOCKET; notifications are accepted from the main process
 *     only (NotifyAccess=main);
 *   - FDSTORE=1 keeps the descriptors sent with it under their FDNAME=
 *     (default "stored"), at most --fdstore-max of them, skipping one that
 *     refers to an already stored file (systemd's same_fd()); FDSTOREREMOVE=1
 *     closes every descriptor of that FDNAME=;
 *   - every start passes the store as $LISTEN_FDS / $LISTEN_FDNAMES /
 *     $LISTEN_PID (descriptors 3...), like systemd after a restart; the store
 *     is kept until fake-systemd exits;
 *   - --watchdog-usec passes $WATCHDOG_USEC / $WATCHDOG_PID and sends SIGABRT
 *     (WatchdogSignal= default) when no WATCHDOG=1 came within the interval;
 *     like systemd's WatchdogSec=, the watchdog is activated when the
 *     start-up is completed (the first READY=1 of each start), not at the
 *     fork: how long the start-up may take is the test's own bound;
 *   - --restart N starts the command again (after 100 ms, RestartSec=
 *     default) when it exits, at most N times (Restart=always);
 *   - --notify-access-all accepts notifications from any process
 *     (NotifyAccess=all), for a daemon started through a wrapper;
 *   - --on-ready CMD runs "sh -c CMD" synchronously when the first READY=1 of
 *     each start arrives (not after reloads) and
 *     logs its exit status: tests check there that the socket and the bus
 *     are really up when the daemon says it is ready.
 *
 * Every event is one line in the --log file:
 *   start n=N pid=P listen_fds=K names=a:b:c
 *   notify pid=P fds=K READY=1 | STATUS=...           (lines joined by " | ")
 *   fdstore-add name=X fd-total=T | fdstore-dup name=X | fdstore-full name=X
 *   fdstore-remove name=X removed=K fd-total=T
 *   on-ready status=S
 *   watchdog-timeout pid=P
 *   exit pid=P status=exited:C | status=signal:S
 * The main pid is written to --pidfile at each start.  The service runs in
 * a process group of its own, which stands in for its cgroup: SIGTERM/SIGINT
 * stop the service (SIGTERM to the group, then SIGKILL after 20 s), and
 * what is left of it when the main process exits is killed and fake-systemd exits
 * with 0; when the restarts are used up it exits with the service's code.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOTIFY_BUFFER_BYTES (64u * 1024u)
#define NOTIFY_MAX_FDS 768 /* systemd's NOTIFY_FD_MAX */
#define RESTART_DELAY_MSEC 100
#define STOP_TIMEOUT_MSEC 20000

struct stored_fd {
        int fd;
        char *name;
        dev_t dev;
        ino_t ino;
};

static FILE *log_file;
static const char *pidfile;
static const char *on_ready;
static bool notify_access_all;
static uint64_t watchdog_usec;
static unsigned fdstore_max = 16384;
static struct stored_fd *store;
static size_t nstore;

static pid_t main_pid;
static uint64_t last_ping_usec;
static bool ready_seen; /* since the last start */

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vfprintf(log_file, fmt, ap);
        va_end(ap);
        fputc('\n', log_file);
        fflush(log_file);
}

static void die(const char *what) {
        fprintf(stderr, "fake-systemd: %s: %s\n", what, strerror(errno));
        exit(2);
}

/* ---- the fd store ---- */

static void store_add(int fd, const char *name) {
        struct stat st;

        if (fstat(fd, &st) < 0) {
                close(fd);
                return;
        }
        for (size_t i = 0; i < nstore; i++)
                if (store[i].dev == st.st_dev && store[i].ino == st.st_ino) {
                        logf_("fdstore-dup name=%s", name);
                        close(fd);
                        return;
                }
        if (nstore >= fdstore_max) {
                logf_("fdstore-full name=%s", name);
                close(fd);
                return;
        }
        store = realloc(store, (nstore + 1) * sizeof(*store));
        if (!store)
                die("realloc");
        (void) fcntl(fd, F_SETFD, FD_CLOEXEC);
        store[nstore++] = (struct stored_fd) { .fd = fd, .name = strdup(name), .dev = st.st_dev, .ino = st.st_ino };
        logf_("fdstore-add name=%s fd-total=%zu", name, nstore);
}

static void store_remove(const char *name) {
        size_t k = 0, removed = 0;

        for (size_t i = 0; i < nstore; i++) {
                if (strcmp(store[i].name, name) == 0) {
                        close(store[i].fd);
                        free(store[i].name);
                        removed++;
                        continue;
                }
                store[k++] = store[i];
        }
        nstore = k;
        logf_("fdstore-remove name=%s removed=%zu fd-total=%zu", name, removed, nstore);
}

/* ---- notifications ---- */

/* The value of KEY= in the newline-separated @msg, or NULL. */
static const char *msg_get(const char *msg, const char *key, char *buf, size_t size) {
        size_t kl = strlen(key);

        for (const char *p = msg; p && *p;) {
                const char *nl = strchr(p, '\n');
                size_t ll = nl ? (size_t) (nl - p) : strlen(p);

                if (ll > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
                        size_t vl = ll - kl - 1;
                        if (vl >= size)
                                vl = size - 1;
                        memcpy(buf, p + kl + 1, vl);
                        buf[vl] = 0;
                        return buf;
                }
                p = nl ? nl + 1 : NULL;
        }
        return NULL;
}

static void run_on_ready(void) {
        pid_t pid;
        int status;

        if (!on_ready)
                return;
        pid = fork();
        if (pid < 0)
                die("fork");
        if (pid == 0) {
                sigset_t all;

                sigemptyset(&all);
                sigprocmask(SIG_SETMASK, &all, NULL);
                execl("/bin/sh", "sh", "-c", on_ready, (char *) NULL);
                _exit(127);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        die("waitpid");
        logf_("on-ready status=%d", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

static void handle_notify(int sock) {
        static char buf[NOTIFY_BUFFER_BYTES + 1];
        union {
                char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * NOTIFY_MAX_FDS)];
                struct cmsghdr align;
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = NOTIFY_BUFFER_BYTES };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control) };
        int fds[NOTIFY_MAX_FDS];
        size_t nfds = 0;
        pid_t sender = 0;
        char line[NOTIFY_BUFFER_BYTES + 64], name[300];
        ssize_t n;

        n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return;
        buf[n] = 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                if (cm->cmsg_level != SOL_SOCKET)
                        continue;
                if (cm->cmsg_type == SCM_CREDENTIALS) {
                        struct ucred uc;
                        memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
                        sender = uc.pid;
                } else if (cm->cmsg_type == SCM_RIGHTS) {
                        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        memcpy(fds + nfds, CMSG_DATA(cm), k * sizeof(int));
                        nfds += k;
                }
        }

        /* NotifyAccess=main (or all: the process tree of the service,
         * e.g. a daemon started through strace) */
        if (main_pid == 0 || (sender != main_pid && !notify_access_all)) {
                logf_("notify-ignored pid=%d", (int) sender);
                for (size_t i = 0; i < nfds; i++)
                        close(fds[i]);
                return;
        }

        snprintf(line, sizeof(line), "notify pid=%d fds=%zu ", (int) sender, nfds);
        for (char *p = buf, *q = line + strlen(line); *p && q < line + sizeof(line) - 4; p++) {
                if (*p == '\n') {
                        if (p[1]) {
                                memcpy(q, " | ", 3);
                                q += 3;
                        }
                } else
                        *q++ = *p;
                *q = 0;
        }
        logf_("%s", line);

        if (msg_get(buf, "WATCHDOG", name, sizeof(name)) && strcmp(name, "1") == 0)
                last_ping_usec = now_usec();

        if (msg_get(buf, "FDSTORE", name, sizeof(name)) && strcmp(name, "1") == 0) {
                if (!msg_get(buf, "FDNAME", name, sizeof(name)))
                        snprintf(name, sizeof(name), "stored");
                for (size_t i = 0; i < nfds; i++)
                        store_add(fds[i], name);
                nfds = 0;
        }
        for (size_t i = 0; i < nfds; i++)
                close(fds[i]);

        if (msg_get(buf, "FDSTOREREMOVE", name, sizeof(name)) && strcmp(name, "1") == 0 &&
            msg_get(buf, "FDNAME", name, sizeof(name)))
                store_remove(name);

        /* The check runs at the first READY=1 of each start (the readiness
         * systemd waits for), not after reloads. */
        if (msg_get(buf, "READY", name, sizeof(name)) && strcmp(name, "1") == 0 && !ready_seen) {
                ready_seen = true;
                /* The start-up is complete: the watchdog runs from now. */
                last_ping_usec = now_usec();
                run_on_ready();
        }
}

/* ---- the service ---- */

static pid_t start(char **argv, const char *notify_path, unsigned n) {
        pid_t pid;
        FILE *f;
        char names[NOTIFY_BUFFER_BYTES];
        size_t off = 0;

        names[0] = 0;
        for (size_t i = 0; i < nstore && off < sizeof(names) - 1; i++)
                off += (size_t) snprintf(names + off, sizeof(names) - off, "%s%s", i ? ":" : "", store[i].name);

        pid = fork();
        if (pid < 0)
                die("fork");
        if (pid == 0) {
                sigset_t none;
                char num[32];
                int *tmp = calloc(nstore + 1, sizeof(int));

                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                /* The service's own process group stands in for its cgroup. */
                (void) setpgid(0, 0);
                /* Move the store to 3, 4, ... (through descriptors above the
                 * target range, so that nothing is overwritten). */
                for (size_t i = 0; i < nstore; i++) {
                        tmp[i] = fcntl(store[i].fd, F_DUPFD, (int) (3 + nstore));
                        if (tmp[i] < 0)
                                _exit(126);
                }
                for (size_t i = 0; i < nstore; i++) {
                        if (dup2(tmp[i], (int) (3 + i)) < 0)
                                _exit(126);
                        close(tmp[i]);
                }
                setenv("NOTIFY_SOCKET", notify_path, 1);
                if (nstore > 0) {
                        snprintf(num, sizeof(num), "%zu", nstore);
                        setenv("LISTEN_FDS", num, 1);
                        setenv("LISTEN_FDNAMES", names, 1);
                        snprintf(num, sizeof(num), "%d", (int) getpid());
                        setenv("LISTEN_PID", num, 1);
                } else {
                        unsetenv("LISTEN_FDS");
                        unsetenv("LISTEN_FDNAMES");
                        unsetenv("LISTEN_PID");
                }
                if (watchdog_usec > 0) {
                        snprintf(num, sizeof(num), "%llu", (unsigned long long) watchdog_usec);
                        setenv("WATCHDOG_USEC", num, 1);
                        snprintf(num, sizeof(num), "%d", (int) getpid());
                        setenv("WATCHDOG_PID", num, 1);
                }
                execvp(argv[0], argv);
                fprintf(stderr, "fake-systemd: cannot execute %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        (void) setpgid(pid, pid); /* also here: no window before the child's own call */
        main_pid = pid;
        ready_seen = false;
        last_ping_usec = now_usec();
        logf_("start n=%u pid=%d listen_fds=%zu names=%s", n, (int) pid, nstore, names);
        if (pidfile) {
                char tmp[4096];

                snprintf(tmp, sizeof(tmp), "%s.tmp", pidfile);
                f = fopen(tmp, "we");
                if (!f)
                        die("pidfile");
                fprintf(f, "%d\n", (int) pid);
                fclose(f);
                if (rename(tmp, pidfile) < 0)
                        die("rename pidfile");
        }
        return pid;
}

static void usage(void) {
        fprintf(stderr,
                "Usage: fake-systemd --dir DIR [--log FILE] [--pidfile FILE] [--watchdog-usec USEC]\n"
                "                    [--restart N] [--fdstore-max N] [--on-ready CMD]\n"
                "                    [--notify-access-all] -- COMMAND [ARGS...]\n");
        exit(2);
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "dir", required_argument, NULL, 'd' },
                { "log", required_argument, NULL, 'l' },
                { "pidfile", required_argument, NULL, 'p' },
                { "watchdog-usec", required_argument, NULL, 'w' },
                { "restart", required_argument, NULL, 'r' },
                { "fdstore-max", required_argument, NULL, 'm' },
                { "on-ready", required_argument, NULL, 'o' },
                { "notify-access-all", no_argument, NULL, 'a' },
                {}
        };
        const char *dir = NULL;
        unsigned restarts = 0, starts = 0;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char notify_path[sizeof(sa.sun_path)];
        sigset_t mask;
        int sock, sfd, c, one = 1, exit_code = 0;
        bool stopping = false;
        uint64_t stop_deadline = 0, restart_at = 0;

        log_file = stderr;
        while ((c = getopt_long(argc, argv, "+", options, NULL)) >= 0) {
                switch (c) {
                case 'd':
                        dir = optarg;
                        break;
                case 'l':
                        log_file = fopen(optarg, "ae");
                        if (!log_file)
                                die(optarg);
                        break;
                case 'p':
                        pidfile = optarg;
                        break;
                case 'w':
                        watchdog_usec = strtoull(optarg, NULL, 10);
                        break;
                case 'r':
                        restarts = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'm':
                        fdstore_max = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'o':
                        on_ready = optarg;
                        break;
                case 'a':
                        notify_access_all = true;
                        break;
                default:
                        usage();
                }
        }
        if (!dir || optind >= argc)
                usage();

        if ((size_t) snprintf(notify_path, sizeof(notify_path), "%s/notify", dir) >= sizeof(notify_path)) {
                fprintf(stderr, "fake-systemd: %s is too long for a socket path\n", dir);
                return 2;
        }
        strcpy(sa.sun_path, notify_path);
        (void) unlink(notify_path);
        sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (sock < 0)
                die("socket");
        if (setsockopt(sock, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0)
                die("SO_PASSCRED");
        if (bind(sock, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                die("bind");

        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0)
                die("signalfd");

        start(argv + optind, notify_path, ++starts);

        for (;;) {
                struct pollfd p[2] = { { .fd = sock, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
                struct signalfd_siginfo si;
                uint64_t now;

                if (poll(p, 2, 100) < 0 && errno != EINTR)
                        die("poll");
                /* Everything queued first (pings sent while --on-ready ran
                 * included), then the clocks. */
                if (p[0].revents & POLLIN)
                        for (int i = 0; i < 1024; i++) {
                                struct pollfd q = { .fd = sock, .events = POLLIN };
                                if (poll(&q, 1, 0) <= 0)
                                        break;
                                handle_notify(sock);
                        }
                now = now_usec();
                if (watchdog_usec > 0 && main_pid > 0 && ready_seen && !stopping &&
                    now - last_ping_usec > watchdog_usec) {
                        logf_("watchdog-timeout pid=%d", (int) main_pid);
                        kill(main_pid, SIGABRT);
                        last_ping_usec = now; /* once per interval */
                }
                if (stopping && main_pid > 0 && now > stop_deadline) {
                        kill(-main_pid, SIGKILL);
                        stop_deadline = UINT64_MAX;
                }
                if (restart_at && now >= restart_at) {
                        restart_at = 0;
                        start(argv + optind, notify_path, ++starts);
                }

                if (!(p[1].revents & POLLIN))
                        continue;
                while (read(sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
                        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
                                stopping = true;
                                restart_at = 0;
                                stop_deadline = now_usec() + STOP_TIMEOUT_MSEC * 1000u;
                                if (main_pid > 0)
                                        kill(-main_pid, SIGTERM); /* KillMode=control-group */
                                else
                                        goto done;
                        }
                }
                for (;;) {
                        int status;
                        pid_t pid = waitpid(-1, &status, WNOHANG);

                        if (pid <= 0)
                                break;
                        if (pid != main_pid)
                                continue;
                        /* Drain what it sent before it died. */
                        for (int i = 0; i < 64; i++) {
                                struct pollfd q = { .fd = sock, .events = POLLIN };
                                if (poll(&q, 1, 0) <= 0)
                                        break;
                                handle_notify(sock);
                        }
                        if (WIFEXITED(status)) {
                                logf_("exit pid=%d status=exited:%d", (int) pid, WEXITSTATUS(status));
                                exit_code = WEXITSTATUS(status);
                        } else {
                                logf_("exit pid=%d status=signal:%d", (int) pid, WTERMSIG(status));
                                exit_code = 128 + WTERMSIG(status);
                        }
                        /* What is left of the service goes with its main
                         * process, as systemd empties the cgroup. */
                        kill(-pid, SIGKILL);
                        main_pid = 0;
                        if (stopping)
                                goto done;
                        if (restarts > 0) {
                                restarts--;
                                restart_at = now_usec() + RESTART_DELAY_MSEC * 1000u;
                        } else
                                goto done;
                }
        }

done:
        (void) unlink(notify_path);
        for (size_t i = 0; i < nstore; i++) {
                close(store[i].fd);
                free(store[i].name);
        }
        free(store);
        logf_("done exit=%d", stopping ? 0 : exit_code);
        return stopping ? 0 : exit_code;
}
