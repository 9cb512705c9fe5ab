/* SPDX-License-Identifier: MIT */
/*
 * main.c - membrokerd: arguments, logging, then the manager does the rest.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <event2/thread.h>
#include <systemd/sd-daemon.h>

#include "auth.h"
#include "bus.h"
#include "log.h"
#include "macros.h"
#include "manager-service.h"
#include "manager.h"

#define EXIT_USAGE 2

static void help(void) {
        printf("Usage: membrokerd [OPTIONS]\n"
               "\n"
               "The membroker page broker daemon: serves memory pages to the clients of\n"
               "its tenants, with memcg-style limits, and runs in the foreground.\n"
               "\n"
               "  --config-dir DIR   read DIR/membroker.conf and DIR/tenants.d/*.conf\n"
               "                     (default %s)\n"
               "  --socket PATH      listen on PATH (overrides Socket=)\n"
               "  --state-dir DIR    keep state in DIR (default %s)\n"
               "  --system           serve the D-Bus API on the system bus (default)\n"
               "  --user             serve the D-Bus API on the user's session bus\n"
               "  --address ADDRESS  serve the D-Bus API on the bus at ADDRESS\n"
               "  --no-bus           no D-Bus API (tests of the broker alone)\n"
               "  --pressure-file PATH  with PressureReclaim=yes: the PSI file to watch\n"
               "                     (default /proc/pressure/memory, else the daemon's\n"
               "                     cgroup's memory.pressure), or a FIFO whose every\n"
               "                     write counts as one pressure event (tests)\n"
               "  --pressure-trigger SPEC  the PSI trigger (default \"some 150000 2000000\")\n"
               "  --dump-file PATH   SIGUSR1 also writes the state dump to PATH (replaced\n"
               "                     whole, for tools)\n"
               "  --help             show this help\n"
               "  --version          show the version\n"
               "\n"
               "Signals: SIGHUP reloads the configuration, SIGUSR1 logs the tenant tree\n"
               "with usage, limits, events and statistics, SIGTERM/SIGINT stop.\n",
               MB_DEFAULT_CONFIG_DIR, MB_DEFAULT_STATE_DIR);
}

static int set_string(char **dst, const char *value) {
        char *s = strdup(value);

        if (!s)
                return -ENOMEM;
        free(*dst);
        *dst = s;
        return 0;
}

/* Returns 1 to go on, 0 to exit with success (--help), negative on error. */
static int parse_argv(int argc, char *argv[], struct manager *m) {
        enum {
                ARG_CONFIG_DIR = 0x100,
                ARG_SOCKET,
                ARG_STATE_DIR,
                ARG_SYSTEM,
                ARG_USER,
                ARG_ADDRESS,
                ARG_NO_BUS,
                ARG_PRESSURE_FILE,
                ARG_PRESSURE_TRIGGER,
                ARG_DUMP_FILE,
                ARG_VERSION,
        };
        static const struct option options[] = {
                { "config-dir", required_argument, NULL, ARG_CONFIG_DIR },
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "state-dir", required_argument, NULL, ARG_STATE_DIR },
                { "system", no_argument, NULL, ARG_SYSTEM },
                { "user", no_argument, NULL, ARG_USER },
                { "address", required_argument, NULL, ARG_ADDRESS },
                { "no-bus", no_argument, NULL, ARG_NO_BUS },
                { "pressure-file", required_argument, NULL, ARG_PRESSURE_FILE },
                { "pressure-trigger", required_argument, NULL, ARG_PRESSURE_TRIGGER },
                { "dump-file", required_argument, NULL, ARG_DUMP_FILE },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {}
        };
        int c, r = 0;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case ARG_CONFIG_DIR:
                        r = set_string(&m->config_dir, optarg);
                        break;
                case ARG_SOCKET:
                        r = set_string(&m->socket_path, optarg);
                        break;
                case ARG_STATE_DIR:
                        r = set_string(&m->state_dir, optarg);
                        break;
                case ARG_SYSTEM:
                        m->bus_kind = MANAGER_BUS_SYSTEM;
                        break;
                case ARG_USER:
                        m->bus_kind = MANAGER_BUS_USER;
                        break;
                case ARG_ADDRESS:
                        m->bus_kind = MANAGER_BUS_ADDRESS;
                        r = set_string(&m->bus_address, optarg);
                        break;
                case ARG_NO_BUS:
                        m->bus_kind = MANAGER_BUS_NONE;
                        break;
                case ARG_PRESSURE_FILE:
                        r = set_string(&m->pressure_path, optarg);
                        break;
                case ARG_PRESSURE_TRIGGER:
                        r = set_string(&m->pressure_trigger, optarg);
                        break;
                case ARG_DUMP_FILE:
                        r = set_string(&m->dump_path, optarg);
                        break;
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("membrokerd %s\n", PACKAGE_VERSION);
                        return 0;
                default:
                        return -EINVAL;
                }
                if (r < 0)
                        return r;
        }
        if (optind < argc) {
                fprintf(stderr, "membrokerd: unexpected argument \"%s\" (see --help)\n", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

/* Clients and arenas are file descriptors: use every one we may -- the soft
 * limit up to the hard one, as systemd does for its services (the soft
 * 1024 is for select(); libevent uses epoll). */
static void raise_nofile(void) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
}

static int mkdir_p(const char *path, mode_t mode) {
        _cleanup_(freep) char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        for (char *s = p + 1;; s++) {
                if (*s != '/' && *s != 0)
                        continue;
                char saved = *s;
                *s = 0;
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return -errno;
                *s = saved;
                if (saved == 0)
                        break;
        }
        return 0;
}

int main(int argc, char *argv[]) {
        struct manager *m = NULL;
        _cleanup_(freep) char *error = NULL;
        int r;

        log_setup();

        r = manager_new(&m);
        if (r < 0) {
                log_error_errno(r, "cannot allocate the manager: %m");
                return EXIT_FAILURE;
        }
        r = parse_argv(argc, argv, m);
        if (r <= 0) {
                manager_free(m);
                return r == 0 ? EXIT_SUCCESS : EXIT_USAGE;
        }
        if (!m->state_dir && set_string(&m->state_dir, MB_DEFAULT_STATE_DIR) < 0) {
                manager_free(m);
                return EXIT_FAILURE;
        }

        /* Workers wake each other's event bases: libevent needs its locks. */
        if (evthread_use_pthreads() < 0) {
                log_error("cannot enable libevent's thread support");
                manager_free(m);
                return EXIT_FAILURE;
        }
        /* A client that goes away mid-write must not kill the broker. */
        signal(SIGPIPE, SIG_IGN);
        raise_nofile();
        auth_setup();

        r = mkdir_p(m->state_dir, 0755);
        if (r < 0)
                log_warning_errno(r, "cannot create the state directory %s: %m", m->state_dir);

        r = manager_start(m, &error);
        if (r < 0) {
                if (error)
                        log_error("%s", error);
                else
                        log_error_errno(r, "cannot start: %m");
                manager_free(m);
                return EXIT_FAILURE;
        }

        /* The D-Bus API, an adapter on top of the manager: it registers as
         * the manager's observer, and manager_free() closes it. */
        r = bus_setup(m);
        if (r == -EOPNOTSUPP)
                log_warning("this build has no D-Bus API yet; running without a bus");
        else if (r < 0) {
                log_error_errno(r, "cannot set up the D-Bus API: %m");
                manager_free(m);
                return EXIT_FAILURE;
        }

        /* The socket listens and the bus name is ours: READY=1, the
         * watchdog, and the grace period of pages kept over a restart. */
        r = manager_service_ready(m);
        if (r < 0) {
                log_error_errno(r, "cannot start the watchdog: %m");
                manager_free(m);
                return EXIT_FAILURE;
        }
        r = manager_run(m);
        (void) sd_notify(false, "STOPPING=1");

        manager_free(m);
        if (r < 0) {
                log_error_errno(r, "main loop failed: %m");
                return EXIT_FAILURE;
        }
        log_info("stopped");
        return EXIT_SUCCESS;
}
