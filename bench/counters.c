/* SPDX-License-Identifier: MIT */
/*
 * counters.c - table 4, counter layout (the kernel's page_counter field layout): the padded page_counter
 * (usage on its own cache line, limits on another) against the unpadded
 * layout, with two threads charging while limits are read.
 *
 * Built twice: bench-counters links libmbcore (padded), and
 * bench-counters-unpadded links libmbcore-unpadded (-DPAGE_COUNTER_UNPADDED).
 * The two layouts cannot live in one process (same symbols, different
 * struct), so the driver (bench-counters) measures every sample in a fresh
 * child process of either binary ("--sample WORKLOAD --iters N", which prints
 * ns per operation), interleaving the two layouts sample by sample.
 *
 * The hierarchy is the seed's: three levels under the root, the top level
 * with memory.min and memory.low set, max and high set at every level.  Each
 * operation is what the daemon does for one charge: page_counter_try_charge()
 * of one page (which reads `max` at every level), then the kernel's
 * post-charge check of `high` at every level (try_charge() in
 * mm/memcontrol.c), then page_counter_uncharge().  Each counter sits at the
 * start of its own heap object with the rest of a tenant after it, aligned
 * as its type asks (64 bytes padded, malloc's 16 unpadded).
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "page_counter.h"

#define TENANT_REST_BYTES 512 /* the rest of a struct tenant after the counter */
#define LEVELS 4              /* root + three levels */

#ifdef PAGE_COUNTER_UNPADDED
#  define LAYOUT "unpadded"
#else
#  define LAYOUT "padded"
#endif

enum workload {
        W_SAME,     /* 2 threads charge the same leaf */
        W_SIBLINGS, /* 2 threads charge two sibling leaves */
        W_READER,   /* 1 thread charges, 1 thread reads limits in a loop */
        _W_NR,
};

static const char *const workload_name[_W_NR] = {
        [W_SAME] = "same",
        [W_SIBLINGS] = "siblings",
        [W_READER] = "reader",
};

static const char *const workload_desc[_W_NR] __attribute__((unused)) = {
        [W_SAME] = "2 threads charge one tenant",
        [W_SIBLINGS] = "2 threads charge sibling tenants",
        [W_READER] = "1 thread charges, 1 reads limits",
};

struct hierarchy {
        struct page_counter *level[LEVELS]; /* root, top, mid, leaf */
        struct page_counter *leaf2;         /* sibling of level[3] */
        _Atomic bool stop;
        _Atomic unsigned long sink;
        uint64_t cpu_ns[2]; /* CPU time of each charging thread */
};



static struct page_counter *counter_new(struct page_counter *parent) {
        size_t align = _Alignof(struct page_counter) > 16 ? _Alignof(struct page_counter) : 16;
        void *p = NULL;

        if (posix_memalign(&p, align, sizeof(struct page_counter) + TENANT_REST_BYTES) != 0)
                abort();
        memset(p, 0, sizeof(struct page_counter) + TENANT_REST_BYTES);
        page_counter_init(p, parent, true);
        return p;
}

static void hierarchy_init(struct hierarchy *h) {
        const unsigned long max_pages = 1UL << 30, high_pages = 1UL << 29;

        *h = (struct hierarchy) {};
        h->level[0] = counter_new(NULL);
        for (unsigned i = 1; i < LEVELS; i++)
                h->level[i] = counter_new(h->level[i - 1]);
        h->leaf2 = counter_new(h->level[LEVELS - 2]);

        for (unsigned i = 1; i < LEVELS; i++) {
                (void) page_counter_set_max(h->level[i], max_pages);
                (void) page_counter_set_high(h->level[i], high_pages);
        }
        (void) page_counter_set_max(h->leaf2, max_pages);
        (void) page_counter_set_high(h->leaf2, high_pages);
        /* the MEMCG_CHARGE_BATCH measurement's setup: min and low at the top level only */
        (void) page_counter_set_min(h->level[1], 1024);
        (void) page_counter_set_low(h->level[1], 2048);
        /* some usage, so that the protected usage is below min */
        page_counter_charge(h->level[LEVELS - 1], 16);
}

static void charge_loop(struct hierarchy *h, struct page_counter *leaf, uint64_t iters) {
        unsigned long over = 0;

        for (uint64_t i = 0; i < iters; i++) {
                struct page_counter *fail;

                if (!page_counter_try_charge(leaf, 1, &fail))
                        abort();
                /* try_charge()'s "over memory.high?" walk */
                for (struct page_counter *c = leaf; c; c = c->parent)
                        if (page_counter_read(c) > page_counter_get_high(c))
                                over++;
                page_counter_uncharge(leaf, 1);
        }
        atomic_fetch_add_explicit(&h->sink, over, memory_order_relaxed);
}

static void read_loop(struct hierarchy *h) {
        unsigned long sum = 0;

        while (!atomic_load_explicit(&h->stop, memory_order_relaxed))
                for (unsigned i = 0; i < LEVELS; i++) {
                        struct page_counter *c = h->level[i];
                        sum += page_counter_get_max(c) + page_counter_get_high(c) +
                               page_counter_get_low(c) + page_counter_get_min(c) +
                               atomic_load_explicit(&c->emin, memory_order_relaxed) +
                               atomic_load_explicit(&c->elow, memory_order_relaxed);
                }
        atomic_fetch_add_explicit(&h->sink, sum, memory_order_relaxed);
}

struct sample_ctx {
        struct hierarchy *h;
        enum workload w;
};

static void sample_thread(void *arg, unsigned tid, uint64_t iters) {
        struct sample_ctx *s = arg;
        struct hierarchy *h = s->h;

        uint64_t c0 = bench_thread_cpu_ns();

        switch (s->w) {
        case W_SAME:
                charge_loop(h, h->level[LEVELS - 1], iters);
                break;
        case W_SIBLINGS:
                charge_loop(h, tid == 0 ? h->level[LEVELS - 1] : h->leaf2, iters);
                break;
        case W_READER:
                if (tid == 0) {
                        charge_loop(h, h->level[LEVELS - 1], iters);
                        atomic_store(&h->stop, true);
                } else
                        read_loop(h);
                break;
        default:
                abort();
        }
        h->cpu_ns[tid] = bench_thread_cpu_ns() - c0;
}

/* One sample in this process: ns per charge+check+uncharge per charging
 * thread. */
static int run_sample(const char *name, uint64_t iters) {
        struct hierarchy h;
        struct sample_ctx s = { .h = &h };
        double ns;
        int w;

        for (w = 0; w < _W_NR; w++)
                if (strcmp(name, workload_name[w]) == 0)
                        break;
        if (w == _W_NR) {
                fprintf(stderr, "bench-counters: unknown workload %s\n", name);
                return 2;
        }
        s.w = (enum workload) w;
        hierarchy_init(&h);
        charge_loop(&h, h.level[LEVELS - 1], iters / 16 + 1); /* warm */
        (void) bench_threads(2, sample_thread, &s, iters, true);
        /* CPU time per charge of the charging threads only */
        ns = s.w == W_READER ? (double) h.cpu_ns[0] : (double) (h.cpu_ns[0] + h.cpu_ns[1]) / 2;
        {
                uintptr_t u = (uintptr_t) &h.level[LEVELS - 1]->usage;
                uintptr_t m = (uintptr_t) &h.level[LEVELS - 1]->max;

                printf("%.4f %lu %d\n", ns / (double) iters, (unsigned long) (u % 64), u / 64 == m / 64);
        }
        return 0;
}

#ifndef PAGE_COUNTER_UNPADDED
struct spawn_ctx {
        char prog[PATH_MAX];
        const char *workload;
};

static double spawn_run(void *ctx, uint64_t iters) {
        struct spawn_ctx *s = ctx;
        char out[256], it[32];
        char *argv[] = { s->prog, (char *) "--sample", (char *) s->workload, (char *) "--iters", it, NULL };

        snprintf(it, sizeof it, "%llu", (unsigned long long) iters);
        if (bench_spawn(argv, out, sizeof out) < 0)
                return -1;
        return strtod(out, NULL);
}

static void bin_path(char *buf, size_t size, const char *argv0, const char *name) {
        const char *dir = getenv("MB_BENCH_DIR");
        char tmp[PATH_MAX];

        if (!dir || !*dir) {
                snprintf(tmp, sizeof tmp, "%s", argv0);
                dir = dirname(tmp);
        }
        snprintf(buf, size, "%s/%s", dir, name);
}

static int drive(const char *argv0) {
        struct bench_opts o;
        struct spawn_ctx ctx[2][_W_NR];
        struct bench_case cases[2 * _W_NR];
        char names[2 * _W_NR][96];
        size_t n = 0;

        bench_opts_init(&o);
        for (unsigned layout = 0; layout < 2; layout++)
                for (unsigned w = 0; w < _W_NR; w++) {
                        struct spawn_ctx *s = &ctx[layout][w];

                        bin_path(s->prog, sizeof s->prog, argv0,
                                 layout == 0 ? "bench-counters-unpadded" : "bench-counters");
                        s->workload = workload_name[w];
                        snprintf(names[n], sizeof names[n], "%s, %s", workload_desc[w],
                                 layout == 0 ? "unpadded" : "padded");
                        cases[n] = (struct bench_case) {
                                .name = names[n],
                                .run = spawn_run,
                                .ctx = s,
                                .min_iters = bench_count(&o, 1 << 16, 1 << 10),
                                .ns_per_iter = true,
                                .max_iters = bench_count(&o, 1 << 26, 1 << 12),
                        };
                        n++;
                }
        /* both layouts of a workload measure the same number of operations */
        for (unsigned w = 0; w < _W_NR; w++) {
                bench_run(&cases[w], 1, &(struct bench_opts) { .quick = o.quick, .reps = 1, .sample_ns = o.sample_ns });
                cases[w].nsamples = 0;
                cases[_W_NR + w].iters = cases[w].iters;
        }
        bench_run(cases, n, &o);

        bench_table_begin("Table 4: counter layout (the kernel's page_counter field layout)",
                          "Padded page_counter (usage alone on its cache line) vs the unpadded layout, "
                          "two threads on two CPUs, three levels under the root (min/low at the top, "
                          "max/high everywhere). One operation = try_charge(1 page) + high check at every "
                          "level + uncharge. Figures: CPU ns per operation per charging thread (time "
                          "preempted by other processes does not count), each sample a fresh process.");
        bench_table_columns("workload, layout", "ns/op (median)", "min–max", "ratio to unpadded, same workload", NULL);
        for (unsigned w = 0; w < _W_NR; w++) {
                bench_table_row(&cases[w], &cases[w]);
                bench_table_row(&cases[_W_NR + w], &cases[w]);
        }
        putchar('\n');
        {
                char out[256];
                char *argv[] = { ctx[0][0].prog, (char *) "--sample", (char *) "same", (char *) "--iters",
                                 (char *) "16", NULL };
                unsigned long u = 0;
                int same = 0;

                if (bench_spawn(argv, out, sizeof out) >= 0 && sscanf(out, "%*f %lu %d", &u, &same) == 2)
                        bench_note("Unpadded leaf counter: usage at byte %lu of its cache line, max on %s line. "
                                   "Padded: usage alone on its line by construction.",
                                   u, same ? "the same" : "another");
        }
        if (!cases[W_SAME].skip && !cases[_W_NR + W_SAME].skip) {
                double r = cases[_W_NR + W_SAME].stat.median / cases[W_SAME].stat.median;
                char rb[32];

                bench_target(r < 1.0, "padded beats unpadded, 2 threads charging",
                             "padded/unpadded time = %s, 2 threads charging one tenant",
                             bench_fmt_ratio(rb, sizeof rb, r));
        }
        return bench_finish();
}
#endif

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "sample", required_argument, NULL, 's' },
                { "iters", required_argument, NULL, 'i' },
                {}
        };
        const char *sample = NULL;
        uint64_t iters = 1 << 16;
        int c;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) >= 0)
                switch (c) {
                case 's':
                        sample = optarg;
                        break;
                case 'i':
                        iters = strtoull(optarg, NULL, 10);
                        break;
                default:
                        return 2;
                }
        if (sample)
                return run_sample(sample, iters ? iters : 1);
#ifdef PAGE_COUNTER_UNPADDED
        fprintf(stderr, "bench-counters-unpadded: run bench-counters (it drives both layouts)\n");
        return 2;
#else
        return drive(argv[0]);
#endif
}
