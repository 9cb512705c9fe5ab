/* SPDX-License-Identifier: MIT */
/*
 * membroker-run - run an unmodified program with its malloc() served from a
 * tenant of membrokerd (membroker-run(1)):
 *
 *   membroker-run [--socket PATH] [--verbose] --tenant PATH -- PROGRAM ARGS...
 *
 * Checks first that the tenant can be attached (connect, Hello, Welcome,
 * disconnect), so that no daemon, an unknown tenant or a refused uid fail
 * before the program runs; then execs PROGRAM with
 * LD_PRELOAD=libmembroker-preload.so, MEMBROKER_SOCKET and
 * MEMBROKER_TENANT (the resolved tenant path) in its environment, and
 * MEMBROKER_RUN_VERBOSE=1 with --verbose (the shim then says every refusal
 * of the tenant; without it, one line at exit when there was any).
 *
 * The shim: $MEMBROKER_PRELOAD, else the one built next to this program
 * when it runs from the build tree (as libtool's wrappers find the
 * uninstalled libraries), else the installed one.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "membroker.h"

#define RUN_EXIT_BROKER 125 /* the broker refused, or no broker */
#define RUN_EXIT_NOEXEC 126
#define RUN_EXIT_NOTFOUND 127
#define RUN_PRELOAD_ENV "MEMBROKER_PRELOAD" /* another path of the shim (tests) */
#define RUN_VERBOSE_ENV "MEMBROKER_RUN_VERBOSE"
#define RUN_PRELOAD_NAME "libmembroker-preload.so"

static void usage(FILE *f) {
        fprintf(f,
                "Usage: membroker-run [--socket PATH] [--verbose] --tenant PATH [--] PROGRAM [ARGS...]\n"
                "Run PROGRAM with malloc() and friends served from a membroker tenant, and its own\n"
                "private anonymous mappings charged to it.\n\n"
                "  -s, --socket PATH   the broker's socket (default $MEMBROKER_SOCKET or %s)\n"
                "  -t, --tenant PATH   the tenant to charge (\"auto\": by the caller's cgroup)\n"
                "  -v, --verbose       say which shim and tenant, and every request the tenant refuses\n"
                "  -h, --help          this help\n"
                "      --version       the version\n\n"
                "The shim: $MEMBROKER_PRELOAD, else the one built next to membroker-run in a\n"
                "build tree, else %s.\n\n"
                "Exit status: PROGRAM's, or %d when the broker cannot be attached, %d when\n"
                "PROGRAM cannot be run, %d when it is not found.\n",
                MB_DEFAULT_SOCKET_PATH, MB_PRELOAD_PATH, RUN_EXIT_BROKER, RUN_EXIT_NOEXEC, RUN_EXIT_NOTFOUND);
}

/* The shim built next to this program, when it runs from the build tree:
 * BUILD/tools/membroker-run, or BUILD/tools/.libs/ behind libtool's
 * wrapper script, with BUILD/client/.libs/ beside.  NULL when not. */
static char *run_build_tree_preload(void) {
        static const char *const up[] = { "/../client/.libs/", "/../../client/.libs/" };
        char exe[PATH_MAX], *slash, *p;
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

        if (n <= 0)
                return NULL;
        exe[n] = '\0';
        slash = strrchr(exe, '/');
        if (!slash)
                return NULL;
        *slash = '\0';
        for (size_t i = 0; i < sizeof(up) / sizeof(up[0]); i++) {
                if (asprintf(&p, "%s%s%s", exe, up[i], RUN_PRELOAD_NAME) < 0)
                        return NULL;
                if (access(p, R_OK) == 0)
                        return p;
                free(p);
        }
        return NULL;
}

/* $MEMBROKER_PRELOAD, the build tree's shim, or the installed one
 * (allocated; NULL when out of memory). */
static char *run_find_preload(void) {
        const char *env = getenv(RUN_PRELOAD_ENV);
        char *p;

        if (env && *env)
                return strdup(env);
        p = run_build_tree_preload();
        return p ? p : strdup(MB_PRELOAD_PATH);
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "tenant", required_argument, NULL, 't' },
                { "verbose", no_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {},
        };
        const char *socket_path = NULL, *tenant = NULL, *old;
        char *resolved, *ld = NULL, *preload;
        bool verbose = false;
        mb_client *c = NULL;
        int o, r;

        while ((o = getopt_long(argc, argv, "+s:t:vh", opts, NULL)) >= 0)
                switch (o) {
                case 's':
                        socket_path = optarg;
                        break;
                case 't':
                        tenant = optarg;
                        break;
                case 'v':
                        verbose = true;
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

        preload = run_find_preload();
        if (!preload)
                return RUN_EXIT_BROKER;
        if (access(preload, R_OK) < 0) {
                fprintf(stderr, "membroker-run: %s: %s\n", preload, strerror(errno));
                return RUN_EXIT_BROKER;
        }
        if (verbose)
                fprintf(stderr, "membroker-run: %s in tenant %s, with %s\n", argv[optind], resolved, preload);
        old = getenv("LD_PRELOAD");
        if (asprintf(&ld, "%s%s%s", preload, old && *old ? " " : "", old ? old : "") < 0)
                return RUN_EXIT_BROKER;
        if ((socket_path && setenv(MB_SOCKET_ENV, socket_path, 1) < 0) ||
            setenv("MEMBROKER_TENANT", resolved, 1) < 0 || setenv("LD_PRELOAD", ld, 1) < 0 ||
            (verbose ? setenv(RUN_VERBOSE_ENV, "1", 1) : unsetenv(RUN_VERBOSE_ENV)) < 0) {
                fprintf(stderr, "membroker-run: setenv: %s\n", strerror(errno));
                return RUN_EXIT_BROKER;
        }
        free(resolved);
        free(preload);
        free(ld);

        execvp(argv[optind], argv + optind);
        r = errno;
        fprintf(stderr, "membroker-run: %s: %s\n", argv[optind], strerror(r));
        return r == ENOENT ? RUN_EXIT_NOTFOUND : RUN_EXIT_NOEXEC;
}
