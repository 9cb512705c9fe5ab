/* SPDX-License-Identifier: MIT */
/*
 * report.c - what the tenant refused the program, said on stderr
 * (membroker-run(1)).
 *
 * At a limit malloc() returns NULL and mmap() MAP_FAILED with ENOMEM, as
 * they would under a cgroup's memory.max with overcommit off; a program
 * that does not check then dies of SIGSEGV with nothing said.  So the shim
 * keeps what was refused (how often, the largest request, the daemon's
 * reason: which limit of which tenant, its usage) and says it in one line:
 *   - at exit, when anything was refused;
 *   - at a SIGSEGV or SIGBUS after a refusal (a handler installed at the
 *     first refusal where the program has none; it prints the line and
 *     gives the signal back to its default action, core dump included);
 *   - at every refusal (the first MEMBROKER_REPORT_LINES_MAX) with
 *     $MEMBROKER_RUN_VERBOSE=1 (membroker-run --verbose).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mb_size.h"
#include "membroker.h"
#include "preload/preload.h"

#define REPORT_VERBOSE_ENV "MEMBROKER_RUN_VERBOSE"
#define REPORT_LINES_MAX 100u
#define REPORT_LINE_BYTES 1024

static pthread_mutex_t rp_lock = PTHREAD_MUTEX_INITIALIZER;
static bool rp_verbose;
static uint64_t rp_count;
static size_t rp_largest;
static const char *rp_largest_what;
static bool rp_handlers;
/* The line, formatted at each refusal so that a signal handler can write it. */
static char rp_line[REPORT_LINE_BYTES];
static volatile size_t rp_line_len;

void shim_report_init(void) {
        const char *e = getenv(REPORT_VERBOSE_ENV);

        rp_verbose = e && strcmp(e, "1") == 0;
}

static void rp_fatal(int sig) {
        /* SA_RESETHAND: the default action is back; returning re-raises
         * the fault (SIGSEGV, SIGBUS) with it. */
        if (rp_line_len > 0)
                (void) !write(STDERR_FILENO, rp_line, rp_line_len);
        (void) sig;
}

static void rp_install_handler(int sig) {
        struct sigaction old, sa;

        if (sigaction(sig, NULL, &old) < 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
                return;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = rp_fatal;
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        (void) sigaction(sig, &sa, NULL);
}

/* The summary line (rp_lock held). */
static void rp_format_locked(const char *reason) {
        char size[MB_SIZE_FORMAT_MAX];
        int n;

        n = snprintf(rp_line, sizeof(rp_line),
                     "membroker-run: tenant %s refused %llu request%s for memory (the largest: %s by %s): %s\n",
                     shim_client ? mb_tenant_path(shim_client) : "?", (unsigned long long) rp_count,
                     rp_count == 1 ? "" : "s", mb_size_format(size, sizeof(size), rp_largest), rp_largest_what,
                     reason && *reason ? reason : "out of memory");
        rp_line_len = n < 0 ? 0 : (size_t) n < sizeof(rp_line) ? (size_t) n : sizeof(rp_line) - 1;
}

void shim_report_refused(const char *what, size_t bytes) {
        char reason[REPORT_LINE_BYTES / 2], size[MB_SIZE_FORMAT_MAX];
        bool first, say;
        int e = errno;

        snprintf(reason, sizeof(reason), "%s", mb_last_error());
        pthread_mutex_lock(&rp_lock);
        first = rp_count++ == 0;
        if (first || bytes > rp_largest) {
                rp_largest = bytes;
                rp_largest_what = what;
        }
        rp_format_locked(reason);
        say = rp_verbose && rp_count <= REPORT_LINES_MAX;
        if (first && !rp_handlers) {
                rp_handlers = true;
                rp_install_handler(SIGSEGV);
                rp_install_handler(SIGBUS);
        }
        pthread_mutex_unlock(&rp_lock);
        if (say)
                fprintf(stderr, "membroker-run: %s of %s refused: %s%s\n", what,
                        mb_size_format(size, sizeof(size), bytes), reason,
                        rp_count == REPORT_LINES_MAX ? " (further refusals are counted, not shown)" : "");
        errno = e;
}

__attribute__((destructor)) static void shim_report_exit(void) {
        /* A fork() child shares the parent's count: the parent says it. */
        if (rp_count == 0 || shim_forked)
                return;
        (void) !write(STDERR_FILENO, rp_line, rp_line_len);
}
