/* SPDX-License-Identifier: MIT */
/*
 * sqlite-bench.c - table 15: SQLite on the broker page cache
 * (libmembroker-sqlite) against SQLite's own page cache, same workload,
 * same run.
 *
 *   bench-sqlite SOCKET TENANT DIR
 *
 * SQLite's page cache is chosen once per process (sqlite3_config() before
 * sqlite3_initialize()), so each cache runs in a child process of its own,
 * forked at the start and kept: the parent's cases send it "WORKLOAD N"
 * on a pipe, the child runs N operations on its warm databases and
 * answers with the CPU time of its thread per operation
 * (CLOCK_THREAD_CPUTIME_ID, as the other in-process tables), so the
 * harness interleaves the two caches sample by sample.  Both children
 * build identical databases in DIR: "small" (20,000 rows, 1,113 pages of 4
 * KiB) with a cache of 2,000 pages (it fits) and a cache of 200 pages
 * (bigger than its cache: a miss costs a read from the file, which the
 * kernel's page cache serves), "wide" (the same rows in 8 KiB pages, 557
 * pages: contiguous runs of two broker pages on 4 KiB broker pages) with
 * caches of 2,000 and 100 pages, and "ins" and "wins" (8 KiB pages) for
 * the inserts.
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "membroker.h"
#include "membroker-sqlite.h"

#define PAD_BYTES 200
#define INSERT_TXN_ROWS 1000
#define RANGE_ROWS 100

enum workload {
        W_INSERT,
        W_POINT_FIT,
        W_POINT_BIG,
        W_RANGE_FIT,
        W_RANGE_BIG,
        W_WIDE_INSERT,
        W_WIDE_POINT_FIT,
        W_WIDE_POINT_BIG,
        NWORKLOADS
};
static const char *const workload_names[NWORKLOADS] = {
        "inserts, transactions of 1,000 rows",
        "point selects, database fits in the cache",
        "point selects, database 5.6× the cache",
        "range sums of 100 rows, database fits",
        "range sums of 100 rows, database 5.6× the cache",
        "8 KiB pages: inserts, transactions of 1,000 rows",
        "8 KiB pages: point selects, database fits",
        "8 KiB pages: point selects, database 5.6× the cache",
};

static struct bench_opts opts;
static unsigned nrows;

/* ---- the child: one page cache, its databases, a command loop ---- */

struct child_db {
        sqlite3 *db;
        sqlite3_stmt *point, *range, *insert;
};

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rng_next(void) {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return rng_state;
}

static void pad_of(unsigned id, char out[PAD_BYTES]) {
        uint32_t x = id * 2654435761u;

        for (int i = 0; i < PAD_BYTES; i++) {
                x = x * 1103515245u + 12345u;
                out[i] = (char) ('a' + (x >> 16) % 26);
        }
}

static int must(int rc, sqlite3 *db, const char *what) {
        if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
                fprintf(stderr, "bench-sqlite: %s: %s\n", what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
                exit(2);
        }
        return rc;
}

static void child_open(struct child_db *d, const char *path, int cache_pages, int page_size) {
        char sql[128];

        must(sqlite3_open(path, &d->db), NULL, path);
        snprintf(sql, sizeof sql, "PRAGMA page_size = %d; PRAGMA cache_size = %d; PRAGMA synchronous = OFF",
                 page_size, cache_pages);
        must(sqlite3_exec(d->db, sql, NULL, NULL, NULL), d->db, sql);
        must(sqlite3_exec(d->db, "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v INTEGER, pad BLOB)",
                          NULL, NULL, NULL), d->db, "create");
        must(sqlite3_prepare_v2(d->db, "SELECT v, length(pad) FROM t WHERE id = ?", -1, &d->point, NULL), d->db,
             "prepare");
        must(sqlite3_prepare_v2(d->db, "SELECT sum(v) FROM t WHERE id BETWEEN ? AND ?", -1, &d->range, NULL),
             d->db, "prepare");
        must(sqlite3_prepare_v2(d->db, "INSERT INTO t (v, pad) VALUES (?, ?)", -1, &d->insert, NULL), d->db,
             "prepare");
}

static void child_insert(struct child_db *d, uint64_t n) {
        char pad[PAD_BYTES];

        for (uint64_t i = 0; i < n; i++) {
                if (i % INSERT_TXN_ROWS == 0)
                        must(sqlite3_exec(d->db, "BEGIN", NULL, NULL, NULL), d->db, "begin");
                pad_of((unsigned) i, pad);
                sqlite3_bind_int64(d->insert, 1, (int64_t) i);
                sqlite3_bind_blob(d->insert, 2, pad, PAD_BYTES, SQLITE_STATIC);
                must(sqlite3_step(d->insert), d->db, "insert");
                sqlite3_reset(d->insert);
                if (i % INSERT_TXN_ROWS == INSERT_TXN_ROWS - 1 || i == n - 1)
                        must(sqlite3_exec(d->db, "COMMIT", NULL, NULL, NULL), d->db, "commit");
        }
}

static int64_t child_point(struct child_db *d, uint64_t n) {
        int64_t sum = 0;

        for (uint64_t i = 0; i < n; i++) {
                sqlite3_bind_int(d->point, 1, 1 + (int) (rng_next() % nrows));
                if (must(sqlite3_step(d->point), d->db, "point") == SQLITE_ROW)
                        sum += sqlite3_column_int64(d->point, 0) + sqlite3_column_int64(d->point, 1);
                sqlite3_reset(d->point);
        }
        return sum;
}

static int64_t child_range(struct child_db *d, uint64_t n) {
        int64_t sum = 0;

        for (uint64_t i = 0; i < n; i++) {
                int a = 1 + (int) (rng_next() % nrows);

                sqlite3_bind_int(d->range, 1, a);
                sqlite3_bind_int(d->range, 2, a + RANGE_ROWS - 1);
                if (must(sqlite3_step(d->range), d->db, "range") == SQLITE_ROW)
                        sum += sqlite3_column_int64(d->range, 0);
                sqlite3_reset(d->range);
        }
        return sum;
}

/* The processes measured: SQLite's own cache alone, SQLite's own cache in a
 * process that also has a libmembroker client (whose thread makes the
 * process multi-threaded: glibc then takes its atomic paths, in malloc()
 * among others), and the broker page cache (which needs that client). */
enum kind { K_DEFAULT, K_DEFAULT_CLIENT, K_BROKER, NKINDS };
static const char *const kind_names[NKINDS] = {
        "SQLite's own cache",
        "SQLite's own cache, libmembroker client connected",
        "broker page cache",
};
static const char *const kind_files[NKINDS] = { "default", "client", "broker" };

static int child_main(enum kind kind, const char *socket_path, const char *tenant, const char *dir, FILE *in,
                      FILE *out) {
        bool broker = kind == K_BROKER;
        struct child_db fit, big, wfit, wbig, ins, wins;
        char path[4096], line[128];
        mb_client *c = NULL;
        int r;

        if (kind != K_DEFAULT) {
                r = mb_connect(socket_path, tenant, &c);
                if (r < 0) {
                        fprintf(stderr, "bench-sqlite: cannot connect: %s\n", mb_last_error());
                        return 2;
                }
        }
        if (broker) {
                r = mb_sqlite_install(c, NULL);
                if (r < 0) {
                        fprintf(stderr, "bench-sqlite: mb_sqlite_install: %s\n", strerror(-r));
                        return 2;
                }
        }
        must(sqlite3_initialize(), NULL, "sqlite3_initialize");
        /* The same database twice: through a cache that holds it and
         * through one a sixth of its size (two connections, two caches). */
        snprintf(path, sizeof path, "%s/%s-small.db", dir, kind_files[kind]);
        (void) unlink(path);
        child_open(&fit, path, 2000, 4096);
        child_insert(&fit, nrows);
        child_open(&big, path, 200, 4096);
        snprintf(path, sizeof path, "%s/%s-wide.db", dir, kind_files[kind]);
        (void) unlink(path);
        child_open(&wfit, path, 2000, 8192);
        child_insert(&wfit, nrows);
        child_open(&wbig, path, 100, 8192);
        snprintf(path, sizeof path, "%s/%s-ins.db", dir, kind_files[kind]);
        (void) unlink(path);
        child_open(&ins, path, 2000, 4096);
        snprintf(path, sizeof path, "%s/%s-wins.db", dir, kind_files[kind]);
        (void) unlink(path);
        child_open(&wins, path, 2000, 8192);
        bench_clobber((void *) (intptr_t) (child_point(&fit, nrows) + child_point(&big, nrows) +
                                           child_point(&wfit, nrows) + child_point(&wbig, nrows)));
        fputs("ready\n", out);
        fflush(out);

        while (fgets(line, sizeof line, in)) {
                unsigned w;
                uint64_t n, t0;
                int64_t sink = 0;

                if (sscanf(line, "%u %" SCNu64, &w, &n) != 2 || w >= NWORKLOADS || n == 0)
                        break;
                t0 = bench_thread_cpu_ns();
                switch ((enum workload) w) {
                case W_INSERT: child_insert(&ins, n); break;
                case W_POINT_FIT: sink = child_point(&fit, n); break;
                case W_POINT_BIG: sink = child_point(&big, n); break;
                case W_RANGE_FIT: sink = child_range(&fit, n); break;
                case W_RANGE_BIG: sink = child_range(&big, n); break;
                case W_WIDE_INSERT: child_insert(&wins, n); break;
                case W_WIDE_POINT_FIT: sink = child_point(&wfit, n); break;
                case W_WIDE_POINT_BIG: sink = child_point(&wbig, n); break;
                case NWORKLOADS: break;
                }
                bench_clobber((void *) (intptr_t) sink);
                fprintf(out, "%.3f\n", (double) (bench_thread_cpu_ns() - t0) / (double) n);
                fflush(out);
        }
        sqlite3_close(fit.db);
        sqlite3_close(big.db);
        sqlite3_close(wfit.db);
        sqlite3_close(wbig.db);
        sqlite3_close(ins.db);
        sqlite3_close(wins.db);
        if (broker) {
                struct mb_sqlite_stats s;

                if (mb_sqlite_stats(&s) == 0)
                        fprintf(out,
                                "stats hits=%" PRIu64 " misses=%" PRIu64 " recycled=%" PRIu64
                                " fallback_caches=%" PRIu64 "\n",
                                s.hits, s.misses, s.recycled, s.fallback_caches);
        }
        fflush(out);
        return 0;
}

/* ---- the parent ---- */

struct child {
        pid_t pid;
        FILE *to, *from;
};

static int child_start(struct child *ch, enum kind kind, char **argv) {
        int down[2], up[2];

        if (pipe(down) < 0 || pipe(up) < 0)
                return -errno;
        fflush(NULL);
        ch->pid = fork();
        if (ch->pid < 0)
                return -errno;
        if (ch->pid == 0) {
                FILE *in, *out;

                close(down[1]);
                close(up[0]);
                in = fdopen(down[0], "r");
                out = fdopen(up[1], "w");
                /* Statements and connections are left for exit. */
                _exit(in && out ? child_main(kind, argv[1], argv[2], argv[3], in, out) : 2);
        }
        close(down[0]);
        close(up[1]);
        ch->to = fdopen(down[1], "w");
        ch->from = fdopen(up[0], "r");
        return ch->to && ch->from ? 0 : -ENOMEM;
}

static bool child_ready(struct child *ch) {
        char line[64];

        return fgets(line, sizeof line, ch->from) && strcmp(line, "ready\n") == 0;
}

struct ctx {
        struct child *child;
        enum workload w;
};

static double run(void *arg, uint64_t iters) {
        struct ctx *x = arg;
        char line[64];

        fprintf(x->child->to, "%u %" PRIu64 "\n", (unsigned) x->w, iters);
        fflush(x->child->to);
        if (!fgets(line, sizeof line, x->child->from))
                return -1;
        return strtod(line, NULL);
}

static void child_stop(struct child *ch) {
        char line[256];
        int status;

        fclose(ch->to);
        while (fgets(line, sizeof line, ch->from))
                if (strncmp(line, "stats ", 6) == 0)
                        bench_note("Broker cache over the run: %.*s", (int) strcspn(line + 6, "\n"), line + 6);
        fclose(ch->from);
        (void) waitpid(ch->pid, &status, 0);
}

int main(int argc, char **argv) {
        static struct ctx ctx[NKINDS][NWORKLOADS];
        struct bench_case cases[NKINDS * NWORKLOADS];
        struct child children[NKINDS];
        char names[NKINDS * NWORKLOADS][160], b0[32], b1[32], b2[32];
        double worst = 0, worst_client = 0;
        int worst_w = -1, worst_client_w = -1;

        if (argc != 4) {
                fprintf(stderr, "usage: bench-sqlite SOCKET TENANT DIR\n");
                return 2;
        }
        bench_opts_init(&opts);
        nrows = (unsigned) bench_count(&opts, 20000, 2000);
        for (int k = 0; k < NKINDS; k++) {
                if (child_start(&children[k], (enum kind) k, argv) < 0 || !child_ready(&children[k])) {
                        fprintf(stderr, "bench-sqlite: the child \"%s\" did not start\n", kind_names[k]);
                        return 2;
                }
        }
        for (int w = 0; w < NWORKLOADS; w++)
                for (int k = 0; k < NKINDS; k++) {
                        struct bench_case *c = &cases[NKINDS * w + k];

                        ctx[k][w] = (struct ctx) { .child = &children[k], .w = (enum workload) w };
                        snprintf(names[NKINDS * w + k], sizeof names[0], "%s: %s", workload_names[w],
                                 kind_names[k]);
                        *c = (struct bench_case) { .name = names[NKINDS * w + k], .run = run, .ctx = &ctx[k][w],
                                                   .min_iters = 64, .ns_per_iter = true };
                }
        bench_run(cases, NKINDS * NWORKLOADS, &opts);

        bench_table_begin("Table 15: SQLite page cache on broker pages",
                          "The same SQLite workload on libmembroker-sqlite's page cache (every page a broker "
                          "page of the tenant, given back under pressure) and on SQLite's own page cache "
                          "(pcache1, malloc), each in a child process of its own, interleaved sample by "
                          "sample; SQLite's own cache also in a process with a libmembroker client connected "
                          "(as the broker cache needs), whose thread makes the process multi-threaded. 4 KiB "
                          "database pages; the database of the selects has 20,000 rows of 200 bytes (1,113 "
                          "pages), through a cache of 2,000 pages (fits) and one of 200 (a miss reads the page "
                          "from the file). The same rows in 8 KiB pages (557 pages; on the broker cache each "
                          "a contiguous run of two broker pages) through caches of 2,000 and 100 pages, and inserts "
                          "into a database of 8 KiB pages (cache of 2,000 pages). CPU "
                          "ns per operation (the child's thread).");
        bench_table_columns("workload: page cache", "ns/op (median)", "min–max", "ratio to SQLite's own cache",
                            NULL);
        for (int w = 0; w < NWORKLOADS; w++) {
                const struct bench_case *base = &cases[NKINDS * w + K_DEFAULT];
                const struct bench_case *client = &cases[NKINDS * w + K_DEFAULT_CLIENT];
                const struct bench_case *broker = &cases[NKINDS * w + K_BROKER];

                for (int k = 0; k < NKINDS; k++)
                        bench_table_row(&cases[NKINDS * w + k], base);
                if (!base->skip && !broker->skip && broker->stat.median / base->stat.median > worst) {
                        worst = broker->stat.median / base->stat.median;
                        worst_w = w;
                }
                if (!client->skip && !broker->skip && broker->stat.median / client->stat.median > worst_client) {
                        worst_client = broker->stat.median / client->stat.median;
                        worst_client_w = w;
                }
        }
        putchar('\n');
        for (int k = NKINDS - 1; k >= 0; k--)
                child_stop(&children[k]);
        bench_note_round_trip();
        if (worst_w >= 0)
                bench_target(worst <= 1.1, "SQLite on the broker page cache within 1.1× of SQLite's own cache",
                             "worst workload %s: %s, %s vs %s ns", workload_names[worst_w],
                             bench_fmt_ratio(b0, sizeof b0, worst),
                             bench_fmt(b1, sizeof b1, cases[NKINDS * worst_w + K_BROKER].stat.median),
                             bench_fmt(b2, sizeof b2, cases[NKINDS * worst_w + K_DEFAULT].stat.median));
        if (worst_client_w >= 0)
                bench_note("The page cache alone (against SQLite's own cache with a client connected too): "
                           "worst workload %s: %s.", workload_names[worst_client_w],
                           bench_fmt_ratio(b0, sizeof b0, worst_client));
        return bench_finish();
}
