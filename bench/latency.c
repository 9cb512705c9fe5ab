/* SPDX-License-Identifier: MIT */
/*
 * latency.c - table 13: what an application feels.  The latency of each
 * page allocation under a steady churn, not the throughput of a loop:
 * p50, p99, p99.9 and max of mb_page_alloc() in a limited and in an
 * unlimited tenant, with the pages touched and not, beside malloc(4096)
 * of glibc and of tcmalloc (preloaded into a child of its own) and the
 * kernel's per-page path (mmap of one page, munmap on free), all under the
 * same churn, with the cross-CPU round trip of the same run.
 *
 * The churn: ROUNDS times, allocate WINDOW pages one at a time at RATE
 * pages per second (a busy-waiting pace: a sleep is coarser than the
 * interval), then free them at the same rate, the oldest first; every
 * allocation is timed alone (two CLOCK_MONOTONIC reads).  The allocating
 * thread is pinned to one CPU (after mb_connect(): the library's thread
 * is not).  Each case runs in a child process of this program:
 *
 *   bench-latency                       the table (MEMBROKER_SOCKET: the
 *                                       daemon; tenants "lim" and "unl")
 *   bench-latency --child KIND TOUCH    one case; prints
 *                                       "p50 p99 p999 max rate misses" (ns,
 *                                       pages/s); KIND: mb:TENANT, malloc,
 *                                       mmap
 *
 * Environment: MB_BENCH_QUICK=1 (a short churn), MB_LAT_RATE (pages/s,
 * default 100000), MB_LAT_WINDOW (default 65536), MB_LAT_ROUNDS (default 2).
 *
 * Table 13b, huge pages: bytes per second of pages allocated and touched
 * (one byte written in every 4 KiB of each page: all of it backed) at full
 * speed, with PageSize=4K and with PageSize=2M on 4 KiB shmem pages, on
 * shmem THP and on hugetlb pages.  PageSize= is the daemon's: one daemon
 * per row, started by bench/mb-bench.sh, each row one child:
 *
 *   bench-latency --bytes               one row (MEMBROKER_SOCKET, tenant
 *                                       "t"): prints "bytes_per_s p50 p99
 *                                       p999 page_size" (ns per page
 *                                       allocated and touched)
 *   bench-latency --huge LABEL=FILE...  the table from the rows' outputs
 *                                       (a FILE holding "skipped: why"
 *                                       prints that); the first row is the
 *                                       4 KiB base
 *
 * MB_HUGE_WINDOW_MIB (default 128, quick 4) and MB_HUGE_ROUNDS (default 8,
 * quick 1): each round allocates and touches that many MiB, then frees it.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "core/mb_internal.h"
#include "membroker.h"

#define LAT_PAGE_BYTES 4096u

struct churn {
        uint64_t rate, window, rounds;
        bool touch;
};

static uint64_t env_u64(const char *name, uint64_t def) {
        const char *e = getenv(name);

        return e && *e ? strtoull(e, NULL, 10) : def;
}

static void churn_params(struct churn *ret) {
        bool quick = getenv("MB_BENCH_QUICK") && strcmp(getenv("MB_BENCH_QUICK"), "0") != 0;

        ret->rate = env_u64("MB_LAT_RATE", 100000);
        ret->window = env_u64("MB_LAT_WINDOW", quick ? 2048 : 65536);
        ret->rounds = env_u64("MB_LAT_ROUNDS", quick ? 1 : 2);
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

static void pin_first_cpu(void) {
        cpu_set_t set;

        if (sched_getaffinity(0, sizeof(set), &set) < 0)
                return;
        for (int i = 0; i < CPU_SETSIZE; i++)
                if (CPU_ISSET(i, &set)) {
                        CPU_ZERO(&set);
                        CPU_SET(i, &set);
                        (void) sched_setaffinity(0, sizeof(set), &set);
                        return;
                }
}

enum kind { KIND_MB, KIND_MALLOC, KIND_MMAP };

/* One case in this process: print "p50 p99 p999 max rate misses". */
static int child(const char *kindarg, bool touch) {
        enum kind kind = strncmp(kindarg, "mb:", 3) == 0 ? KIND_MB
                         : strcmp(kindarg, "malloc") == 0 ? KIND_MALLOC : KIND_MMAP;
        struct churn ch;
        mb_client *c = NULL;
        uint64_t *lat, nlat = 0, interval, next, phase, alloc_ns = 0, misses = 0;
        void **live;

        churn_params(&ch);
        ch.touch = touch;
        if (kind == KIND_MB && mb_connect(NULL, kindarg + 3, &c) < 0) {
                fprintf(stderr, "mb_connect %s: %s\n", kindarg + 3, mb_last_error());
                return 2;
        }
        pin_first_cpu();
        lat = calloc(ch.window * ch.rounds, sizeof(*lat));
        live = calloc(ch.window, sizeof(*live));
        if (!lat || !live)
                return 2;
        /* Warm: one allocation and free outside the figures. */
        if (kind == KIND_MB) {
                void *p = mb_page_alloc(c);

                if (!p || mb_page_free(c, p) < 0)
                        return 2;
                misses = mb_client_stock_misses(c);
        }
        interval = 1000000000ull / (ch.rate ? ch.rate : 1);
        next = bench_now_ns();
        for (uint64_t r = 0; r < ch.rounds; r++) {
                phase = bench_now_ns();
                for (uint64_t i = 0; i < ch.window; i++) {
                        uint64_t a, b;
                        void *p;

                        while (bench_now_ns() < next)
                                ;
                        next += interval;
                        a = bench_now_ns();
                        if (kind == KIND_MB)
                                p = mb_page_alloc(c);
                        else if (kind == KIND_MALLOC)
                                p = malloc(LAT_PAGE_BYTES);
                        else {
                                p = mmap(NULL, LAT_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                         -1, 0);
                                if (p == MAP_FAILED)
                                        p = NULL;
                        }
                        if (p && touch)
                                *(volatile char *) p = 1;
                        b = bench_now_ns();
                        if (!p) {
                                fprintf(stderr, "allocation %" PRIu64 " failed\n", nlat);
                                return 3;
                        }
                        live[i] = p;
                        lat[nlat++] = b - a;
                }
                alloc_ns += bench_now_ns() - phase;
                for (uint64_t i = 0; i < ch.window; i++) {
                        while (bench_now_ns() < next)
                                ;
                        next += interval;
                        if (kind == KIND_MB)
                                (void) mb_page_free(c, live[i]);
                        else if (kind == KIND_MALLOC)
                                free(live[i]);
                        else
                                (void) munmap(live[i], LAT_PAGE_BYTES);
                }
        }
        {
                /* allocations per second while allocating */
                double rate = (double) nlat / ((double) alloc_ns / 1e9);

                if (kind == KIND_MB)
                        misses = mb_client_stock_misses(c) - misses;
                qsort(lat, nlat, sizeof(*lat), cmp_u64);
                printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %.0f %" PRIu64 "\n", lat[nlat / 2],
                       lat[nlat * 99 / 100], lat[nlat * 999 / 1000], lat[nlat - 1], rate, misses);
        }
        free(lat);
        free(live);
        mb_close(c);
        return 0;
}

/* Table 13b's row: pages allocated and touched at full speed. */
static int bytes_child(void) {
        bool quick = getenv("MB_BENCH_QUICK") && strcmp(getenv("MB_BENCH_QUICK"), "0") != 0;
        uint64_t window_bytes = env_u64("MB_HUGE_WINDOW_MIB", quick ? 4 : 128) << 20;
        uint64_t rounds = env_u64("MB_HUGE_ROUNDS", quick ? 1 : 8), npages, nlat = 0, busy_ns = 0;
        mb_client *c = NULL;
        size_t page;
        uint64_t *lat;
        void **live;

        if (mb_connect(NULL, "t", &c) < 0) {
                fprintf(stderr, "mb_connect t: %s\n", mb_last_error());
                return 2;
        }
        pin_first_cpu();
        page = mb_page_size(c);
        npages = window_bytes / page ? window_bytes / page : 1;
        lat = calloc(npages * rounds, sizeof(*lat));
        live = calloc(npages, sizeof(*live));
        if (!lat || !live)
                return 2;
        for (uint64_t r = 0; r < rounds; r++) {
                uint64_t phase = bench_now_ns();

                for (uint64_t i = 0; i < npages; i++) {
                        uint64_t a = bench_now_ns(), b;
                        char *p = mb_page_alloc(c);

                        if (!p) {
                                fprintf(stderr, "allocation %" PRIu64 " failed: %s\n", nlat, strerror(errno));
                                return 3;
                        }
                        for (size_t off = 0; off < page; off += LAT_PAGE_BYTES)
                                ((volatile char *) p)[off] = 1;
                        b = bench_now_ns();
                        live[i] = p;
                        lat[nlat++] = b - a;
                }
                busy_ns += bench_now_ns() - phase;
                for (uint64_t i = 0; i < npages; i++)
                        (void) mb_page_free(c, live[i]);
        }
        qsort(lat, nlat, sizeof(*lat), cmp_u64);
        printf("%.0f %" PRIu64 " %" PRIu64 " %" PRIu64 " %zu\n", (double) (nlat * page) / ((double) busy_ns / 1e9),
               lat[nlat / 2], lat[nlat * 99 / 100], lat[nlat * 999 / 1000], page);
        free(lat);
        free(live);
        mb_close(c);
        return 0;
}

struct row {
        const char *name;
        const char *kind;
        bool touch;
        const char *preload;   /* soname, or NULL */
        const char *env;       /* NAME=VALUE for the child, or NULL */
        bool ok;
        uint64_t p50, p99, p999, max, misses;
        double rate;
        char why[160];
};

static void run_row(const char *self, struct row *r) {
        char touch[2] = { r->touch ? '1' : '0', 0 };
        char *argv[] = { (char *) self, (char *) "--child", (char *) r->kind, touch, NULL };
        char out[256] = "";
        double t;
        unsigned long long p50, p99, p999, max, misses;
        char *name = NULL;

        if (r->env) {
                name = strndup(r->env, strcspn(r->env, "="));
                setenv(name, strchr(r->env, '=') + 1, 1);
        }
        t = r->preload ? bench_spawn_preload(r->preload, argv, out, sizeof(out)) : bench_spawn(argv, out, sizeof(out));
        if (name) {
                unsetenv(name);
                free(name);
        }
        if (t < 0 || sscanf(out, "%llu %llu %llu %llu %lf %llu", &p50, &p99, &p999, &max, &r->rate, &misses) != 6) {
                snprintf(r->why, sizeof(r->why), "did not run (%s)", t < 0 ? strerror((int) -t) : "no figures");
                return;
        }
        r->ok = true;
        r->p50 = p50, r->p99 = p99, r->p999 = p999, r->max = max, r->misses = misses;
}

static const char *fmt_ns(char *buf, size_t size, uint64_t ns) {
        if (ns < 10000)
                snprintf(buf, size, "%" PRIu64 " ns", ns);
        else if (ns < 10000000)
                snprintf(buf, size, "%.1f µs", (double) ns / 1e3);
        else
                snprintf(buf, size, "%.1f ms", (double) ns / 1e6);
        return buf;
}

static const char *fmt_bytes_per_s(char *buf, size_t size, double v) {
        if (v >= 1e9)
                snprintf(buf, size, "%.2f GB/s", v / 1e9);
        else
                snprintf(buf, size, "%.0f MB/s", v / 1e6);
        return buf;
}

/* Table 13b from the rows' outputs (see the top of the file). */
static int huge_table(int n, char **specs) {
        double base = 0, rtt;
        char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
        unsigned ca, cb;

        bench_table_begin("Table 13b: huge pages, pages allocated and touched",
                          "How many bytes per second of pages does an application get, allocated and touched "
                          "(every 4 KiB written), with PageSize=2M on huge pages against 4 KiB pages?");
        rtt = bench_round_trip_ns(&ca, &cb);
        bench_table_columns("daemon", "bytes/s allocated and touched", "ratio to PageSize=4K",
                            "p50 per page", "p99 per page", "p99.9 per page", NULL);
        for (int i = 0; i < n; i++) {
                char label[128], line[256] = "", *eq = strrchr(specs[i], '=');
                unsigned long long p50, p99, p999, page;
                double bps;
                FILE *f;

                if (!eq)
                        return 2;
                snprintf(label, sizeof(label), "%.*s", (int) (eq - specs[i]), specs[i]);
                f = fopen(eq + 1, "re");
                if (f) {
                        if (!fgets(line, sizeof(line), f))
                                line[0] = '\0';
                        fclose(f);
                }
                line[strcspn(line, "\n")] = '\0';
                if (sscanf(line, "%lf %llu %llu %llu %llu", &bps, &p50, &p99, &p999, &page) != 5) {
                        bench_table_cells(label, line[0] ? line : "did not run", "", "", "", "", NULL);
                        continue;
                }
                if (i == 0)
                        base = bps;
                snprintf(b2, sizeof(b2), "%s", base > 0 ? bench_fmt_ratio(b6, sizeof(b6), bps / base) : "-");
                bench_table_cells(label, fmt_bytes_per_s(b1, sizeof(b1), bps), i == 0 ? "1.00× (base)" : b2,
                                  fmt_ns(b3, sizeof(b3), p50), fmt_ns(b4, sizeof(b4), p99),
                                  fmt_ns(b5, sizeof(b5), p999), NULL);
        }
        bench_note("Each row its own daemon (PageSize= is the broker's), one limited tenant (MemoryMax=3G; "
                   "ChargeBatch=64 with 4 KiB pages, 8 with 2 MiB ones); per round the application allocates "
                   "%s MiB one page at a time at full speed and writes one byte in every 4 KiB of each page, "
                   "then frees them; per page: mb_page_alloc() and the writes, timed together.",
                   getenv("MB_BENCH_QUICK") && strcmp(getenv("MB_BENCH_QUICK"), "0") != 0 ? "4" : "128");
        if (rtt > 0)
                bench_note("Cross-CPU round trip of this run (unix socketpair ping-pong, CPUs %u and %u): %s.", ca,
                           cb, fmt_ns(b1, sizeof(b1), (uint64_t) rtt));
        else
                bench_note("Cross-CPU round trip: not measured (%s).", strerror((int) -rtt));
        for (int i = 1; i < n && base > 0; i++) {
                char label[128], line[256] = "", *eq = strrchr(specs[i], '=');
                unsigned long long p50, p99, p999, page;
                double bps;
                FILE *f;

                snprintf(label, sizeof(label), "%.*s", (int) (eq - specs[i]), specs[i]);
                if (strstr(label, "HugePages=no") || !(f = fopen(eq + 1, "re")))
                        continue;
                if (!fgets(line, sizeof(line), f))
                        line[0] = '\0';
                fclose(f);
                if (sscanf(line, "%lf %llu %llu %llu %llu", &bps, &p50, &p99, &p999, &page) != 5)
                        continue;
                bench_target(bps >= 10 * base, "PageSize=2M on huge pages, touched: at least 10x the bytes/s of "
                             "4 KiB pages", "%s: %s against %s (%s)", label, fmt_bytes_per_s(b1, sizeof(b1), bps),
                             fmt_bytes_per_s(b2, sizeof(b2), base), bench_fmt_ratio(b3, sizeof(b3), bps / base));
        }
        return bench_finish();
}

int main(int argc, char **argv) {
        struct row rows[] = {
                { "mb_page_alloc(), limited tenant (ChargeBatch 64)", "mb:lim", false, NULL, NULL },
                { "mb_page_alloc(), limited, pages touched", "mb:lim", true, NULL, NULL },
                { "mb_page_alloc(), unlimited tenant (batch 256)", "mb:unl", false, NULL, NULL },
                { "mb_page_alloc(), unlimited, pages touched", "mb:unl", true, NULL, NULL },
                { "mb_page_alloc(), limited, no charging ahead (MEMBROKER_REFILL=0)", "mb:lim", false, NULL,
                  "MEMBROKER_REFILL=0" },
                { "glibc malloc(4096)", "malloc", false, NULL, NULL },
                { "glibc malloc(4096), touched", "malloc", true, NULL, NULL },
                { "tcmalloc malloc(4096)", "malloc", false, "libtcmalloc_minimal.so.4", NULL },
                { "tcmalloc malloc(4096), touched", "malloc", true, "libtcmalloc_minimal.so.4", NULL },
                { "kernel: mmap of one page (munmap on free)", "mmap", false, NULL, NULL },
                { "kernel: mmap of one page, touched", "mmap", true, NULL, NULL },
        };
        const size_t nrows = sizeof(rows) / sizeof(rows[0]);
        struct churn ch;
        unsigned ca, cb;
        double rtt;
        char b1[32], b2[32], b3[32], b4[32], b5[64], b6[32];

        if (argc == 4 && strcmp(argv[1], "--child") == 0)
                return child(argv[2], strcmp(argv[3], "1") == 0);
        if (argc == 2 && strcmp(argv[1], "--bytes") == 0)
                return bytes_child();
        if (argc >= 3 && strcmp(argv[1], "--huge") == 0)
                return huge_table(argc - 2, argv + 2);
        if (argc != 1) {
                fprintf(stderr, "usage: bench-latency [--child KIND TOUCH | --bytes | --huge LABEL=FILE...]\n");
                return 2;
        }
        churn_params(&ch);
        bench_table_begin("Table 13: allocation latency under steady churn",
                          "What does one allocation cost the application while pages come and go at a steady "
                          "rate, against the physical limit of this host (its cross-CPU round trip)?");
        for (size_t i = 0; i < nrows; i++) {
                fprintf(stderr, "table 13: %s\n", rows[i].name);
                run_row("/proc/self/exe", &rows[i]);
        }
        rtt = bench_round_trip_ns(&ca, &cb);
        bench_table_columns("allocator", "p50", "p99", "p99.9", "max", "allocations/s reached", "stock misses", NULL);
        for (size_t i = 0; i < nrows; i++) {
                const struct row *r = &rows[i];

                if (!r->ok) {
                        bench_table_cells(r->name, r->why, "", "", "", "", "", NULL);
                        continue;
                }
                snprintf(b5, sizeof(b5), "%.0f", r->rate);
                if (strncmp(r->kind, "mb:", 3) == 0)
                        snprintf(b6, sizeof(b6), "%" PRIu64, r->misses);
                else
                        snprintf(b6, sizeof(b6), "-");
                bench_table_cells(r->name, fmt_ns(b1, sizeof(b1), r->p50), fmt_ns(b2, sizeof(b2), r->p99),
                                  fmt_ns(b3, sizeof(b3), r->p999), fmt_ns(b4, sizeof(b4), r->max), b5, b6, NULL);
        }
        bench_note("Churn: %" PRIu64 " rounds of %" PRIu64 " pages allocated one by one at %" PRIu64
                   " pages/s, then freed at the same rate, oldest first; each allocation timed alone "
                   "(two clock reads, about 40 ns, included); the allocating thread pinned to one CPU.  "
                   "Stock misses: allocations that found their CPU's stock empty (mb_client_stock_misses()).",
                   ch.rounds, ch.window, ch.rate);
        if (rtt > 0)
                bench_note("Cross-CPU round trip of this run (unix socketpair ping-pong, CPUs %u and %u): %s.", ca,
                           cb, fmt_ns(b1, sizeof(b1), (uint64_t) rtt));
        else
                bench_note("Cross-CPU round trip: not measured (%s).", strerror((int) -rtt));
        if (rtt > 0 && rows[0].ok && rows[2].ok) {
                bench_target(rows[0].p99 * 10 <= (uint64_t) rtt && rows[2].p99 * 10 <= (uint64_t) rtt,
                             "p99 of mb_page_alloc() at most 1/10 of the round trip",
                             "limited %s, unlimited %s, round trip %s", fmt_ns(b1, sizeof(b1), rows[0].p99),
                             fmt_ns(b2, sizeof(b2), rows[2].p99), fmt_ns(b3, sizeof(b3), (uint64_t) rtt));
                bench_target(rows[0].p999 <= (uint64_t) rtt && rows[2].p999 <= (uint64_t) rtt,
                             "p99.9 of mb_page_alloc() at most one round trip", "limited %s, unlimited %s",
                             fmt_ns(b1, sizeof(b1), rows[0].p999), fmt_ns(b2, sizeof(b2), rows[2].p999));
        }
        if (rows[1].ok && rows[10].ok)
                bench_target(rows[1].p99 <= rows[10].p99, "touched pages: p99 no worse than the kernel's per-page path",
                             "%s against %s", fmt_ns(b1, sizeof(b1), rows[1].p99),
                             fmt_ns(b2, sizeof(b2), rows[10].p99));
        return bench_finish();
}
