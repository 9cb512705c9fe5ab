/* SPDX-License-Identifier: MIT */
/*
 * daemon.c - see daemon.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "harness.h"

extern char **environ;

int bench_write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "we");

        if (!f)
                return -errno;
        fputs(text, f);
        if (fclose(f) != 0)
                return -errno;
        return 0;
}

int bench_mkdir(const char *path) {
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* A sockaddr_un for @path; -ENAMETOOLONG when it does not fit. */
static int sockaddr_set(struct sockaddr_un *sa, const char *path) {
        size_t len = strlen(path);

        if (len >= sizeof sa->sun_path)
                return -ENAMETOOLONG;
        memcpy(sa->sun_path, path, len + 1);
        return 0;
}

static bool socket_ready(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;
        bool ok;

        if (sockaddr_set(&sa, path) < 0)
                return false;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return false;
        ok = connect(fd, (struct sockaddr *) &sa, sizeof sa) == 0;
        close(fd);
        return ok;
}

int bench_daemon_start(const char *membrokerd, const char *confdir, const char *dir, const char *bus_address,
                       struct bench_daemon *ret) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char state[4096], log[4096], notify[4096], addr[4200], envbuf[4200];
        posix_spawn_file_actions_t fa;
        char **env;
        size_t nenv = 0;
        uint64_t t0, deadline;
        bool ready = false, notified = false;
        int nfd, r;

        *ret = (struct bench_daemon) { .pid = -1 };
        snprintf(ret->sock, sizeof ret->sock, "%s/mb.sock", dir);
        snprintf(state, sizeof state, "%s/state", dir);
        snprintf(log, sizeof log, "%s/daemon.log", dir);
        snprintf(notify, sizeof notify, "%s/notify", dir);
        (void) bench_mkdir(dir);
        (void) bench_mkdir(state);
        unlink(ret->sock);
        unlink(notify);

        nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (nfd < 0)
                return -errno;
        if (sockaddr_set(&sa, notify) < 0 || bind(nfd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                r = -errno;
                close(nfd);
                return r;
        }

        for (char **e = environ; *e; e++)
                nenv++;
        env = calloc(nenv + 2, sizeof(char *));
        if (!env) {
                close(nfd);
                return -ENOMEM;
        }
        nenv = 0;
        for (char **e = environ; *e; e++)
                if (strncmp(*e, "NOTIFY_SOCKET=", 14) != 0)
                        env[nenv++] = *e;
        snprintf(envbuf, sizeof envbuf, "NOTIFY_SOCKET=%s", notify);
        env[nenv++] = envbuf;

        {
                char *argv[12];
                int a = 0;

                argv[a++] = (char *) membrokerd;
                argv[a++] = (char *) "--config-dir";
                argv[a++] = (char *) confdir;
                argv[a++] = (char *) "--socket";
                argv[a++] = ret->sock;
                argv[a++] = (char *) "--state-dir";
                argv[a++] = state;
                if (bus_address) {
                        snprintf(addr, sizeof addr, "%s", bus_address);
                        argv[a++] = (char *) "--address";
                        argv[a++] = addr;
                } else
                        argv[a++] = (char *) "--no-bus";
                argv[a] = NULL;

                posix_spawn_file_actions_init(&fa);
                posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
                posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
                posix_spawn_file_actions_adddup2(&fa, 1, 2);
                t0 = bench_now_ns();
                r = posix_spawn(&ret->pid, membrokerd, &fa, NULL, argv, env);
                posix_spawn_file_actions_destroy(&fa);
        }
        free(env);
        if (r != 0) {
                close(nfd);
                ret->pid = -1;
                return -r;
        }

        deadline = t0 + 120ULL * 1000000000ULL;
        while (!ready && bench_now_ns() < deadline) {
                struct pollfd p = { .fd = nfd, .events = POLLIN };
                char buf[4096];
                int status;

                if (poll(&p, 1, notified ? 1 : 2) > 0) {
                        ssize_t n = recv(nfd, buf, sizeof buf - 1, 0);
                        if (n > 0) {
                                buf[n] = 0;
                                notified = true;
                                if (strstr(buf, "READY=1"))
                                        ready = true;
                        }
                }
                /* no sd_notify support: fall back to the socket */
                if (!ready && !notified && socket_ready(ret->sock))
                        ready = true;
                if (waitpid(ret->pid, &status, WNOHANG) == ret->pid) {
                        ret->pid = -1;
                        close(nfd);
                        return -ECHILD;
                }
        }
        ret->startup_ns = (double) (bench_now_ns() - t0);
        close(nfd);
        unlink(notify);
        if (!ready) {
                bench_daemon_stop(ret);
                return -ETIMEDOUT;
        }
        return 0;
}

void bench_daemon_stop(struct bench_daemon *d) {
        int status;

        if (d->pid <= 0)
                return;
        kill(d->pid, SIGTERM);
        for (int i = 0; i < 500; i++) {
                if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
                        d->pid = -1;
                        return;
                }
                usleep(10000);
        }
        kill(d->pid, SIGKILL);
        waitpid(d->pid, &status, 0);
        d->pid = -1;
}

void bench_path(char *buf, size_t size, const char *dir, const char *name) {
        int n = snprintf(buf, size, "%s/%s", dir, name);

        if (n < 0 || (size_t) n >= size) {
                fprintf(stderr, "bench: path too long: %s/%s\n", dir, name);
                exit(2);
        }
}
