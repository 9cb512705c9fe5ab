/* SPDX-License-Identifier: MIT */
/*
 * broker.c - bench-broker: the tables that need a running membrokerd and
 * the real client library.
 *
 *   bench-broker hotpath  SOCKET TENANT                       (table 1)
 *   bench-broker charge   SOCKET [--memcg DIR HOME] SPEC...   (table 2)
 *   bench-broker depth    SOCKET SPEC...                      (table 3)
 *   bench-broker nolimits SOCKET FREE-TENANT LIMITED-TENANT   (table 5)
 *
 * SPEC is LABEL=TENANT, or LABEL=TENANT:touch to write one byte into every
 * page.  The first SPEC is the row the others are compared with.
 *
 * "Charging" workload (tables 2, 3, 5): allocate N pages one at a time with
 * mb_page_alloc(), holding them all, then free them one at a time.  The
 * stock holds at most 2 × ChargeBatch pages, so all but the first
 * 2 × ChargeBatch of the N pages are fresh charges: the allocations empty the
 * stock every ChargeBatch pages (one Charge round trip each) and the frees
 * overfill it every ChargeBatch pages (one Uncharge each).  Figures: pages
 * per second, allocation and free together.
 *
 * The kernel row of table 2 does mmap(4 KiB) + write one byte + munmap per
 * page with this process moved into a fresh memory cgroup DIR (created by
 * the driver script), and moved back to HOME after each sample.
 */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "macros.h"
#include "membroker.h"
#include "page_counter.h"

#define MAX_SPECS 16
#define CHARGE_MAX_PAGES (1u << 18) /* 1 GiB of 4 KiB pages held at most */

static struct bench_opts opts;

static mb_client *connect_or_die(const char *sock, const char *tenant) {
        mb_client *c = NULL;
        int r = mb_connect(sock, tenant, &c);

        if (r < 0) {
                fprintf(stderr, "bench-broker: cannot connect to tenant %s: %s (%s)\n", tenant, strerror(-r),
                        mb_last_error());
                exit(2);
        }
        return c;
}

/* ---- Table 1: the hot path ---- */

enum hot_kind {
        HOT_STOCK,
        HOT_STOCK64,
        HOT_BARE,
        HOT_GLIBC,
        HOT_GLIBC64,
        HOT_SPAWN,
};

struct hot_ctx {
        enum hot_kind kind;
        unsigned threads;
        mb_client *c;
        char prog[4096];
        const char *mode;
        const struct bench_peer *peer; /* HOT_SPAWN: the allocator preloaded */
        _Atomic int failed;
};

/* The bare thread-local free list: a per-thread LIFO array of pages, the
 * least a page allocator can do.  noinline, so that it pays a call like
 * mb_page_alloc() does. */
#define BARE_CAP 256
static __thread void *bare_stack[BARE_CAP];
static __thread unsigned bare_nr;
static char bare_pages[2][BARE_CAP] __attribute__((aligned(64)));

static __attribute__((noinline)) void *bare_alloc(void) {
        return bare_nr ? bare_stack[--bare_nr] : NULL;
}

static __attribute__((noinline)) void bare_free(void *p) {
        if (bare_nr < BARE_CAP)
                bare_stack[bare_nr++] = p;
}

static void hot_thread(void *arg, unsigned tid, uint64_t iters) {
        struct hot_ctx *h = arg;
        void *p[64];

        switch (h->kind) {
        case HOT_STOCK:
                for (uint64_t i = 0; i < iters; i++) {
                        void *q = mb_page_alloc(h->c);
                        if (!q) {
                                h->failed = 1;
                                return;
                        }
                        bench_clobber(q);
                        mb_page_free(h->c, q);
                }
                break;
        case HOT_STOCK64:
                for (uint64_t i = 0; i < iters; i += 64) {
                        for (unsigned j = 0; j < 64; j++) {
                                p[j] = mb_page_alloc(h->c);
                                if (!p[j]) {
                                        h->failed = 1;
                                        return;
                                }
                                bench_clobber(p[j]);
                        }
                        for (unsigned j = 0; j < 64; j++)
                                mb_page_free(h->c, p[j]);
                }
                break;
        case HOT_BARE:
                bare_nr = 0;
                for (unsigned j = 0; j < BARE_CAP / 2; j++)
                        bare_free(&bare_pages[tid % 2][j]);
                for (uint64_t i = 0; i < iters; i++) {
                        void *q = bare_alloc();
                        bench_clobber(q);
                        bare_free(q);
                }
                break;
        case HOT_GLIBC:
                for (uint64_t i = 0; i < iters; i++) {
                        void *q = malloc(4096);
                        bench_clobber(q);
                        free(q);
                }
                break;
        case HOT_GLIBC64:
                for (uint64_t i = 0; i < iters; i += 64) {
                        for (unsigned j = 0; j < 64; j++) {
                                p[j] = malloc(4096);
                                bench_clobber(p[j]);
                        }
                        for (unsigned j = 0; j < 64; j++)
                                free(p[j]);
                }
                break;
        case HOT_SPAWN:
                abort();
        }
}

static double hot_run(void *ctx, uint64_t iters) {
        struct hot_ctx *h = ctx;
        double ns;

        iters = (iters + 63) / 64 * 64;
        if (h->kind == HOT_SPAWN) {
                char out[128], it[32], th[16];
                char *argv[] = { h->prog, (char *) "--mode", (char *) h->mode, (char *) "--threads", th,
                                 (char *) "--iters", it, (char *) "--expect", (char *) h->peer->symbol, NULL };

                snprintf(it, sizeof it, "%llu", (unsigned long long) iters);
                snprintf(th, sizeof th, "%u", h->threads);
                if (bench_spawn_preload(h->peer->soname, argv, out, sizeof out) < 0) {
                        fprintf(stderr, "bench-broker: %s (%s) did not run: is it installed?\n", h->peer->name,
                                h->peer->soname);
                        return -1;
                }
                return strtod(out, NULL);
        }
        ns = bench_threads(h->threads, hot_thread, h, iters, true);
        if (h->failed) {
                fprintf(stderr, "bench-broker: allocation failed: %s\n", mb_last_error());
                return -1;
        }
        return ns / (double) iters;
}

/* Table 1's rows: the stock, its references, then each peer allocator
 * (bench_peers[]) preloaded into a child. */
#define HOT_PEER_ROW 5 /* first peer row: 2 per peer (one, ×64) */
#define HOT_ROWS (HOT_PEER_ROW + 2 * BENCH_NPEERS)

static int table_hotpath(const char *sock, const char *tenant) {
        static const struct {
                const char *name;
                enum hot_kind kind;
        } kinds[HOT_PEER_ROW] = {
                { "membroker stock, mb_page_alloc+mb_page_free", HOT_STOCK },
                { "membroker stock, 64 allocs then 64 frees", HOT_STOCK64 },
                { "bare thread-local free list", HOT_BARE },
                { "glibc malloc(4096)+free", HOT_GLIBC },
                { "glibc malloc(4096) ×64 then free ×64", HOT_GLIBC64 },
        };
        const size_t nk = HOT_ROWS;
        static struct hot_ctx ctx[2][HOT_ROWS];
        struct bench_case cases[2 * HOT_ROWS];
        char names[2 * HOT_ROWS][128];
        mb_client *c = connect_or_die(sock, tenant);
        const char *dir = getenv("MB_BENCH_DIR");
        size_t n = 0;
        char b[4][32];

        for (unsigned t = 0; t < 2; t++)
                for (size_t k = 0; k < nk; k++) {
                        struct hot_ctx *h = &ctx[t][k];
                        const struct bench_peer *peer = k >= HOT_PEER_ROW ? &bench_peers[(k - HOT_PEER_ROW) / 2] : NULL;
                        bool batch = peer && (k - HOT_PEER_ROW) % 2 == 1;

                        *h = (struct hot_ctx) { .kind = peer ? HOT_SPAWN : kinds[k].kind, .threads = t + 1, .c = c,
                                                .mode = batch ? "64" : "one", .peer = peer };
                        if (peer)
                                snprintf(names[n], sizeof names[n], "%u thread%s: %s malloc(4096)%s (LD_PRELOAD)",
                                         t + 1, t ? "s" : "", peer->name, batch ? " ×64 then free ×64" : "+free");
                        else
                                snprintf(names[n], sizeof names[n], "%u thread%s: %s", t + 1, t ? "s" : "",
                                         kinds[k].name);
                        cases[n] = (struct bench_case) { .name = names[n], .run = hot_run, .ctx = h,
                                                         .min_iters = 1024, .ns_per_iter = peer != NULL };
                        if (peer) {
                                snprintf(h->prog, sizeof h->prog, "%s/bench-malloc", dir ? dir : ".");
                                if (access(h->prog, X_OK) < 0) {
                                        cases[n].skip = true;
                                        cases[n].skip_reason = "bench-malloc not built (sanitizer build)";
                                }
                        }
                        n++;
                }
        bench_run(cases, n, &opts);

        bench_table_begin("Table 1: the hot path",
                          "Allocate and free one page: the per-CPU stock of libmembroker against a bare "
                          "thread-local free list and general-purpose allocators. Figures: CPU ns per "
                          "alloc+free pair, per thread (CLOCK_THREAD_CPUTIME_ID, so that time preempted by "
                          "other processes does not count; threads pinned one per CPU; with two threads "
                          "both run at once; tcmalloc, jemalloc and mimalloc each preloaded (LD_PRELOAD) "
                          "into a child process of its own). Pages and blocks are not touched.");
        bench_table_columns("threads: allocator", "ns/pair (median)", "min–max",
                            "ratio to the stock, same threads", NULL);
        for (unsigned t = 0; t < 2; t++)
                for (size_t k = 0; k < nk; k++)
                        bench_table_row(&cases[t * nk + k], &cases[t * nk]);
        printf("\nmembroker tenant %s, ChargeBatch %u (stock up to %u pages per CPU).\n\n", mb_tenant_path(c),
               mb_charge_batch(c), 2 * mb_charge_batch(c));
        bench_note_round_trip();
        for (unsigned t = 0; t < 2; t++) {
                struct bench_case *st = &cases[t * nk], *bare = &cases[t * nk + 2], *gl = &cases[t * nk + 3];
                struct bench_case *tc = &cases[t * nk + HOT_PEER_ROW];

                if (st->skip || bare->skip || gl->skip)
                        continue;
                for (unsigned p = 0; p < BENCH_NPEERS; p++) {
                        struct bench_case *pc = &cases[t * nk + HOT_PEER_ROW + 2 * p];

                        if (!pc->skip)
                                bench_note("%u thread%s: the stock takes %s the time of %s malloc(4096)+free.",
                                           t + 1, t ? "s" : "",
                                           bench_fmt_ratio(b[0], sizeof b[0], st->stat.median / pc->stat.median),
                                           bench_peers[p].name);
                }
                bench_target(st->stat.median <= 3 * bare->stat.median, "stock ≤ 3× a bare free list",
                             "%u thread%s: stock %s ns, bare list %s ns: %s", t + 1, t ? "s" : "",
                             bench_fmt(b[0], sizeof b[0], st->stat.median),
                             bench_fmt(b[1], sizeof b[1], bare->stat.median),
                             bench_fmt_ratio(b[2], sizeof b[2], st->stat.median / bare->stat.median));
                bench_target(gl->stat.median >= 2 * st->stat.median,
                             "stock ≥ 2× faster than glibc malloc(4096)+free",
                             "%u thread%s: glibc %s ns, stock %s ns: stock is %s as fast", t + 1, t ? "s" : "",
                             bench_fmt(b[0], sizeof b[0], gl->stat.median),
                             bench_fmt(b[1], sizeof b[1], st->stat.median),
                             bench_fmt_ratio(b[2], sizeof b[2], gl->stat.median / st->stat.median));
                bench_target(st->stat.median <= 1.3 * bare->stat.median, "stock ≤ 1.3× a bare free list",
                             "%u thread%s: %s", t + 1, t ? "s" : "",
                             bench_fmt_ratio(b[0], sizeof b[0], st->stat.median / bare->stat.median));
                if (!tc->skip)
                        bench_target(st->stat.median <= tc->stat.median, "stock ≤ 1.0× tcmalloc malloc(4096)+free",
                                     "%u thread%s: stock %s ns, tcmalloc %s ns: %s", t + 1, t ? "s" : "",
                                     bench_fmt(b[0], sizeof b[0], st->stat.median),
                                     bench_fmt(b[1], sizeof b[1], tc->stat.median),
                                     bench_fmt_ratio(b[2], sizeof b[2], st->stat.median / tc->stat.median));
        }
        mb_close(c);
        return bench_finish();
}

/* ---- Tables 2, 3, 5: charging through the daemon ---- */

/* CPU time of the whole daemon (all threads), from this process: the
 * charging path's work, which machine load does not inflate the way it
 * inflates wall time.  -1 when unknown. */
static clockid_t daemon_clock;
static bool daemon_clock_ok;

static void daemon_clock_init(void) {
        const char *s = getenv("MB_BENCH_DAEMON_PID");

        if (s && *s && clock_getcpuclockid((pid_t) atoi(s), &daemon_clock) == 0)
                daemon_clock_ok = true;
}

static uint64_t clock_ns(clockid_t clk) {
        struct timespec ts;

        if (clock_gettime(clk, &ts) < 0)
                return 0;
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

/* Client (this process) + daemon CPU ns, or 0 without the daemon's clock. */
static uint64_t cpu_both_ns(void) {
        if (!daemon_clock_ok)
                return 0;
        return clock_ns(CLOCK_PROCESS_CPUTIME_ID) + clock_ns(daemon_clock);
}

struct charge_ctx {
        const char *label;
        double cpu_ns_per_page; /* of the last sample: client + daemon */
        const char *tenant;
        mb_client *c;
        bool touch;
        bool kernel;
        bool bulk; /* kernel row: one mmap of up to CHARGE_MAX_PAGES pages, touched page by page */
        const char *memcg, *memcg_home;
        void **pages;
        char error[256];
};

static int write_pid(const char *dir) {
        char path[4096], pid[32];
        int fd, n;

        snprintf(path, sizeof path, "%s/cgroup.procs", dir);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = snprintf(pid, sizeof pid, "%d\n", (int) getpid());
        if (write(fd, pid, (size_t) n) != n) {
                int r = -errno;
                close(fd);
                return r;
        }
        close(fd);
        return 0;
}

static double charge_run(void *ctx, uint64_t iters) {
        struct charge_ctx *x = ctx;
        uint64_t t0, t1, c0, done = 0;

        if (x->kernel) {
                int r = write_pid(x->memcg);

                if (r < 0) {
                        snprintf(x->error, sizeof x->error, "cannot move into the memory cgroup: %s",
                                 strerror(-r));
                        return -1;
                }
                c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
                t0 = bench_now_ns();
                if (x->bulk)
                        for (uint64_t i = 0; i < iters;) {
                                size_t n = (size_t) MB_MIN(iters - i, (uint64_t) CHARGE_MAX_PAGES);
                                char *p = mmap(NULL, n * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                               -1, 0);
                                if (p == MAP_FAILED)
                                        break;
                                for (size_t j = 0; j < n; j++)
                                        p[j * 4096] = 1;
                                munmap(p, n * 4096);
                                i += n;
                        }
                else
                        for (uint64_t i = 0; i < iters; i++) {
                                char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                               -1, 0);
                                if (p == MAP_FAILED)
                                        break;
                                *(volatile char *) p = 1;
                                munmap(p, 4096);
                        }
                t1 = bench_now_ns();
                x->cpu_ns_per_page = (double) (clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / (double) iters;
                (void) write_pid(x->memcg_home);
                return (double) iters * 1e9 / (double) (t1 - t0);
        }

        c0 = cpu_both_ns();
        t0 = bench_now_ns();
        while (done < iters) {
                size_t n = (size_t) MB_MIN(iters - done, (uint64_t) CHARGE_MAX_PAGES);

                for (size_t i = 0; i < n; i++) {
                        void *p = mb_page_alloc(x->c);
                        if (!p) {
                                snprintf(x->error, sizeof x->error, "mb_page_alloc: %s", mb_last_error());
                                for (size_t j = 0; j < i; j++)
                                        mb_page_free(x->c, x->pages[j]);
                                return -1;
                        }
                        if (x->touch)
                                *(volatile char *) p = 1;
                        x->pages[i] = p;
                }
                for (size_t i = 0; i < n; i++)
                        mb_page_free(x->c, x->pages[i]);
                done += n;
        }
        t1 = bench_now_ns();
        x->cpu_ns_per_page = daemon_clock_ok ? (double) (cpu_both_ns() - c0) / (double) iters : -1;
        return (double) iters * 1e9 / (double) (t1 - t0);
}

static void **pages_array(void) {
        static void **pages;

        if (!pages) {
                pages = calloc(CHARGE_MAX_PAGES, sizeof(void *));
                if (!pages)
                        abort();
        }
        return pages;
}

/* Parse SPECs into @x; connect each. */
static size_t parse_specs(const char *sock, char **spec, int nspec, struct charge_ctx *x) {
        size_t n = 0;

        for (int i = 0; i < nspec && n < MAX_SPECS; i++, n++) {
                char *s = strdup(spec[i]), *eq = strchr(s, '='), *colon;

                if (!eq) {
                        fprintf(stderr, "bench-broker: bad spec %s (LABEL=TENANT[:touch])\n", spec[i]);
                        exit(2);
                }
                *eq = 0;
                colon = strchr(eq + 1, ':');
                if (colon)
                        *colon = 0;
                x[n] = (struct charge_ctx) { .label = s, .tenant = eq + 1,
                                             .touch = colon && strcmp(colon + 1, "touch") == 0,
                                             .pages = pages_array() };
                x[n].c = connect_or_die(sock, x[n].tenant);
        }
        return n;
}

static void charge_cases(struct charge_ctx *x, size_t n, struct bench_case *cases) {
        for (size_t i = 0; i < n; i++)
                cases[i] = (struct bench_case) {
                        .name = x[i].label, .run = charge_run, .ctx = &x[i], .aux = &x[i].cpu_ns_per_page,
                        .min_iters = 256,
                        .max_iters = bench_count(&opts, 1u << 20, 1024),
                };
}

static void charge_rows(struct charge_ctx *x, size_t n, struct bench_case *cases, size_t base) {
        char b[2][64], ratio[96], rhead[160], cpu[32];

        snprintf(rhead, sizeof rhead, "ratio to %s (pages/s)", cases[base].name);
        bench_table_columns("case", "tenant (ChargeBatch from Welcome)", "CPU ns/page, client+daemon (median)",
                            "pages/s (median)", "min–max", rhead, NULL);
        for (size_t i = 0; i < n; i++) {
                struct bench_case *c = &cases[i];
                char tenant[160];

                if (x[i].kernel)
                        snprintf(tenant, sizeof tenant, "kernel memory cgroup");
                else
                        snprintf(tenant, sizeof tenant, "%s (%u)", mb_tenant_path(x[i].c), mb_charge_batch(x[i].c));
                if (c->skip) {
                        char reason[320];
                        snprintf(reason, sizeof reason, "skipped: %s",
                                 x[i].error[0] ? x[i].error : (c->skip_reason ? c->skip_reason : "failed"));
                        bench_table_cells(c->name, tenant, "", reason, "", "", NULL);
                        continue;
                }
                if (c->aux_stat.median >= 0)
                        bench_fmt(cpu, sizeof cpu, c->aux_stat.median);
                else
                        snprintf(cpu, sizeof cpu, "—");
                {
                        char lo[32], hi[32];

                        bench_fmt(b[0], sizeof b[0], c->stat.median);
                        snprintf(b[1], sizeof b[1], "%s–%s", bench_fmt(lo, sizeof lo, c->stat.min),
                                 bench_fmt(hi, sizeof hi, c->stat.max));
                }
                if (i == base)
                        snprintf(ratio, sizeof ratio, "1.00× (base)");
                else if (cases[base].skip)
                        snprintf(ratio, sizeof ratio, "n/a");
                else
                        bench_fmt_ratio(ratio, sizeof ratio, c->stat.median / cases[base].stat.median);
                bench_table_cells(c->name, tenant, cpu, b[0], b[1], ratio, NULL);
        }
        putchar('\n');
}

static struct bench_case *find_case(struct bench_case *cases, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(cases[i].name, name) == 0)
                        return &cases[i];
        return NULL;
}

static int table_charge(const char *sock, int argc, char **argv) {
        static struct charge_ctx x[MAX_SPECS + 2];
        struct bench_case cases[MAX_SPECS + 2];
        const char *memcg = NULL, *home = NULL;
        struct bench_case *b1, *b64, *k, *kb;
        size_t n;
        char b[4][32];

        if (argc >= 3 && strcmp(argv[0], "--memcg") == 0) {
                memcg = argv[1];
                home = argv[2];
                argc -= 3;
                argv += 3;
        }
        n = parse_specs(sock, argv, argc, x);
        x[n] = (struct charge_ctx) { .label = "kernel: mmap+touch+munmap 4 KiB", .kernel = true,
                                     .memcg = memcg, .memcg_home = home };
        x[n + 1] = (struct charge_ctx) { .label = "kernel bulk: one mmap of the pages, each touched, one munmap",
                                         .kernel = true, .bulk = true, .memcg = memcg, .memcg_home = home };
        charge_cases(x, n + 2, cases);
        if (!memcg) {
                const char *why = getenv("MB_BENCH_MEMCG_SKIP");
                for (size_t i = n; i < n + 2; i++) {
                        cases[i].skip = true;
                        cases[i].skip_reason = why && *why ? why : "no memory cgroup could be created";
                }
        }
        n += 2;
        bench_run(cases, n, &opts);

        bench_table_begin("Table 2: charging through the daemon (MEMCG_CHARGE_BATCH)",
                          "Every page a fresh charge: allocate N pages one at a time, then free them, so "
                          "that the stock must ask the daemon for a batch every ChargeBatch pages and give "
                          "one back every ChargeBatch frees. Figures: pages per second (allocation and "
                          "free together). The kernel row is the kernel's own path for one page: "
                          "mmap+write+munmap of 4 KiB in a memory cgroup; the bulk row maps as many pages at "
                          "once as the broker rows hold, writes one byte to each and unmaps them together.");
        if (memcg) {
                const char *v = getenv("MB_BENCH_MEMCG_VERSION");
                printf("Kernel row: a fresh memory cgroup (%s), child of this process's own, removed "
                       "afterwards.\n\n",
                       v && *v ? v : "cgroup");
        }
        charge_rows(x, n, cases, 0);

        b1 = find_case(cases, n, "ChargeBatch 1");
        if (!b1)
                b1 = &cases[0];
        b64 = find_case(cases, n, "ChargeBatch 64");
        k = &cases[n - 2];
        kb = &cases[n - 1];
        if (b64 && !b64->skip && !b1->skip)
                bench_target(b64->stat.median >= 30 * b1->stat.median, "batch 64 ≥ 30× batch 1",
                             "%s pages/s vs %s pages/s: %s", bench_fmt(b[0], sizeof b[0], b64->stat.median),
                             bench_fmt(b[1], sizeof b[1], b1->stat.median),
                             bench_fmt_ratio(b[2], sizeof b[2], b64->stat.median / b1->stat.median));
        if (b64 && !b64->skip && !k->skip)
                bench_target(b64->stat.median >= 10 * k->stat.median,
                             "≥ 10× faster per page than the kernel path",
                             "batch 64 %s pages/s vs kernel %s pages/s: %s",
                             bench_fmt(b[0], sizeof b[0], b64->stat.median),
                             bench_fmt(b[1], sizeof b[1], k->stat.median),
                             bench_fmt_ratio(b[2], sizeof b[2], b64->stat.median / k->stat.median));
        else if (k->skip)
                printf("- target \"≥ 10× faster per page than the kernel path\": not measured (%s)\n",
                       k->skip_reason);
        if (b64 && !b64->skip && !b1->skip && b64->aux_stat.median > 0 && b1->aux_stat.median > 0)
                printf("- in CPU time (client + daemon): batch 1 costs %s ns per page, batch 64 %s ns (%s)%s%s%s\n",
                       bench_fmt(b[0], sizeof b[0], b1->aux_stat.median),
                       bench_fmt(b[1], sizeof b[1], b64->aux_stat.median),
                       bench_fmt_ratio(b[2], sizeof b[2], b1->aux_stat.median / b64->aux_stat.median),
                       k->skip ? "" : "; the kernel path ", k->skip ? "" : bench_fmt(b[3], sizeof b[3], k->aux_stat.median),
                       k->skip ? "" : " ns of CPU per page");
        {
                struct bench_case *t = find_case(cases, n, "ChargeBatch 64, pages touched");
                if (t && !t->skip && !k->skip)
                        bench_target(t->stat.median >= 2 * k->stat.median,
                                     "pages touched: ≥ 2× the kernel's per-page path",
                                     "batch 64 touched %s pages/s vs kernel %s pages/s: %s",
                                     bench_fmt(b[0], sizeof b[0], t->stat.median),
                                     bench_fmt(b[1], sizeof b[1], k->stat.median),
                                     bench_fmt_ratio(b[2], sizeof b[2], t->stat.median / k->stat.median));
                if (t && !t->skip && !kb->skip)
                        bench_target(t->stat.median >= kb->stat.median,
                                     "pages touched: ≥ 1× the kernel's bulk path",
                                     "batch 64 touched %s pages/s vs one mmap touched page by page %s pages/s: %s",
                                     bench_fmt(b[0], sizeof b[0], t->stat.median),
                                     bench_fmt(b[1], sizeof b[1], kb->stat.median),
                                     bench_fmt_ratio(b[2], sizeof b[2], t->stat.median / kb->stat.median));
        }
        return bench_finish();
}

/* The counter alone: try_charge + uncharge of one batch through a chain of
 * @depth counters under the root, max and high set at every level. */
struct counter_ctx {
        unsigned depth;
        struct page_counter *leaf;
};

static double counter_run(void *ctx, uint64_t iters) {
        struct counter_ctx *cc = ctx;
        uint64_t t0 = bench_thread_cpu_ns();

        for (uint64_t i = 0; i < iters; i++) {
                struct page_counter *fail;
                if (!page_counter_try_charge(cc->leaf, 64, &fail))
                        return -1;
                page_counter_uncharge(cc->leaf, 64);
        }
        return (double) (bench_thread_cpu_ns() - t0) / (double) iters;
}

static struct page_counter *counter_chain(unsigned depth) {
        struct page_counter *parent = NULL, *c = NULL;

        for (unsigned i = 0; i <= depth; i++) {
                void *p = NULL;
                if (posix_memalign(&p, PAGE_COUNTER_ALIGN_BYTES, sizeof(struct page_counter)) != 0)
                        abort();
                c = p;
                page_counter_init(c, parent, true);
                if (parent) {
                        (void) page_counter_set_max(c, 1UL << 30);
                        (void) page_counter_set_high(c, 1UL << 30);
                }
                parent = c;
        }
        return c;
}

static int table_depth(const char *sock, int argc, char **argv) {
        static struct charge_ctx x[MAX_SPECS];
        struct bench_case cases[MAX_SPECS];
        static const unsigned depths[] = { 1, 2, 4, 8 };
        struct counter_ctx cc[4];
        struct bench_case ccases[4];
        char cnames[4][64], b[3][32];
        struct bench_case *d1, *d4;
        size_t n = parse_specs(sock, argv, argc, x);

        charge_cases(x, n, cases);
        bench_run(cases, n, &opts);
        for (unsigned i = 0; i < 4; i++) {
                cc[i] = (struct counter_ctx) { .depth = depths[i], .leaf = counter_chain(depths[i]) };
                snprintf(cnames[i], sizeof cnames[i], "depth %u", depths[i]);
                ccases[i] = (struct bench_case) { .name = cnames[i], .run = counter_run, .ctx = &cc[i] };
        }
        bench_run(ccases, 4, &opts);

        bench_table_begin("Table 3: hierarchy depth (rstat flush batching)",
                          "The charging workload of table 2 at the default ChargeBatch, in a tenant at "
                          "depth 1, 2, 4 and 8 with MemoryMax and MemoryHigh set at every level. Figures: "
                          "pages per second.");
        charge_rows(x, n, cases, 0);
        d1 = find_case(cases, n, "depth 1");
        d4 = find_case(cases, n, "depth 4");
        if (d1 && d4 && !d1->skip && !d4->skip) {
                bench_target(d1->stat.median <= 1.05 * d4->stat.median, "depth 4 ≤ 5% slower than depth 1",
                             "depth 4 runs at %s of depth 1's throughput (%s vs %s pages/s)",
                             bench_fmt_ratio(b[0], sizeof b[0], d4->stat.median / d1->stat.median),
                             bench_fmt(b[1], sizeof b[1], d4->stat.median),
                             bench_fmt(b[2], sizeof b[2], d1->stat.median));
                if (d1->aux_stat.median > 0 && d4->aux_stat.median > 0)
                        printf("- in CPU time (client + daemon, immune to other load): depth 4 costs %s of "
                               "depth 1 per page (%s vs %s ns)\n",
                               bench_fmt_ratio(b[0], sizeof b[0], d4->aux_stat.median / d1->aux_stat.median),
                               bench_fmt(b[1], sizeof b[1], d4->aux_stat.median),
                               bench_fmt(b[2], sizeof b[2], d1->aux_stat.median));
        }

        bench_table_begin("Table 3b: the page_counter walk alone",
                          "page_counter_try_charge + page_counter_uncharge of 64 pages (one batch) through "
                          "a chain of counters under the root, max and high set at every level, one "
                          "thread, in process. Figures: CPU ns per batch.");
        bench_table_columns("depth", "ns/batch (median)", "min–max", "ratio to depth 1", NULL);
        for (unsigned i = 0; i < 4; i++)
                bench_table_row(&ccases[i], &ccases[0]);
        putchar('\n');
        return bench_finish();
}

/* One chunk of the hot path in the calling thread: CPU ns per pair. */
static double hot_chunk(mb_client *c, uint64_t iters) {
        uint64_t t0 = bench_thread_cpu_ns();

        for (uint64_t i = 0; i < iters; i++) {
                void *q = mb_page_alloc(c);
                if (!q)
                        return -1;
                bench_clobber(q);
                mb_page_free(c, q);
        }
        return (double) (bench_thread_cpu_ns() - t0) / (double) iters;
}

static int cmp_dbl(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* Sorts @v; quantile @q (0..1) by the nearest rank. */
static double quantile(double *v, size_t n, double q) {
        qsort(v, n, sizeof(double), cmp_dbl);
        return v[(size_t) (q * (double) (n - 1) + 0.5)];
}

#define PAIRS_MAX 401

static int table_nolimits(const char *sock, const char *free_tenant, const char *lim_tenant) {
        static struct charge_ctx x[2];
        struct bench_case ccases[2];
        static char cnames[2][128];
        const char *tenants[2] = { lim_tenant, free_tenant };
        const char *what[2] = { "limits everywhere", "nothing limited" };
        static double t[2][PAIRS_MAX], ratio[PAIRS_MAX];
        mb_client *c[2];
        size_t npairs = bench_count(&opts, 201, 3);
        uint64_t chunk = 1024;
        char b[6][32];
        cpu_set_t set;

        for (unsigned i = 0; i < 2; i++) {
                c[i] = connect_or_die(sock, tenants[i]);
                x[i] = (struct charge_ctx) { .tenant = tenants[i], .c = c[i], .pages = pages_array() };
                snprintf(cnames[i], sizeof cnames[i], "charge path, %s", what[i]);
                x[i].label = cnames[i];
        }

        /* Hot path, paired: the two tenants alternate in chunks of about a
         * millisecond on one pinned thread, and each pair gives a ratio, so
         * that what disturbs the machine for longer than a pair cancels;
         * the figure is the median of the ratios. */
        CPU_ZERO(&set);
        CPU_SET(0, &set);
        (void) sched_setaffinity(0, sizeof set, &set);
        for (unsigned i = 0; i < 2; i++)
                (void) hot_chunk(c[i], 4096); /* warm both stocks */
        while (chunk < (1u << 26) && hot_chunk(c[0], chunk) * (double) chunk < 1e6)
                chunk *= 2;
        for (size_t k = 0; k < npairs; k++) {
                unsigned first = k % 2;
                for (unsigned j = 0; j < 2; j++) {
                        unsigned i = first ^ j;
                        t[i][k] = hot_chunk(c[i], chunk);
                        if (t[i][k] < 0) {
                                fprintf(stderr, "bench-broker: allocation failed: %s\n", mb_last_error());
                                return 1;
                        }
                }
                ratio[k] = t[1][k] / t[0][k];
        }
        CPU_ZERO(&set);
        for (unsigned i = 0; i < bench_ncpus(); i++)
                CPU_SET(i, &set);
        (void) sched_setaffinity(0, sizeof set, &set);

        charge_cases(x, 2, ccases);
        bench_run(ccases, 2, &opts);

        bench_table_begin("Table 5: nothing limited vs limits everywhere (the kernel's cost-nothing-when-unused goal)",
                          "The same client work in a tenant where neither it nor any ancestor has a limit "
                          "or protection, and in one with MemoryMax, MemoryHigh, MemoryLow and MemoryMin at "
                          "every level. Hot path: CPU ns per mb_page_alloc+mb_page_free from the stock, the "
                          "two tenants alternating in chunks of about 1 ms on one pinned thread; the ratio is "
                          "the median of the per-pair ratios (interquartile range below). Charge path: the "
                          "charging workload of table 2.");
        printf("%zu pairs of %llu alloc+free pairs per tenant.\n\n", npairs, (unsigned long long) chunk);
        bench_table_columns("case", "ns/pair (median)", "min–max", "ratio to limits everywhere (median of pairs)",
                            NULL);
        {
                double r_med = quantile(ratio, npairs, 0.5), r_q1 = quantile(ratio, npairs, 0.25),
                       r_q3 = quantile(ratio, npairs, 0.75);

                for (unsigned i = 0; i < 2; i++) {
                        char name[64], spread[80];
                        double med = quantile(t[i], npairs, 0.5);

                        snprintf(name, sizeof name, "hot path, %s", what[i]);
                        snprintf(spread, sizeof spread, "%s–%s", bench_fmt(b[1], sizeof b[1], t[i][0]),
                                 bench_fmt(b[2], sizeof b[2], t[i][npairs - 1]));
                        bench_fmt(b[0], sizeof b[0], med);
                        if (i == 0)
                                bench_table_cells(name, b[0], spread, "1.00× (base)", NULL);
                        else
                                bench_table_cells(name, b[0], spread, bench_fmt_ratio(b[3], sizeof b[3], r_med),
                                                  NULL);
                }
                printf("\nPer-pair ratio: median %s, interquartile range %s–%s.\n\n",
                       bench_fmt_ratio(b[0], sizeof b[0], r_med), bench_fmt_ratio(b[1], sizeof b[1], r_q1),
                       bench_fmt_ratio(b[2], sizeof b[2], r_q3));
                charge_rows(x, 2, ccases, 0);
                bench_target(r_med >= 0.95 && r_med <= 1.05, "no limits within 5% of limits on the hot path",
                             "nothing limited takes %s the time of limits everywhere (median of %zu paired "
                             "ratios, IQR %s–%s)",
                             bench_fmt_ratio(b[3], sizeof b[3], r_med), npairs, b[1], b[2]);
        }
        if (!ccases[0].skip && !ccases[1].skip)
                printf("- charge path: nothing limited runs at %s the throughput of limits everywhere "
                       "(ChargeBatch %u vs %u)\n",
                       bench_fmt_ratio(b[0], sizeof b[0], ccases[1].stat.median / ccases[0].stat.median),
                       mb_charge_batch(x[1].c), mb_charge_batch(x[0].c));
        return bench_finish();
}

int main(int argc, char **argv) {
        bench_opts_init(&opts);
        daemon_clock_init();
        if (argc >= 4 && strcmp(argv[1], "hotpath") == 0)
                return table_hotpath(argv[2], argv[3]);
        if (argc >= 4 && strcmp(argv[1], "charge") == 0)
                return table_charge(argv[2], argc - 3, argv + 3);
        if (argc >= 4 && strcmp(argv[1], "depth") == 0)
                return table_depth(argv[2], argc - 3, argv + 3);
        if (argc >= 5 && strcmp(argv[1], "nolimits") == 0)
                return table_nolimits(argv[2], argv[3], argv[4]);
        fprintf(stderr, "usage: bench-broker hotpath|charge|depth|nolimits SOCKET ...\n");
        return 2;
}
