/* SPDX-License-Identifier: MIT */
/*
 * mbmalloc.c - table 14, mb_malloc()/mb_free() by size class against the
 * general-purpose allocators.
 *
 *   bench-mbmalloc SOCKET TENANT
 *
 * For each size: 64 allocations, then the 64 frees (memory not touched),
 * one thread, CPU ns per allocation+free pair.  In this process: glibc
 * malloc/free and mb_malloc/mb_free on the tenant; in a bench-malloc child
 * each, preloaded: tcmalloc, jemalloc, mimalloc (the same pattern, --mode
 * 64 --size N).  Sizes cover the slab classes (16 B .. 2 KiB), a page (the
 * page stock) and runs (8 KiB .. 1 MiB).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "membroker.h"

#define BATCH 64
#define NCASES (2 + BENCH_NPEERS)

static const size_t sizes[] = { 16, 64, 256, 1024, 2048, 4096, 8192, 32768, 262144, 1u << 20 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static struct bench_opts opts;
static mb_client *client;
static char peer_prog[4096];

enum kind { K_GLIBC, K_MB, K_PEER };

struct ctx {
        enum kind kind;
        size_t size;
        const struct bench_peer *peer;
        int failed;
};

static double run(void *arg, uint64_t iters) {
        struct ctx *x = arg;
        void *p[BATCH];
        uint64_t t0;

        iters = (iters + BATCH - 1) / BATCH * BATCH;
        if (x->kind == K_PEER) {
                char out[128], it[32], sz[32];
                char *argv[] = { peer_prog, (char *) "--mode", (char *) "64", (char *) "--threads", (char *) "1",
                                 (char *) "--iters", it, (char *) "--size", sz, (char *) "--expect",
                                 (char *) x->peer->symbol, NULL };

                snprintf(it, sizeof it, "%llu", (unsigned long long) iters);
                snprintf(sz, sizeof sz, "%zu", x->size);
                if (bench_spawn_preload(x->peer->soname, argv, out, sizeof out) < 0)
                        return -1;
                return strtod(out, NULL);
        }
        t0 = bench_thread_cpu_ns();
        for (uint64_t i = 0; i < iters; i += BATCH) {
                for (unsigned j = 0; j < BATCH; j++) {
                        p[j] = x->kind == K_MB ? mb_malloc(client, x->size) : malloc(x->size);
                        if (!p[j]) {
                                fprintf(stderr, "bench-mbmalloc: allocation of %zu failed: %s\n", x->size,
                                        mb_last_error());
                                return -1;
                        }
                        bench_clobber(p[j]);
                }
                for (unsigned j = 0; j < BATCH; j++) {
                        if (x->kind == K_MB)
                                mb_free(client, p[j]);
                        else
                                free(p[j]);
                }
        }
        return (double) (bench_thread_cpu_ns() - t0) / (double) iters;
}

int main(int argc, char **argv) {
        static struct ctx ctx[NSIZES][NCASES];
        static struct bench_case cases[NSIZES][NCASES];
        const char *dir = getenv("MB_BENCH_DIR");
        bool have_peers;
        int r;

        if (argc != 3) {
                fprintf(stderr, "usage: bench-mbmalloc SOCKET TENANT\n");
                return 2;
        }
        bench_opts_init(&opts);
        r = mb_connect(argv[1], argv[2], &client);
        if (r < 0) {
                fprintf(stderr, "bench-mbmalloc: cannot connect: %s (%s)\n", strerror(-r), mb_last_error());
                return 2;
        }
        snprintf(peer_prog, sizeof peer_prog, "%s/bench-malloc", dir ? dir : ".");
        have_peers = access(peer_prog, X_OK) == 0;

        for (size_t s = 0; s < NSIZES; s++) {
                ctx[s][0] = (struct ctx) { .kind = K_GLIBC, .size = sizes[s] };
                ctx[s][1] = (struct ctx) { .kind = K_MB, .size = sizes[s] };
                cases[s][0] = (struct bench_case) { .name = "glibc", .run = run, .ctx = &ctx[s][0], .min_iters = BATCH,
                                                    .ns_per_iter = true };
                cases[s][1] = (struct bench_case) { .name = "mb_malloc", .run = run, .ctx = &ctx[s][1],
                                                    .min_iters = BATCH, .ns_per_iter = true };
                for (unsigned p = 0; p < BENCH_NPEERS; p++) {
                        ctx[s][2 + p] = (struct ctx) { .kind = K_PEER, .size = sizes[s], .peer = &bench_peers[p] };
                        cases[s][2 + p] = (struct bench_case) { .name = bench_peers[p].name, .run = run,
                                                                .ctx = &ctx[s][2 + p], .min_iters = BATCH,
                                                                .ns_per_iter = true };
                        if (!have_peers) {
                                cases[s][2 + p].skip = true;
                                cases[s][2 + p].skip_reason = "bench-malloc not built (sanitizer build)";
                        }
                }
                bench_run(cases[s], NCASES, &opts);
        }

        bench_table_begin("Table 16: mb_malloc() by size class",
                          "What do mb_malloc()+mb_free() cost per size class, against glibc, tcmalloc, jemalloc "
                          "and mimalloc? 64 allocations then the 64 frees, one thread; CPU ns per pair "
                          "(median of the repetitions; the ratio is to glibc's median).");
        bench_table_columns("size", "how mb_malloc serves it", "glibc ns", "mb_malloc ns", "mb / glibc", "tcmalloc ns",
                            "jemalloc ns", "mimalloc ns", NULL);
        for (size_t s = 0; s < NSIZES; s++) {
                char sz[32], g[32], m[32], ratio[32], peer[BENCH_NPEERS][32];
                const char *how = sizes[s] <= mb_page_size(client) / 2 ? "slab class (per-CPU list)"
                                  : sizes[s] <= mb_page_size(client) ? "page stock"
                                  : "run, kept for reuse";

                if (sizes[s] >= 1024)
                        snprintf(sz, sizeof sz, "%zu KiB", sizes[s] / 1024);
                else
                        snprintf(sz, sizeof sz, "%zu B", sizes[s]);
                for (unsigned p = 0; p < BENCH_NPEERS; p++) {
                        const struct bench_case *c = &cases[s][2 + p];
                        if (c->skip)
                                snprintf(peer[p], sizeof peer[p], "skipped");
                        else
                                bench_fmt(peer[p], sizeof peer[p], c->stat.median);
                }
                if (cases[s][0].skip || cases[s][1].skip) {
                        bench_table_cells(sz, how, "failed", "failed", "n/a", peer[0], peer[1], peer[2], NULL);
                        continue;
                }
                bench_fmt(g, sizeof g, cases[s][0].stat.median);
                bench_fmt(m, sizeof m, cases[s][1].stat.median);
                bench_fmt_ratio(ratio, sizeof ratio, cases[s][1].stat.median / cases[s][0].stat.median);
                bench_table_cells(sz, how, g, m, ratio, peer[0], peer[1], peer[2], NULL);
        }
        bench_note("%s", "");
        bench_note_round_trip();
        bench_note("Runs are carved from contiguous chunks charged at once and kept for reuse when freed "
                   "(docs/malloc.md); the first use of a size costs a round trip to the daemon.");
        mb_close(client);
        return bench_finish();
}
