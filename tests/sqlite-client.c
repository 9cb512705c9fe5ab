/* SPDX-License-Identifier: MIT */
/*
 * sqlite-client.c - a real SQLite application on libmembroker-sqlite, driven
 * line by line for the tests (tests/test-sqlite-*.sh).
 *
 *   sqlite-client --socket PATH --tenant PATH --dir DIR [--cache-pages N]
 *                 [--no-shrinker] [--default-pcache]
 *
 * Attaches to the tenant, installs the broker page cache (unless
 * --default-pcache: SQLite's own cache, for comparison) and reads one
 * command per line from stdin, answering one line each on stdout:
 *
 *   open NAME ROWS PAGESIZE  create DIR/NAME.db with ROWS rows (page size
 *                PAGESIZE, cache_size N pages) -> "open ok NAME pages=P";
 *                a NAME starting with "mem" is an in-memory database
 *                (SQLite's non-purgeable cache: its pages are the data)
 *   run N        N operations of the workload on every database, in this
 *                thread -> "run ok=K nomem=M errors=E"
 *   start        one thread per database runs the workload until stop
 *   stop         -> "stop ok ops=K nomem=M errors=E"
 *   check        every row of every database against what it must hold
 *                (not while started) -> "check ok rows=R" | "check FAILED ..."
 *   release      sqlite3_db_release_memory() on every database (SQLite's
 *                xShrink) -> "release ok"
 *   hold N       allocate up to N broker pages and keep them (a tenant at
 *                its limit) -> "hold ok K" | "hold ENOMEM K"
 *   unhold       free them -> "unhold ok K"
 *   report       the library's statistics and the workload's counters:
 *                "report caches=.. fallback=.. pages=.. pinned=.. unpinned=..
 *                 broker_pages=.. hits=.. misses=.. allocated=.. recycled=..
 *                 alloc_failures=.. scans=.. shrinker_freed=..
 *                 shrinker_broker_pages=.. shrink_freed=.. ops=.. nomem=.. errors=.."
 *   quit         stop, close, sqlite3_shutdown(), mb_sqlite_uninstall(),
 *                mb_close() -> "bye verify=ok" | "bye verify=FAILED"
 *
 * The workload (each database its own connection and thread): point
 * selects, range sums, index counts and small update transactions, every
 * result compared with what the client knows the table holds.  Row i
 * starts as v = i * 7919 mod 10007 and a 200-byte pad derived from i; an
 * update adds to v in a range of ids, and the client adds the same to its
 * copy only when the transaction committed.  SQLITE_NOMEM is counted
 * (`nomem`, the transaction rolled back); a wrong result or any other
 * error is counted in `errors` and printed on stderr.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "membroker.h"
#include "membroker-sqlite.h"

#define MAX_DBS 8
#define PAD_BYTES 200
#define RANGE_ROWS 100
#define UPDATE_ROWS 50

struct db {
        char name[64];
        sqlite3 *db;
        int64_t *v; /* v[id], 1..rows */
        unsigned rows;
        uint64_t rng;
        pthread_t thread;
};

static struct {
        mb_client *client;
        const char *dir;
        int cache_pages;
        bool installed;
        struct db dbs[MAX_DBS];
        unsigned ndbs;
        atomic_bool stop;
        bool started;
        atomic_uint_fast64_t ops, nomem, errors;
        void **held;
        size_t nheld;
} g = { .cache_pages = 200 };

static uint64_t rng_next(uint64_t *s) {
        uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

static void make_pad(unsigned id, char out[PAD_BYTES + 1]) {
        uint32_t x = id * 2654435761u;

        for (int i = 0; i < PAD_BYTES; i++) {
                x = x * 1103515245u + 12345u;
                out[i] = (char) ('a' + (x >> 16) % 26);
        }
        out[PAD_BYTES] = 0;
}

static void bad(struct db *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad(struct db *d, const char *fmt, ...) {
        va_list ap;

        atomic_fetch_add(&g.errors, 1);
        fprintf(stderr, "sqlite-client: %s: ", d->name);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/* One SQL statement without results; returns the SQLite code. */
static int exec(struct db *d, const char *sql) {
        return sqlite3_exec(d->db, sql, NULL, NULL, NULL);
}

/* A failed step or prepare: NOMEM is counted, anything else is an error. */
static void failed(struct db *d, int rc, const char *what) {
        if (rc == SQLITE_NOMEM)
                atomic_fetch_add(&g.nomem, 1);
        else
                bad(d, "%s: %s (%d)", what, sqlite3_errmsg(d->db), rc);
}

static void op_point(struct db *d) {
        unsigned id = 1 + (unsigned) (rng_next(&d->rng) % d->rows);
        char pad[PAD_BYTES + 1];
        sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(d->db, "SELECT v, pad FROM t WHERE id = ?", -1, &st, NULL);
        if (rc != SQLITE_OK) {
                failed(d, rc, "prepare point");
                return;
        }
        sqlite3_bind_int(st, 1, (int) id);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                make_pad(id, pad);
                if (sqlite3_column_int64(st, 0) != d->v[id])
                        bad(d, "row %u: v=%lld, expected %lld", id, (long long) sqlite3_column_int64(st, 0),
                            (long long) d->v[id]);
                else if (strcmp((const char *) sqlite3_column_text(st, 1), pad) != 0)
                        bad(d, "row %u: wrong pad", id);
        } else if (rc == SQLITE_DONE) {
                bad(d, "row %u missing", id);
        } else {
                failed(d, rc, "point select");
        }
        sqlite3_finalize(st);
}

static void op_range(struct db *d) {
        unsigned a = 1 + (unsigned) (rng_next(&d->rng) % d->rows), b = a + RANGE_ROWS - 1;
        int64_t want = 0, n = 0;
        sqlite3_stmt *st = NULL;
        int rc;

        if (b > d->rows)
                b = d->rows;
        for (unsigned i = a; i <= b; i++)
                want += d->v[i];
        rc = sqlite3_prepare_v2(d->db, "SELECT sum(v), count(*) FROM t WHERE id BETWEEN ? AND ?", -1, &st, NULL);
        if (rc != SQLITE_OK) {
                failed(d, rc, "prepare range");
                return;
        }
        sqlite3_bind_int(st, 1, (int) a);
        sqlite3_bind_int(st, 2, (int) b);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                n = sqlite3_column_int64(st, 1);
                if (sqlite3_column_int64(st, 0) != want || n != (int64_t) (b - a + 1))
                        bad(d, "ids %u..%u: sum %lld count %lld, expected %lld and %u", a, b,
                            (long long) sqlite3_column_int64(st, 0), (long long) n, (long long) want, b - a + 1);
        } else {
                failed(d, rc, "range sum");
        }
        sqlite3_finalize(st);
}

/* A count through the index on v (its pages, not the table's). */
static void op_index(struct db *d) {
        int64_t lo = (int64_t) (rng_next(&d->rng) % 10007), hi = lo + 200, want = 0;
        sqlite3_stmt *st = NULL;
        int rc;

        for (unsigned i = 1; i <= d->rows; i++)
                want += d->v[i] >= lo && d->v[i] <= hi;
        rc = sqlite3_prepare_v2(d->db, "SELECT count(*) FROM t INDEXED BY t_v WHERE v BETWEEN ? AND ?", -1, &st,
                                NULL);
        if (rc != SQLITE_OK) {
                failed(d, rc, "prepare index");
                return;
        }
        sqlite3_bind_int64(st, 1, lo);
        sqlite3_bind_int64(st, 2, hi);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                if (sqlite3_column_int64(st, 0) != want)
                        bad(d, "v in %lld..%lld: count %lld, expected %lld", (long long) lo, (long long) hi,
                            (long long) sqlite3_column_int64(st, 0), (long long) want);
        } else {
                failed(d, rc, "index count");
        }
        sqlite3_finalize(st);
}

static void op_update(struct db *d) {
        unsigned a = 1 + (unsigned) (rng_next(&d->rng) % d->rows), b = a + UPDATE_ROWS - 1;
        int delta = 1 + (int) (rng_next(&d->rng) % 5);
        char sql[128];
        int rc;

        if (b > d->rows)
                b = d->rows;
        rc = exec(d, "BEGIN");
        if (rc != SQLITE_OK) {
                failed(d, rc, "begin");
                return;
        }
        snprintf(sql, sizeof(sql), "UPDATE t SET v = v + %d WHERE id BETWEEN %u AND %u", delta, a, b);
        rc = exec(d, sql);
        if (rc == SQLITE_OK)
                rc = exec(d, "COMMIT");
        if (rc == SQLITE_OK) {
                for (unsigned i = a; i <= b; i++)
                        d->v[i] += delta;
                return;
        }
        failed(d, rc, "update");
        if (!sqlite3_get_autocommit(d->db))
                (void) exec(d, "ROLLBACK");
}

static void op_one(struct db *d) {
        unsigned op = (unsigned) (rng_next(&d->rng) % 100);

        if (op < 60)
                op_point(d);
        else if (op < 88)
                op_range(d);
        else if (op < 95)
                op_index(d);
        else
                op_update(d);
        atomic_fetch_add(&g.ops, 1);
}

static void *loop_run(void *arg) {
        struct db *d = arg;

        while (!atomic_load(&g.stop))
                op_one(d);
        return NULL;
}

static int check_db(struct db *d, unsigned *rows) {
        char pad[PAD_BYTES + 1];
        sqlite3_stmt *st = NULL;
        unsigned next = 1;
        int rc;

        rc = sqlite3_prepare_v2(d->db, "SELECT id, v, pad FROM t ORDER BY id", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                unsigned id = (unsigned) sqlite3_column_int(st, 0);

                make_pad(id, pad);
                if (id != next || id > d->rows || sqlite3_column_int64(st, 1) != d->v[id] ||
                    strcmp((const char *) sqlite3_column_text(st, 2), pad) != 0) {
                        bad(d, "check: row %u (expected id %u) differs", id, next);
                        sqlite3_finalize(st);
                        return SQLITE_CORRUPT;
                }
                next++;
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
                return rc;
        if (next != d->rows + 1) {
                bad(d, "check: %u rows, expected %u", next - 1, d->rows);
                return SQLITE_CORRUPT;
        }
        *rows += d->rows;
        return SQLITE_OK;
}

static int open_db(const char *name, unsigned rows, int page_size) {
        struct db *d = &g.dbs[g.ndbs];
        char path[4096], sql[128], pad[PAD_BYTES + 1];
        sqlite3_stmt *st = NULL;
        int rc;

        if (g.ndbs == MAX_DBS || rows == 0)
                return SQLITE_RANGE;
        memset(d, 0, sizeof(*d));
        snprintf(d->name, sizeof(d->name), "%s", name);
        if (strncmp(name, "mem", 3) == 0) {
                snprintf(path, sizeof(path), ":memory:");
        } else {
                snprintf(path, sizeof(path), "%s/%s.db", g.dir, name);
                (void) unlink(path);
        }
        d->rows = rows;
        d->rng = (uint64_t) g.ndbs * 1000003u + 17;
        d->v = calloc(rows + 1, sizeof(*d->v));
        if (!d->v)
                return SQLITE_NOMEM;
        rc = sqlite3_open(path, &d->db);
        if (rc != SQLITE_OK)
                return rc;
        snprintf(sql, sizeof(sql), "PRAGMA page_size = %d; PRAGMA cache_size = %d; PRAGMA synchronous = OFF",
                 page_size, g.cache_pages);
        rc = exec(d, sql);
        if (rc == SQLITE_OK)
                rc = exec(d, "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL, pad TEXT NOT NULL);"
                             "CREATE INDEX t_v ON t (v)");
        if (rc == SQLITE_OK)
                rc = sqlite3_prepare_v2(d->db, "INSERT INTO t (id, v, pad) VALUES (?, ?, ?)", -1, &st, NULL);
        for (unsigned i = 1; rc == SQLITE_OK && i <= rows; i++) {
                if (i % 1000 == 1)
                        rc = exec(d, "BEGIN");
                d->v[i] = (int64_t) ((uint64_t) i * 7919u % 10007u);
                make_pad(i, pad);
                sqlite3_bind_int(st, 1, (int) i);
                sqlite3_bind_int64(st, 2, d->v[i]);
                sqlite3_bind_text(st, 3, pad, PAD_BYTES, SQLITE_TRANSIENT);
                if (rc == SQLITE_OK && sqlite3_step(st) != SQLITE_DONE)
                        rc = sqlite3_errcode(d->db);
                sqlite3_reset(st);
                if (rc == SQLITE_OK && (i % 1000 == 0 || i == rows))
                        rc = exec(d, "COMMIT");
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_OK) {
                fprintf(stderr, "sqlite-client: open %s: %s\n", name, sqlite3_errmsg(d->db));
                sqlite3_close(d->db);
                free(d->v);
                return rc;
        }
        g.ndbs++;
        return SQLITE_OK;
}

static void loops_stop(void) {
        if (!g.started)
                return;
        atomic_store(&g.stop, true);
        for (unsigned i = 0; i < g.ndbs; i++)
                pthread_join(g.dbs[i].thread, NULL);
        g.started = false;
}

static void report(void) {
        struct mb_sqlite_stats s = { 0 };

        if (g.installed)
                (void) mb_sqlite_stats(&s);
        printf("report caches=%" PRIu64 " fallback=%" PRIu64 " pages=%" PRIu64 " pinned=%" PRIu64
               " unpinned=%" PRIu64 " broker_pages=%" PRIu64 " hits=%" PRIu64 " misses=%" PRIu64
               " allocated=%" PRIu64 " recycled=%" PRIu64 " alloc_failures=%" PRIu64 " scans=%" PRIu64
               " shrinker_freed=%" PRIu64 " shrinker_broker_pages=%" PRIu64 " shrink_freed=%" PRIu64
               " ops=%" PRIu64 " nomem=%" PRIu64 " errors=%" PRIu64 "\n",
               s.caches, s.fallback_caches, s.pages, s.pinned_pages, s.unpinned_pages, s.broker_pages, s.hits,
               s.misses, s.allocated, s.recycled, s.alloc_failures, s.shrinker_scans, s.shrinker_freed,
               s.shrinker_broker_pages, s.shrink_freed, (uint64_t) atomic_load(&g.ops),
               (uint64_t) atomic_load(&g.nomem), (uint64_t) atomic_load(&g.errors));
}

static void unhold(void) {
        for (size_t i = 0; i < g.nheld; i++)
                (void) mb_page_free(g.client, g.held[i]);
        g.nheld = 0;
}

static void command(char *line) {
        char name[64];
        unsigned rows, n;
        int page_size;

        if (sscanf(line, "open %63s %u %d", name, &rows, &page_size) == 3) {
                int rc = open_db(name, rows, page_size);
                sqlite3_stmt *st = NULL;
                long long pages = -1;

                if (rc != SQLITE_OK) {
                        printf("open FAILED %s\n", sqlite3_errstr(rc));
                        return;
                }
                if (sqlite3_prepare_v2(g.dbs[g.ndbs - 1].db, "PRAGMA page_count", -1, &st, NULL) == SQLITE_OK &&
                    sqlite3_step(st) == SQLITE_ROW)
                        pages = sqlite3_column_int64(st, 0);
                sqlite3_finalize(st);
                printf("open ok %s pages=%lld\n", name, pages);
        } else if (sscanf(line, "run %u", &n) == 1) {
                uint64_t ops = atomic_load(&g.ops), nomem = atomic_load(&g.nomem), err = atomic_load(&g.errors);

                if (g.started) {
                        printf("run busy\n");
                        return;
                }
                for (unsigned i = 0; i < n; i++)
                        for (unsigned k = 0; k < g.ndbs; k++)
                                op_one(&g.dbs[k]);
                printf("run ok=%" PRIu64 " nomem=%" PRIu64 " errors=%" PRIu64 "\n",
                       (uint64_t) atomic_load(&g.ops) - ops - (atomic_load(&g.nomem) - nomem),
                       (uint64_t) atomic_load(&g.nomem) - nomem, (uint64_t) atomic_load(&g.errors) - err);
        } else if (strcmp(line, "start") == 0) {
                if (g.started) {
                        printf("start busy\n");
                        return;
                }
                atomic_store(&g.stop, false);
                for (unsigned i = 0; i < g.ndbs; i++)
                        pthread_create(&g.dbs[i].thread, NULL, loop_run, &g.dbs[i]);
                g.started = true;
                printf("start ok %u\n", g.ndbs);
        } else if (strcmp(line, "stop") == 0) {
                loops_stop();
                printf("stop ok ops=%" PRIu64 " nomem=%" PRIu64 " errors=%" PRIu64 "\n",
                       (uint64_t) atomic_load(&g.ops), (uint64_t) atomic_load(&g.nomem),
                       (uint64_t) atomic_load(&g.errors));
        } else if (strcmp(line, "check") == 0) {
                unsigned total = 0;
                int rc = SQLITE_OK;

                if (g.started) {
                        printf("check busy\n");
                        return;
                }
                for (unsigned i = 0; i < g.ndbs && rc == SQLITE_OK; i++)
                        rc = check_db(&g.dbs[i], &total);
                if (rc == SQLITE_OK)
                        printf("check ok rows=%u\n", total);
                else
                        printf("check FAILED %s\n", sqlite3_errstr(rc));
        } else if (strcmp(line, "release") == 0) {
                for (unsigned i = 0; i < g.ndbs; i++)
                        (void) sqlite3_db_release_memory(g.dbs[i].db);
                printf("release ok\n");
        } else if (sscanf(line, "hold %u", &n) == 1) {
                void **v = realloc(g.held, (g.nheld + n) * sizeof(*v));
                size_t got = 0;

                if (!v) {
                        printf("hold FAILED out of memory\n");
                        return;
                }
                g.held = v;
                for (; got < n; got++) {
                        void *p = mb_page_alloc(g.client);

                        if (!p)
                                break;
                        memset(p, 0x5a, 64);
                        g.held[g.nheld++] = p;
                }
                printf("hold %s %zu\n", got == n ? "ok" : "ENOMEM", got);
        } else if (strcmp(line, "unhold") == 0) {
                size_t k = g.nheld;

                unhold();
                printf("unhold ok %zu\n", k);
        } else if (strcmp(line, "report") == 0) {
                report();
        } else {
                printf("unknown command: %s\n", line);
        }
}

static int quit(void) {
        bool ok;
        int r;

        loops_stop();
        ok = atomic_load(&g.errors) == 0;
        for (unsigned i = 0; i < g.ndbs; i++) {
                if (sqlite3_close(g.dbs[i].db) != SQLITE_OK) {
                        fprintf(stderr, "sqlite-client: close %s: %s\n", g.dbs[i].name,
                                sqlite3_errmsg(g.dbs[i].db));
                        ok = false;
                }
                free(g.dbs[i].v);
        }
        if (sqlite3_shutdown() != SQLITE_OK)
                ok = false;
        if (g.installed && (r = mb_sqlite_uninstall()) < 0) {
                fprintf(stderr, "sqlite-client: mb_sqlite_uninstall: %s\n", strerror(-r));
                ok = false;
        }
        unhold();
        free(g.held);
        mb_close(g.client);
        printf("bye verify=%s\n", ok ? "ok" : "FAILED");
        return ok ? 0 : 1;
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "tenant", required_argument, NULL, 't' },
                { "dir", required_argument, NULL, 'd' },
                { "cache-pages", required_argument, NULL, 'c' },
                { "no-shrinker", no_argument, NULL, 'n' },
                { "default-pcache", no_argument, NULL, 'D' },
                {}
        };
        const char *socket_path = NULL, *tenant = NULL;
        struct mb_sqlite_options o = { 0 };
        bool dflt = false;
        char *line = NULL;
        size_t cap = 0;
        int c, r;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 's': socket_path = optarg; break;
                case 't': tenant = optarg; break;
                case 'd': g.dir = optarg; break;
                case 'c': g.cache_pages = atoi(optarg); break;
                case 'n': o.flags |= MB_SQLITE_NO_SHRINKER; break;
                case 'D': dflt = true; break;
                default: return 2;
                }
        }
        if (!g.dir) {
                fprintf(stderr, "sqlite-client: --dir is required\n");
                return 2;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        r = mb_connect(socket_path, tenant, &g.client);
        if (r < 0) {
                fprintf(stderr, "sqlite-client: mb_connect: %s\n", mb_last_error());
                return 2;
        }
        if (sqlite3_config(SQLITE_CONFIG_SERIALIZED) != SQLITE_OK) {
                fprintf(stderr, "sqlite-client: SQLite is not thread-safe\n");
                return 2;
        }
        if (!dflt) {
                r = mb_sqlite_install(g.client, &o);
                if (r < 0) {
                        fprintf(stderr, "sqlite-client: mb_sqlite_install: %s\n", strerror(-r));
                        return 2;
                }
                g.installed = true;
                /* Installed twice: refused. */
                if (mb_sqlite_install(g.client, NULL) != -EEXIST) {
                        fprintf(stderr, "sqlite-client: a second mb_sqlite_install() was not refused\n");
                        return 2;
                }
        }
        if (sqlite3_initialize() != SQLITE_OK) {
                fprintf(stderr, "sqlite-client: sqlite3_initialize failed\n");
                return 2;
        }
        if (g.installed && mb_sqlite_uninstall() != -EBUSY) {
                fprintf(stderr, "sqlite-client: mb_sqlite_uninstall() while SQLite runs was not refused\n");
                return 2;
        }
        printf("ready page_size=%zu pcache=%s\n", mb_page_size(g.client), dflt ? "default" : "broker");
        while (getline(&line, &cap, stdin) > 0) {
                line[strcspn(line, "\n")] = 0;
                if (strcmp(line, "quit") == 0) {
                        free(line);
                        return quit();
                }
                command(line);
        }
        free(line);
        return quit();
}
