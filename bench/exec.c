/* SPDX-License-Identifier: MIT */
/*
 * exec.c - bench-exec: time whole commands side by side (table 7 and the
 * like), with the harness's warm-up, interleaved repetitions, median and
 * spread.
 *
 *   bench-exec [--title T] [--question Q] [--base N]
 *              [[--within F] --target "TEXT" A B]...
 *                  (met when case A takes less than F times, default 1, the
 *                  time of case B; up to 4 targets)
 *              NAME ARGVFILE [NAME ARGVFILE ...]
 *
 * ARGVFILE holds the command, one argument per line (no shell, no quoting
 * games; 1,000 file names are 1,000 lines).  "skip:REASON" instead of a file
 * name prints the row as skipped.  Each sample is one run of the command,
 * its output thrown away; figures are milliseconds; the ratio column is
 * relative to case N (1-based, default 1).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MAX_CASES 16
#define MAX_TARGETS 4

struct cmd {
        char **argv;
};

static double cmd_run(void *ctx, uint64_t iters) {
        struct cmd *c = ctx;
        double total = 0;

        for (uint64_t i = 0; i < iters; i++) {
                double ns = bench_spawn(c->argv, NULL, 0);
                if (ns < 0) {
                        fprintf(stderr, "bench-exec: %s failed\n", c->argv[0]);
                        return -1;
                }
                total += ns;
        }
        return total / (double) iters / 1e6;
}

static int read_argv(const char *file, char ***ret) {
        FILE *f = fopen(file, "re");
        char *line = NULL, **argv = NULL;
        size_t cap = 0, n = 0, acap = 0;
        ssize_t len;

        if (!f)
                return -errno;
        while ((len = getline(&line, &cap, f)) >= 0) {
                if (len > 0 && line[len - 1] == '\n')
                        line[len - 1] = 0;
                if (n + 2 > acap) {
                        acap = acap ? acap * 2 : 64;
                        argv = realloc(argv, acap * sizeof(char *));
                        if (!argv)
                                abort();
                }
                argv[n++] = strdup(line);
        }
        free(line);
        fclose(f);
        if (n == 0)
                return -EINVAL;
        argv[n] = NULL;
        *ret = argv;
        return 0;
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "title", required_argument, NULL, 't' },
                { "question", required_argument, NULL, 'q' },
                { "base", required_argument, NULL, 'b' },
                { "target", required_argument, NULL, 'T' },
                { "within", required_argument, NULL, 'W' },
                {}
        };
        const char *title = "commands", *question = NULL, *target[MAX_TARGETS];
        int base = 1, ta[MAX_TARGETS], tb[MAX_TARGETS], c;
        double within = 1.0, tf[MAX_TARGETS];
        size_t ntargets = 0;
        struct bench_case cases[MAX_CASES];
        struct cmd cmds[MAX_CASES];
        struct bench_opts o;
        size_t n = 0;

        while ((c = getopt_long(argc, argv, "+", opts, NULL)) >= 0)
                switch (c) {
                case 't':
                        title = optarg;
                        break;
                case 'q':
                        question = optarg;
                        break;
                case 'b':
                        base = atoi(optarg);
                        break;
                case 'W':
                        within = atof(optarg);
                        if (within <= 0)
                                return 2;
                        break;
                case 'T':
                        if (optind + 1 >= argc || ntargets == MAX_TARGETS)
                                return 2;
                        target[ntargets] = optarg;
                        ta[ntargets] = atoi(argv[optind++]);
                        tb[ntargets] = atoi(argv[optind++]);
                        tf[ntargets++] = within;
                        within = 1.0;
                        break;
                default:
                        return 2;
                }
        bench_opts_init(&o);
        for (int i = optind; i + 1 < argc && n < MAX_CASES; i += 2, n++) {
                cases[n] = (struct bench_case) { .name = argv[i], .run = cmd_run, .ctx = &cmds[n], .iters = 1 };
                if (strncmp(argv[i + 1], "skip:", 5) == 0) {
                        cases[n].skip = true;
                        cases[n].skip_reason = argv[i + 1] + 5;
                } else if (read_argv(argv[i + 1], &cmds[n].argv) < 0) {
                        fprintf(stderr, "bench-exec: cannot read %s\n", argv[i + 1]);
                        return 2;
                }
        }
        if (n == 0 || base < 1 || (size_t) base > n)
                return 2;

        bench_run(cases, n, &o);
        bench_table_begin(title, question);
        {
                char rhead[300];
                snprintf(rhead, sizeof rhead, "ratio to %s", cases[base - 1].name);
                bench_table_columns("command", "ms (median)", "min–max", rhead, NULL);
        }
        for (size_t i = 0; i < n; i++)
                bench_table_row(&cases[i], &cases[base - 1]);
        putchar('\n');
        for (size_t t = 0; t < ntargets; t++) {
                struct bench_case *a, *b;
                char rb[32];

                if (ta[t] < 1 || tb[t] < 1 || (size_t) ta[t] > n || (size_t) tb[t] > n)
                        continue;
                a = &cases[ta[t] - 1];
                b = &cases[tb[t] - 1];
                if (a->skip || b->skip)
                        printf("- target \"%s\": not measured (%s skipped)\n", target[t],
                               a->skip ? a->name : b->name);
                else
                        bench_target(a->stat.median < tf[t] * b->stat.median, target[t], "%s takes %s the time of %s",
                                     a->name, bench_fmt_ratio(rb, sizeof rb, a->stat.median / b->stat.median),
                                     b->name);
        }
        return bench_finish();
}
