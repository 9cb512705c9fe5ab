/* SPDX-License-Identifier: MIT */
/*
 * programs.c - table 15, real programs under membroker-run against glibc
 * and tcmalloc.
 *
 *   bench-programs --run MEMBROKER-RUN --socket SOCKET --tenant TENANT
 *                  WORKLOAD ARGVFILE [WORKLOAD ARGVFILE ...]
 *
 * ARGVFILE holds the command, one argument per line.  Every workload runs
 * three ways, interleaved by the harness: plainly (glibc's malloc), with
 * tcmalloc preloaded (LD_PRELOAD), and under `membroker-run --socket SOCKET
 * --tenant TENANT --` (libmembroker-preload.so: the whole membroker-run
 * included, its check of the tenant too).  One sample is one run; figures
 * are the wall time and the CPU time (user + system of the process tree,
 * wait4()) in ms.  Target: each workload under the shim within 1.1× of
 * glibc's wall time.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define MAX_WORKLOADS 8
#define NWAYS 3
#define TARGET_RATIO 1.1
#define TCMALLOC_SONAME "libtcmalloc_minimal.so.4"

static const char *const way_names[NWAYS] = { "glibc", "tcmalloc (LD_PRELOAD)", "membroker-run (the shim)" };

struct way {
        char **argv;
        const char *preload;  /* LD_PRELOAD for the child, or NULL */
        double cpu_ms;        /* the last sample's CPU time */
};

static double way_run(void *arg, uint64_t iters) {
        struct way *w = arg;
        double wall = 0, cpu = 0;

        for (uint64_t i = 0; i < iters; i++) {
                struct rusage ru;
                uint64_t t0 = bench_now_ns();
                int st;
                pid_t pid = fork();

                if (pid < 0)
                        return -1;
                if (pid == 0) {
                        int fd = open("/dev/null", O_RDWR);

                        if (fd >= 0) {
                                dup2(fd, 0);
                                dup2(fd, 1);
                        }
                        if (w->preload)
                                setenv("LD_PRELOAD", w->preload, 1);
                        execvp(w->argv[0], w->argv);
                        _exit(127);
                }
                if (wait4(pid, &st, 0, &ru) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                        fprintf(stderr, "bench-programs: %s failed (status %d)\n", w->argv[0], st);
                        return -1;
                }
                wall += (double) (bench_now_ns() - t0) / 1e6;
                cpu += (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                       (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
        }
        w->cpu_ms = cpu / (double) iters;
        return wall / (double) iters;
}

static int read_argv(const char *file, char ***ret, size_t *ret_n) {
        FILE *f = fopen(file, "re");
        char *line = NULL, **argv = NULL;
        size_t cap = 0, n = 0;
        ssize_t len;

        if (!f)
                return -errno;
        while ((len = getline(&line, &cap, f)) >= 0) {
                char **a = realloc(argv, (n + 2) * sizeof(*argv));

                if (!a)
                        break;
                argv = a;
                if (len > 0 && line[len - 1] == '\n')
                        line[len - 1] = 0;
                argv[n++] = strdup(line);
                argv[n] = NULL;
        }
        free(line);
        fclose(f);
        if (n == 0) {
                free(argv);
                return -EINVAL;
        }
        *ret = argv;
        *ret_n = n;
        return 0;
}

int main(int argc, char **argv) {
        static const struct option opts_long[] = {
                { "run", required_argument, NULL, 'r' },
                { "socket", required_argument, NULL, 's' },
                { "tenant", required_argument, NULL, 't' },
                {},
        };
        static struct way ways[MAX_WORKLOADS][NWAYS];
        static struct bench_case cases[MAX_WORKLOADS][NWAYS];
        const char *run = NULL, *sock = NULL, *tenant = NULL, *names[MAX_WORKLOADS];
        struct bench_opts opts;
        size_t nw = 0;
        int o;

        while ((o = getopt_long(argc, argv, "", opts_long, NULL)) >= 0)
                switch (o) {
                case 'r':
                        run = optarg;
                        break;
                case 's':
                        sock = optarg;
                        break;
                case 't':
                        tenant = optarg;
                        break;
                default:
                        return 2;
                }
        if (!run || !sock || !tenant || (argc - optind) % 2 != 0 || argc == optind) {
                fprintf(stderr, "usage: bench-programs --run PATH --socket PATH --tenant T WORKLOAD ARGVFILE...\n");
                return 2;
        }
        bench_opts_init(&opts);
        if (opts.reps > 5 && !getenv("MB_BENCH_REPS"))
                opts.reps = 5; /* whole programs: a second each */

        for (int i = optind; i + 1 < argc && nw < MAX_WORKLOADS; i += 2, nw++) {
                char **cmd = NULL, **shim;
                size_t n = 0;
                int r = read_argv(argv[i + 1], &cmd, &n);

                names[nw] = argv[i];
                if (r < 0) {
                        fprintf(stderr, "bench-programs: %s: %s\n", argv[i + 1], strerror(-r));
                        return 2;
                }
                shim = calloc(n + 7, sizeof(*shim));
                if (!shim)
                        return 2;
                shim[0] = (char *) run;
                shim[1] = (char *) "--socket";
                shim[2] = (char *) sock;
                shim[3] = (char *) "--tenant";
                shim[4] = (char *) tenant;
                shim[5] = (char *) "--";
                memcpy(shim + 6, cmd, (n + 1) * sizeof(*cmd));
                ways[nw][0] = (struct way) { .argv = cmd };
                ways[nw][1] = (struct way) { .argv = cmd, .preload = TCMALLOC_SONAME };
                ways[nw][2] = (struct way) { .argv = shim };
                for (unsigned k = 0; k < NWAYS; k++)
                        cases[nw][k] = (struct bench_case) { .name = way_names[k], .run = way_run,
                                                             .ctx = &ways[nw][k], .iters = 1,
                                                             .aux = &ways[nw][k].cpu_ms };
        }
        for (size_t w = 0; w < nw; w++)
                bench_run(cases[w], NWAYS, &opts);

        bench_table_begin("Table 17: real programs under membroker-run",
                          "Does an unmodified program run as fast with its malloc() on the broker? Each workload "
                          "plainly (glibc), with tcmalloc preloaded and under membroker-run (the shim, the "
                          "tenant check of membroker-run included); wall and CPU (user + system) ms per run, "
                          "median of the repetitions, ratios to glibc.");
        bench_table_columns("workload", "allocator", "wall ms", "wall min–max", "wall / glibc", "CPU ms",
                            "CPU / glibc", NULL);
        for (size_t w = 0; w < nw; w++) {
                const struct bench_case *g = &cases[w][0];

                for (unsigned k = 0; k < NWAYS; k++) {
                        const struct bench_case *c = &cases[w][k];
                        char med[32], lo[32], hi[32], spread[80], ratio[32], cpu[32], cratio[32];

                        if (c->skip || g->skip) {
                                bench_table_cells(names[w], c->name, "failed", "", "", "", "", NULL);
                                continue;
                        }
                        bench_fmt(med, sizeof med, c->stat.median);
                        snprintf(spread, sizeof spread, "%s–%s", bench_fmt(lo, sizeof lo, c->stat.min),
                                 bench_fmt(hi, sizeof hi, c->stat.max));
                        if (k == 0)
                                snprintf(ratio, sizeof ratio, "1.00× (base)");
                        else
                                bench_fmt_ratio(ratio, sizeof ratio, c->stat.median / g->stat.median);
                        bench_fmt(cpu, sizeof cpu, c->aux_stat.median);
                        if (k == 0)
                                snprintf(cratio, sizeof cratio, "1.00× (base)");
                        else
                                bench_fmt_ratio(cratio, sizeof cratio, c->aux_stat.median / g->aux_stat.median);
                        bench_table_cells(names[w], c->name, med, spread, ratio, cpu, cratio, NULL);
                }
        }
        bench_note("%s", "");
        bench_note_round_trip();
        for (size_t w = 0; w < nw; w++) {
                const struct bench_case *g = &cases[w][0], *m = &cases[w][2];
                char t[160], a[32], b[32], r[32];

                if (g->skip || m->skip)
                        continue;
                snprintf(t, sizeof t, "%s under membroker-run within %.1f× of glibc's wall time", names[w],
                         TARGET_RATIO);
                bench_target(m->stat.median <= TARGET_RATIO * g->stat.median, t, "%s ms against %s ms: %s",
                             bench_fmt(a, sizeof a, m->stat.median), bench_fmt(b, sizeof b, g->stat.median),
                             bench_fmt_ratio(r, sizeof r, m->stat.median / g->stat.median));
        }
        return bench_finish();
}
