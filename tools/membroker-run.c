/* SPDX-License-Identifier: MIT */
/*
 * membroker-run - run an unmodified program with its malloc() served from a
 * tenant of membrokerd (membroker-run(1)):
 *
 *   membroker-run [--socket PATH] --tenant PATH -- PROGRAM ARGS...
 *
 * Checks first that the tenant can be attached (connect, Hello, Welcome,
 * disconnect), so that no daemon, an unknown tenant or a refused uid fail
 * before the program runs; then execs PROGRAM with
 * LD_PRELOAD=libmembroker-preload.so, MEMBROKER_SOCKET and
 * MEMBROKER_TENANT (the resolved tenant path) in its environment.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "membroker.h"

#define RUN_EXIT_BROKER 125 /* the broker refused, or no broker */
#define RUN_EXIT_NOEXEC 126
#define RUN_EXIT_NOTFOUND 127
#define RUN_PRELOAD_ENV "MEMBROKER_PRELOAD" /* another path of the shim (tests) */

static void usage(FILE *f) {
        fprintf(f,
                "Usage: membroker-run [--socket PATH] --tenant PATH [--] PROGRAM [ARGS...]\n"
                "Run PROGRAM with malloc() and friends served from a membroker tenant.\n\n"
                "  -s, --socket PATH   the broker's socket (default $MEMBROKER_SOCKET or %s)\n"
                "  -t, --tenant PATH   the tenant to charge (\"auto\": by the caller's cgroup)\n"
                "  -h, --help          this help\n"
                "      --version       the version\n\n"
                "Exit status: PROGRAM's, or %d when the broker cannot be attached, %d when\n"
                "PROGRAM cannot be run, %d when it is not found.\n",
                MB_DEFAULT_SOCKET_PATH, RUN_EXIT_BROKER, RUN_EXIT_NOEXEC, RUN_EXIT_NOTFOUND);
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "tenant", required_argument, NULL, 't' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {},
        };
        const char *socket_path = NULL, *tenant = NULL, *preload, *old;
        char *resolved, *ld = NULL;
        mb_client *c = NULL;
        int o, r;

        while ((o = getopt_long(argc, argv, "+s:t:h", opts, NULL)) >= 0)
                switch (o) {
                case 's':
                        socket_path = optarg;
                        break;
                case 't':
                        tenant = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                case 'V':
                        printf("membroker-run %s\n", PACKAGE_VERSION);
                        return 0;
                default:
                        usage(stderr);
                        return RUN_EXIT_BROKER;
                }
        if (!tenant || optind >= argc) {
                fprintf(stderr, "membroker-run: %s\n", !tenant ? "--tenant is required" : "no program given");
                usage(stderr);
                return RUN_EXIT_BROKER;
        }

        /* Attach once, before anything runs: bad input fails here. */
        r = mb_connect(socket_path, tenant, &c);
        if (r < 0) {
                fprintf(stderr, "membroker-run: cannot attach to tenant %s: %s (%s)\n", tenant, mb_last_error(),
                        strerror(-r));
                return RUN_EXIT_BROKER;
        }
        resolved = strdup(mb_tenant_path(c));
        mb_close(c);
        if (!resolved)
                return RUN_EXIT_BROKER;

        preload = getenv(RUN_PRELOAD_ENV);
        if (!preload || !*preload)
                preload = MB_PRELOAD_PATH;
        if (access(preload, R_OK) < 0) {
                fprintf(stderr, "membroker-run: %s: %s\n", preload, strerror(errno));
                return RUN_EXIT_BROKER;
        }
        old = getenv("LD_PRELOAD");
        if (asprintf(&ld, "%s%s%s", preload, old && *old ? " " : "", old ? old : "") < 0)
                return RUN_EXIT_BROKER;
        if ((socket_path && setenv(MB_SOCKET_ENV, socket_path, 1) < 0) ||
            setenv("MEMBROKER_TENANT", resolved, 1) < 0 || setenv("LD_PRELOAD", ld, 1) < 0) {
                fprintf(stderr, "membroker-run: setenv: %s\n", strerror(errno));
                return RUN_EXIT_BROKER;
        }
        free(resolved);
        free(ld);

        execvp(argv[optind], argv + optind);
        r = errno;
        fprintf(stderr, "membroker-run: %s: %s\n", argv[optind], strerror(r));
        return r == ENOENT ? RUN_EXIT_NOTFOUND : RUN_EXIT_NOEXEC;
}
