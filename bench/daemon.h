/* SPDX-License-Identifier: MIT */
/*
 * daemon.h - start and stop a real membrokerd from a benchmark program
 * (tables 8 and 10 restart it with different configurations and time its
 * start-up).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bench_daemon {
        pid_t pid;
        double startup_ns; /* spawn to READY=1 (sd_notify) or, without it, to
                            * the socket accepting connections */
        char sock[4096];
};

/*
 * Start @membrokerd --config-dir @confdir --socket @dir/mb.sock --state-dir
 * @dir/state, on the bus at @bus_address (NULL: --no-bus), logging to
 * @dir/daemon.log, and wait (up to 120 s) until it is ready.  NOTIFY_SOCKET
 * is pointed at a datagram socket in @dir, so the time to READY=1 is
 * measured the way systemd sees it.  Returns 0 or a negative errno (the log
 * says why).
 */
int bench_daemon_start(const char *membrokerd, const char *confdir, const char *dir, const char *bus_address,
                       struct bench_daemon *ret);

/* SIGTERM, wait (5 s), then SIGKILL. */
void bench_daemon_stop(struct bench_daemon *d);

/* Write @text to @path (created or truncated).  0 or negative errno. */
int bench_write_file(const char *path, const char *text);

/* mkdir -p of one level below an existing directory; EEXIST is fine. */
int bench_mkdir(const char *path);

/* @buf = "@dir/@name"; exits with a message when it does not fit. */
void bench_path(char *buf, size_t size, const char *dir, const char *name);
