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
 *
 * With --patterns (table 18, the allocation patterns of bench-patterns):
 * jemalloc and mimalloc too, the peak RSS of each run (wait4()'s
 * ru_maxrss), and the targets: each pattern under the shim within 1.25× of
 * the best of the four others' wall time, and the large blocks' RSS within
 * 1.1× of glibc's.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define MAX_WORKLOADS 8
#define MAX_WAYS 5
#define TARGET_RATIO 1.1
#define BEST_RATIO 1.25
#define RSS_RATIO 1.1

/* The ways a workload runs; the shim last.  Table 17 takes the first two
 * peers (glibc, tcmalloc), --patterns all four. */
static const struct {
        const char *name, *preload;
} way_defs[MAX_WAYS - 1] = {
        { "glibc", NULL },
        { "tcmalloc (LD_PRELOAD)", "libtcmalloc_minimal.so.4" },
        { "jemalloc (LD_PRELOAD)", "libjemalloc.so.2" },
        { "mimalloc (LD_PRELOAD)", "libmimalloc.so.2" },
};
#define SHIM_NAME "membroker-run (the shim)"

struct way {
        char **argv;
        const char *preload;  /* LD_PRELOAD for the child, or NULL */
        double cpu_ms;        /* the last sample's CPU time */
        double rss_kb;        /* the highest peak RSS of its runs */
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
                if ((double) ru.ru_maxrss > w->rss_kb)
                        w->rss_kb = (double) ru.ru_maxrss;
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

static void fmt_rss(char *buf, size_t size, double kb) {
        snprintf(buf, size, "%.1f", kb / 1024.0);
}

int main(int argc, char **argv) {
        static const struct option opts_long[] = {
                { "run", required_argument, NULL, 'r' },
                { "socket", required_argument, NULL, 's' },
                { "tenant", required_argument, NULL, 't' },
                { "patterns", no_argument, NULL, 'p' },
                {},
        };
        static struct way ways[MAX_WORKLOADS][MAX_WAYS];
        static struct bench_case cases[MAX_WORKLOADS][MAX_WAYS];
        const char *run = NULL, *sock = NULL, *tenant = NULL, *names[MAX_WORKLOADS];
        bool patterns = false;
        unsigned nways, shim;
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
                case 'p':
                        patterns = true;
                        break;
                default:
                        return 2;
                }
        if (!run || !sock || !tenant || (argc - optind) % 2 != 0 || argc == optind) {
                fprintf(stderr, "usage: bench-programs [--patterns] --run PATH --socket PATH --tenant T "
                                "WORKLOAD ARGVFILE...\n");
                return 2;
        }
        nways = patterns ? MAX_WAYS : 3;
        shim = nways - 1;
        bench_opts_init(&opts);
        if (opts.reps > 5 && !getenv("MB_BENCH_REPS"))
                opts.reps = 5; /* whole programs: a second each */

        for (int i = optind; i + 1 < argc && nw < MAX_WORKLOADS; i += 2, nw++) {
                char **cmd = NULL, **shim_argv;
                size_t n = 0;
                int r = read_argv(argv[i + 1], &cmd, &n);

                names[nw] = argv[i];
                if (r < 0) {
                        fprintf(stderr, "bench-programs: %s: %s\n", argv[i + 1], strerror(-r));
                        return 2;
                }
                shim_argv = calloc(n + 7, sizeof(*shim_argv));
                if (!shim_argv)
                        return 2;
                shim_argv[0] = (char *) run;
                shim_argv[1] = (char *) "--socket";
                shim_argv[2] = (char *) sock;
                shim_argv[3] = (char *) "--tenant";
                shim_argv[4] = (char *) tenant;
                shim_argv[5] = (char *) "--";
                memcpy(shim_argv + 6, cmd, (n + 1) * sizeof(*cmd));
                for (unsigned k = 0; k < shim; k++)
                        ways[nw][k] = (struct way) { .argv = cmd, .preload = way_defs[k].preload };
                ways[nw][shim] = (struct way) { .argv = shim_argv };
                for (unsigned k = 0; k < nways; k++)
                        cases[nw][k] = (struct bench_case) { .name = k == shim ? SHIM_NAME : way_defs[k].name,
                                                             .run = way_run, .ctx = &ways[nw][k], .iters = 1,
                                                             .aux = &ways[nw][k].cpu_ms };
        }
        for (size_t w = 0; w < nw; w++)
                bench_run(cases[w], nways, &opts);

        if (patterns) {
                bench_table_begin("Table 18: allocation patterns under membroker-run",
                                  "Is the shim as fast as the allocator a user would preload instead, on the "
                                  "patterns allocators are judged by? bench-patterns (one program, nothing but "
                                  "malloc and free) plainly (glibc), with tcmalloc, jemalloc and mimalloc "
                                  "preloaded, and under membroker-run; wall and CPU (user + system) ms per run, "
                                  "median of the repetitions, ratios to the best of the four peers; peak RSS "
                                  "(the highest of the runs).");
                bench_table_columns("pattern", "allocator", "wall ms", "wall min–max", "wall / best peer", "CPU ms",
                                    "peak RSS MiB", NULL);
        } else {
                bench_table_begin("Table 17: real programs under membroker-run",
                                  "Does an unmodified program run as fast with its malloc() on the broker? Each "
                                  "workload plainly (glibc), with tcmalloc preloaded and under membroker-run (the "
                                  "shim, the tenant check of membroker-run included); wall and CPU (user + "
                                  "system) ms per run, median of the repetitions, ratios to glibc.");
                bench_table_columns("workload", "allocator", "wall ms", "wall min–max", "wall / glibc", "CPU ms",
                                    "CPU / glibc", NULL);
        }
        for (size_t w = 0; w < nw; w++) {
                const struct bench_case *g = &cases[w][0], *best = NULL;

                for (unsigned k = 0; k < shim; k++)
                        if (!cases[w][k].skip && (!best || cases[w][k].stat.median < best->stat.median))
                                best = &cases[w][k];
                for (unsigned k = 0; k < nways; k++) {
                        const struct bench_case *c = &cases[w][k], *base = patterns ? best : g;
                        char med[32], lo[32], hi[32], spread[80], ratio[32], cpu[32], last[32];

                        if (c->skip || !base) {
                                bench_table_cells(names[w], c->name, "failed", "", "", "", "", NULL);
                                continue;
                        }
                        bench_fmt(med, sizeof med, c->stat.median);
                        snprintf(spread, sizeof spread, "%s–%s", bench_fmt(lo, sizeof lo, c->stat.min),
                                 bench_fmt(hi, sizeof hi, c->stat.max));
                        if (c == base)
                                snprintf(ratio, sizeof ratio, "1.00× (%s)", patterns ? "best" : "base");
                        else
                                bench_fmt_ratio(ratio, sizeof ratio, c->stat.median / base->stat.median);
                        bench_fmt(cpu, sizeof cpu, c->aux_stat.median);
                        if (patterns)
                                fmt_rss(last, sizeof last, ways[w][k].rss_kb);
                        else if (k == 0)
                                snprintf(last, sizeof last, "1.00× (base)");
                        else
                                bench_fmt_ratio(last, sizeof last, c->aux_stat.median / g->aux_stat.median);
                        bench_table_cells(names[w], c->name, med, spread, ratio, cpu, last, NULL);
                }
        }
        bench_note("%s", "");
        bench_note_round_trip();
        for (size_t w = 0; w < nw; w++) {
                const struct bench_case *g = &cases[w][0], *m = &cases[w][shim], *best = NULL;
                char t[200], a[32], b[32], r[32];

                for (unsigned k = 0; k < shim; k++)
                        if (!cases[w][k].skip && (!best || cases[w][k].stat.median < best->stat.median))
                                best = &cases[w][k];
                if (g->skip || m->skip || !best)
                        continue;
                if (!patterns) {
                        snprintf(t, sizeof t, "%s under membroker-run within %.1f× of glibc's wall time", names[w],
                                 TARGET_RATIO);
                        bench_target(m->stat.median <= TARGET_RATIO * g->stat.median, t, "%s ms against %s ms: %s",
                                     bench_fmt(a, sizeof a, m->stat.median), bench_fmt(b, sizeof b, g->stat.median),
                                     bench_fmt_ratio(r, sizeof r, m->stat.median / g->stat.median));
                        continue;
                }
                snprintf(t, sizeof t, "%s under membroker-run within %.2f× of the best peer's wall time", names[w],
                         BEST_RATIO);
                bench_target(m->stat.median <= BEST_RATIO * best->stat.median, t, "%s ms against %s's %s ms: %s",
                             bench_fmt(a, sizeof a, m->stat.median), best->name,
                             bench_fmt(b, sizeof b, best->stat.median),
                             bench_fmt_ratio(r, sizeof r, m->stat.median / best->stat.median));
                if (strncmp(names[w], "large", 5) == 0) {
                        double rm = ways[w][shim].rss_kb, rg = ways[w][0].rss_kb;

                        snprintf(t, sizeof t, "%s: peak RSS under membroker-run within %.1f× of glibc's", names[w],
                                 RSS_RATIO);
                        fmt_rss(a, sizeof a, rm);
                        fmt_rss(b, sizeof b, rg);
                        bench_target(rm <= RSS_RATIO * rg, t, "%s MiB against %s MiB: %s", a, b,
                                     bench_fmt_ratio(r, sizeof r, rm / rg));
                }
        }
        return bench_finish();
}
