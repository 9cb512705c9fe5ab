/* SPDX-License-Identifier: MIT */
/*
 * stats.c - table 6, statistics (seeds 001 and 004), on the real accounting
 * core (libmbcore: tenant tree, rstat).
 *
 * 6a: 10,000 tenants (100 parents of 99 leaves each), every leaf with a
 *     stats region of one slot per possible CPU, as a connected client would
 *     have; 1% of the leaves (100, a fixed pseudo-random choice) write their
 *     slots and mark their region dirty as libmembroker does, then one
 *     tenant's stat is read.  A read does what the daemon does before
 *     serving a stat (manager_stats_refresh()): poll the sources in the
 *     subtree read (rstat_poll_source(): one read of the dirty word per
 *     unchanged source), then flush that subtree.  One row reads the root
 *     polling every slot instead (rstat_poll_source_full(), what the periodic
 *     flush does, and what every poll did before the dirty word).  The "full
 *     flush" row is what a flush costs without the updated tree: every slot
 *     polled, every tenant folded.  Work = nodes the flush visited
 *     (rstat_flush()'s count) and sources polled; time per read.
 *
 * 6b: local (non-hierarchical) stats of 1,000 tenants, 1% changed: read
 *     from the counters rstat maintains (after the poll + flush a read
 *     needs; the poll by dirty word, and for comparison by walking every
 *     slot), vs summing every per-CPU slot of every tenant (what the kernel
 *     did before the kernel kept local stats as counters).  Slots per source: this machine's CPUs, and 64
 *     and 256 to show how both scale with the CPU count (the seed measured
 *     on 256 CPUs).
 *
 * Times are wall time around each read alone (CLOCK_MONOTONIC, a vDSO call;
 * the thread CPU clock is a system call costing microseconds here, more
 * than a targeted read), averaged over the reads of a sample.
 *
 * With MB_BENCH_CALLGRIND=1 the program runs every case once and marks each
 * with CALLGRIND_DUMP_STATS_AT, for instruction counts that machine noise
 * cannot touch (bench/run-stats-callgrind.sh runs it under valgrind).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "rstat.h"
#include "tenant.h"

#if defined(__has_include)
#  if __has_include(<valgrind/callgrind.h>)
#    define HAVE_VALGRIND_CALLGRIND_H 1
#  endif
#endif
#ifdef HAVE_VALGRIND_CALLGRIND_H
#  include <valgrind/callgrind.h>
#else
#  define CALLGRIND_DUMP_STATS_AT(s) ((void) 0)
#  define CALLGRIND_ZERO_STATS ((void) 0)
#endif

#define NPARENTS 100
#define NLEAVES_PER_PARENT 99
#define CHANGED_PERCENT 1

struct world {
        struct tenant_tree *tree;
        unsigned nslots;
        size_t ntenants; /* without the root */
        struct tenant **t;
        struct rstat_source **src;
        struct mb_stats_region **region; /* one per leaf, NULL for parents */
        struct mb_stat_slot **slots;     /* region[k]->slot */
        size_t *changed; /* indexes into t[] */
        size_t nchanged;
        unsigned nparents, nleaves;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void) {
        /* xorshift64*: fixed seed, the same choice on every run */
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545F4914F6CDD1DULL;
}

static void die(const char *what, int r) {
        fprintf(stderr, "bench-stats: %s: %s\n", what, strerror(-r));
        exit(2);
}

/* nparents parents of nleaves leaves; t[] holds parent i at i*(nleaves+1)
 * followed by its leaves. */
static void world_init(struct world *w, unsigned nparents, unsigned nleaves, unsigned nslots) {
        size_t n = (size_t) nparents * (nleaves + 1), k = 0;
        int r;

        *w = (struct world) { .nslots = nslots, .ntenants = n, .nparents = nparents, .nleaves = nleaves };
        r = tenant_tree_new(1UL << 30, nslots, &w->tree);
        if (r < 0)
                die("tenant_tree_new", r);
        w->t = calloc(n, sizeof(*w->t));
        w->src = calloc(n, sizeof(*w->src));
        w->slots = calloc(n, sizeof(*w->slots));
        w->region = calloc(n, sizeof(*w->region));
        if (!w->t || !w->src || !w->slots || !w->region)
                die("calloc", -ENOMEM);

        for (unsigned p = 0; p < nparents; p++)
                for (unsigned l = 0; l <= nleaves; l++) {
                        char path[64];

                        if (l == 0)
                                snprintf(path, sizeof path, "p%03u", p);
                        else
                                snprintf(path, sizeof path, "p%03u/l%03u", p, l);
                        r = tenant_create(w->tree, path, &w->t[k]);
                        if (r < 0)
                                die("tenant_create", r);
                        /* parents have children, so no clients: no source.  A
                         * leaf's region is set up as the daemon creates it
                         * and libmembroker attaches to it. */
                        if (l > 0) {
                                size_t bytes = (size_t) mb_stats_region_bytes(nslots);
                                struct mb_stats_region *region = aligned_alloc(64, bytes);

                                if (!region)
                                        die("aligned_alloc", -ENOMEM);
                                memset(region, 0, bytes);
                                region->magic = MB_STATS_MAGIC;
                                region->version = MB_STATS_VERSION;
                                region->nslots = nslots;
                                region->nitems = _MB_STAT_NR;
                                r = rstat_source_attach_region(&w->t[k]->rstat, region, nslots, &w->src[k]);
                                if (r < 0)
                                        die("rstat_source_attach_region", r);
                                mb_stats_region_writer_attach(region);
                                w->region[k] = region;
                                w->slots[k] = region->slot;
                        }
                        k++;
                }

        /* 1% of the leaves change, a fixed pseudo-random choice */
        w->nchanged = (size_t) nparents * nleaves * CHANGED_PERCENT / 100;
        if (w->nchanged < 1)
                w->nchanged = 1;
        w->changed = calloc(w->nchanged, sizeof(*w->changed));
        for (size_t i = 0; i < w->nchanged; i++) {
                size_t idx;
                bool dup;

                do {
                        unsigned p = (unsigned) (rng() % nparents), l = 1 + (unsigned) (rng() % nleaves);
                        idx = (size_t) p * (nleaves + 1) + l;
                        dup = false;
                        for (size_t j = 0; j < i; j++)
                                dup |= w->changed[j] == idx;
                } while (dup);
                w->changed[i] = idx;
        }
}

/* What clients do on their fast path: write their slot (one CPU each) and
 * mark their region dirty (libmembroker's stock_stat_dirty()). */
static void world_write(struct world *w) {
        for (size_t i = 0; i < w->nchanged; i++) {
                size_t k = w->changed[i];
                unsigned cpu = (unsigned) (k % w->nslots);
                struct mb_stat_slot *s = &w->slots[k][cpu];

                mb_stat_slot_add(s, MB_STAT_PAGES, 1);
                mb_stat_slot_add(s, MB_STAT_PGALLOC, 1);
                mb_stats_region_mark_dirty(mb_stats_region_of_slot(s, cpu));
        }
}

/* Poll every source in the subtree of t[first .. first+count): by the dirty
 * word (what a read does), or walking every slot (@full: the periodic
 * flush, and every poll before the dirty word). */
static uint64_t poll_range(struct world *w, size_t first, size_t count, bool full) {
        uint64_t polled = 0;

        for (size_t k = first; k < first + count; k++)
                if (w->src[k]) {
                        if (full)
                                rstat_poll_source_full(&w->tree->rstat, &w->t[k]->rstat, w->src[k]);
                        else
                                rstat_poll_source(&w->tree->rstat, &w->t[k]->rstat, w->src[k]);
                        polled++;
                }
        return polled;
}

/* Bring the world back to "nothing pending". */
static void world_settle(struct world *w) {
        poll_range(w, 0, w->ntenants, true);
        rstat_flush(&w->tree->rstat, &w->tree->root->rstat);
}

enum read_kind {
        READ_LEAF,      /* one changed leaf */
        READ_PARENT,    /* one parent with a changed leaf among its 99 */
        READ_ROOT,      /* everything, with the updated tree */
        READ_ROOT_WALK, /* the same, polling every slot of every source */
        READ_FULL,      /* everything, every slot polled, every tenant folded */
        _READ_NR,
};

struct read_ctx {
        struct world *w;
        enum read_kind kind;
        uint64_t nodes, polled; /* of the last read */
};

static uint64_t do_read(struct read_ctx *c) {
        struct world *w = c->w;
        size_t leaf = w->changed[0];
        size_t parent = leaf - leaf % (w->nleaves + 1);
        struct rstat_tree *rt = &w->tree->rstat;

        switch (c->kind) {
        case READ_LEAF:
                c->polled = poll_range(w, leaf, 1, false);
                return c->nodes = rstat_flush(rt, &w->t[leaf]->rstat);
        case READ_PARENT:
                c->polled = poll_range(w, parent, w->nleaves + 1, false);
                return c->nodes = rstat_flush(rt, &w->t[parent]->rstat);
        case READ_ROOT:
                c->polled = poll_range(w, 0, w->ntenants, false);
                return c->nodes = rstat_flush(rt, &w->tree->root->rstat);
        case READ_ROOT_WALK:
        case READ_FULL:
                c->polled = poll_range(w, 0, w->ntenants, true);
                return c->nodes = rstat_flush(rt, &w->tree->root->rstat);
        case _READ_NR:
                break;
        }
        return 0;
}

static double read_run(void *ctx, uint64_t iters) {
        struct read_ctx *c = ctx;
        uint64_t total = 0;

        for (uint64_t i = 0; i < iters; i++) {
                uint64_t t0;

                world_write(c->w);
                if (c->kind == READ_FULL) /* no updated tree: everyone is folded */
                        for (size_t k = 0; k < c->w->ntenants; k++)
                                rstat_updated(&c->w->tree->rstat, &c->w->t[k]->rstat, 0);
                t0 = bench_now_ns();
                do_read(c);
                total += bench_now_ns() - t0;
                world_settle(c->w);
        }
        return (double) total / (double) iters / 1000.0; /* µs per read */
}

enum local_kind {
        LOCAL_MAINTAINED_POLL, /* poll 1,000 sources by dirty word + flush + read local[] */
        LOCAL_MAINTAINED_WALK, /* poll 1,000 sources walking every slot + flush + read local[] */
        LOCAL_MAINTAINED,      /* flush + read local[] (the changed nodes linked beforehand) */
        LOCAL_SUMMED,          /* sum every slot of every source */
        _LOCAL_NR,
};

struct local_ctx {
        struct world *w;
        enum local_kind kind;
        int64_t sink;
};

static double local_run(void *ctx, uint64_t iters) {
        struct local_ctx *c = ctx;
        struct world *w = c->w;
        uint64_t total = 0;
        int64_t sum = 0;

        for (uint64_t i = 0; i < iters; i++) {
                uint64_t t0;

                world_write(w);
                if (c->kind == LOCAL_MAINTAINED) /* as if the writers had linked themselves */
                        for (size_t j = 0; j < w->nchanged; j++)
                                rstat_poll_source(&w->tree->rstat, &w->t[w->changed[j]]->rstat,
                                                  w->src[w->changed[j]]);
                t0 = bench_now_ns();
                switch (c->kind) {
                case LOCAL_MAINTAINED_POLL:
                case LOCAL_MAINTAINED_WALK:
                        poll_range(w, 0, w->ntenants, c->kind == LOCAL_MAINTAINED_WALK);
                        /* fall through */
                case LOCAL_MAINTAINED:
                        rstat_flush(&w->tree->rstat, &w->tree->root->rstat);
                        for (size_t k = 0; k < w->ntenants; k++)
                                for (unsigned item = 0; item < _MB_STAT_NR; item++)
                                        sum += w->t[k]->rstat.local[item];
                        break;
                case LOCAL_SUMMED:
                        for (size_t k = 0; k < w->ntenants; k++) {
                                struct mb_stat_slot *s = w->slots[k];

                                if (!s)
                                        continue;
                                for (unsigned item = 0; item < _MB_STAT_NR; item++) {
                                        int64_t v = 0;
                                        for (unsigned cpu = 0; cpu < w->nslots; cpu++)
                                                v += __atomic_load_n(&s[cpu].v[item], __ATOMIC_RELAXED);
                                        sum += v;
                                }
                        }
                        break;
                case _LOCAL_NR:
                        break;
                }
                total += bench_now_ns() - t0;
                world_settle(w);
        }
        c->sink += sum;
        bench_clobber(&c->sink);
        return (double) total / (double) iters / 1000.0;
}

static unsigned possible_cpus(void) {
        long n = sysconf(_SC_NPROCESSORS_CONF);
        return n > 0 ? (unsigned) n : 1;
}

static void callgrind_mode(void) {
        struct world w;
        struct read_ctx rc = { .w = &w };
        static const char *const names[] = { "read 1 changed leaf", "read 1 parent", "read root (updated tree)",
                                              "read root, every slot polled", "full flush" };

        world_init(&w, NPARENTS, NLEAVES_PER_PARENT, possible_cpus());
        world_settle(&w);
        for (int k = READ_LEAF; k <= READ_FULL; k++) {
                rc.kind = (enum read_kind) k;
                world_write(&w);
                if (k == READ_FULL)
                        for (size_t i = 0; i < w.ntenants; i++)
                                rstat_updated(&w.tree->rstat, &w.t[i]->rstat, 0);
                CALLGRIND_ZERO_STATS;
                do_read(&rc);
                CALLGRIND_DUMP_STATS_AT(names[k]);
                world_settle(&w);
        }
}

int main(void) {
        struct bench_opts o;
        struct world w;
        struct read_ctx rc[_READ_NR];
        struct bench_case rcases[_READ_NR];
        static const char *const rnames[_READ_NR] = {
                "read 1 changed leaf (poll 1 source, flush its subtree)",
                "read 1 parent of 99 leaves, 1 changed (poll 99, flush subtree)",
                "read the root (poll all, flush the updated tree)",
                "read the root, polling every slot of every source (full walk)",
                "full flush (poll every slot, fold every tenant)",
        };
        const char *cg = getenv("MB_BENCH_CALLGRIND");
        unsigned ncpus = possible_cpus();
        unsigned nparents;
        char buf[6][64];

        if (cg && *cg && strcmp(cg, "0") != 0) {
                callgrind_mode();
                return 0;
        }

        bench_opts_init(&o);
        nparents = (unsigned) bench_count(&o, NPARENTS, 10);
        world_init(&w, nparents, NLEAVES_PER_PARENT, ncpus);
        world_settle(&w);

        for (int k = 0; k < _READ_NR; k++) {
                rc[k] = (struct read_ctx) { .w = &w, .kind = (enum read_kind) k };
                rcases[k] = (struct bench_case) { .name = rnames[k], .run = read_run, .ctx = &rc[k],
                                                  .max_iters = bench_count(&o, 1 << 14, 4) };
        }
        bench_run(rcases, _READ_NR, &o);

        bench_table_begin("Table 6a: stat of one tenant among 10,000, 1% changed (rstat flush batching)", NULL);
        printf("%zu tenants (%u parents × %u leaves + parents), a stats region of %u slots "
               "(possible CPUs) per leaf, %zu leaves (%d%%) wrote their slots and marked their region "
               "dirty before each read, as libmembroker does. "
               "A read polls the sources of the subtree it reads (one read of the region's dirty "
               "word each; when it was set, an exchange with 0 and a walk of the slots) and flushes that subtree "
               "(forced flush, as the daemon's manager_stats_refresh(…, force=true)). "
               "The full-walk row polls every slot of every source instead, as the periodic flush "
               "does (and every poll did before the dirty word). "
               "Times: wall µs around each read alone.\n\n",
               w.ntenants, nparents, NLEAVES_PER_PARENT, ncpus, w.nchanged, CHANGED_PERCENT);
        bench_table_columns("read", "sources polled", "nodes flushed", "µs/read (median)", "min–max",
                            "time ratio to the full flush", NULL);
        for (int k = 0; k < _READ_NR; k++) {
                char polled[32], nodes[32], ratio[96];
                struct bench_case *c = &rcases[k];

                if (c->skip) {
                        bench_table_row(c, NULL);
                        continue;
                }
                snprintf(polled, sizeof polled, "%llu", (unsigned long long) rc[k].polled);
                snprintf(nodes, sizeof nodes, "%llu", (unsigned long long) rc[k].nodes);
                bench_fmt(buf[0], sizeof buf[0], c->stat.median);
                snprintf(buf[1], sizeof buf[1], "%s–%s", bench_fmt(buf[2], sizeof buf[2], c->stat.min),
                         bench_fmt(buf[3], sizeof buf[3], c->stat.max));
                if (k == READ_FULL)
                        snprintf(ratio, sizeof ratio, "1.00× (base)");
                else
                        bench_fmt_ratio(ratio, sizeof ratio, c->stat.median / rcases[READ_FULL].stat.median);
                bench_table_cells(c->name, polled, nodes, buf[0], buf[1], ratio, NULL);
        }
        putchar('\n');
        if (!rcases[READ_LEAF].skip && !rcases[READ_FULL].skip) {
                double nodes_ratio = (double) rc[READ_FULL].nodes / (double) (rc[READ_LEAF].nodes ? rc[READ_LEAF].nodes : 1);
                double time_ratio = rcases[READ_FULL].stat.median / rcases[READ_LEAF].stat.median;
                double ptime_ratio = rcases[READ_FULL].stat.median / rcases[READ_PARENT].stat.median;

                bench_target(nodes_ratio >= 50 && time_ratio >= 50,
                             "targeted flush ≥ 50× less than a full flush",
                             "1 leaf: %s fewer nodes, %s less time; 1 parent: %s less time",
                             bench_fmt_ratio(buf[0], sizeof buf[0], nodes_ratio),
                             bench_fmt_ratio(buf[1], sizeof buf[1], time_ratio),
                             bench_fmt_ratio(buf[2], sizeof buf[2], ptime_ratio));
        }
        if (!rcases[READ_ROOT].skip && !rcases[READ_ROOT_WALK].skip)
                bench_note("- reading the root: polling by the dirty word is %s as fast as walking every slot "
                           "(%u slots per source).",
                           bench_fmt_ratio(buf[0], sizeof buf[0],
                                           rcases[READ_ROOT_WALK].stat.median / rcases[READ_ROOT].stat.median),
                           ncpus);

        /* 6b: local stats of 1,000 tenants */
        {
                unsigned slot_counts[3] = { ncpus, 64, 256 };
                unsigned nsc = o.quick ? 1 : 3;
                struct world lw[3];
                struct local_ctx lc[3][_LOCAL_NR];
                struct bench_case lcases[3 * _LOCAL_NR];
                static const char *const kinds[_LOCAL_NR] = {
                        "maintained local counters (poll by dirty word + flush + read)",
                        "maintained local counters (poll every slot + flush + read)",
                        "maintained local counters (flush + read; no poll: changed tenants linked beforehand)",
                        "sum the per-CPU slots",
                };
                char names[3 * _LOCAL_NR][128];
                size_t n = 0;
                unsigned lparents = (unsigned) bench_count(&o, 10, 2);

                for (unsigned s = 0; s < nsc; s++) {
                        world_init(&lw[s], lparents, NLEAVES_PER_PARENT, slot_counts[s]);
                        world_settle(&lw[s]);
                        for (unsigned k = 0; k < _LOCAL_NR; k++) {
                                lc[s][k] = (struct local_ctx) { .w = &lw[s], .kind = (enum local_kind) k };
                                snprintf(names[n], sizeof names[n], "%u slots: %s", slot_counts[s], kinds[k]);
                                lcases[n] = (struct bench_case) { .name = names[n], .run = local_run,
                                                                  .ctx = &lc[s][k],
                                                                  .max_iters = bench_count(&o, 1 << 14, 4) };
                                n++;
                        }
                }
                bench_run(lcases, n, &o);

                bench_table_begin("Table 6b: local stats of 1,000 tenants (memcg local stats as counters)", NULL);
                printf("%zu tenants, %zu (1%%) changed before each read; every local item of every tenant "
                       "read. Slots per source = CPUs: %u is this machine, 64 and 256 stand for larger "
                       "ones.\n\n",
                       lw[0].ntenants, lw[0].nchanged, ncpus);
                bench_table_columns("slots: method", "µs/read of 1,000 (median)", "min–max",
                                    "ratio to summing, same slots", NULL);
                for (unsigned s = 0; s < nsc; s++)
                        for (unsigned k = 0; k < _LOCAL_NR; k++)
                                bench_table_row(&lcases[s * _LOCAL_NR + k],
                                                &lcases[s * _LOCAL_NR + LOCAL_SUMMED]);
                putchar('\n');
                for (unsigned s = 0; s < nsc; s++) {
                        struct bench_case *m = &lcases[s * _LOCAL_NR + LOCAL_MAINTAINED_POLL];
                        struct bench_case *walk = &lcases[s * _LOCAL_NR + LOCAL_MAINTAINED_WALK];
                        struct bench_case *sum = &lcases[s * _LOCAL_NR + LOCAL_SUMMED];

                        if (m->skip || sum->skip || walk->skip)
                                continue;
                        bench_note("- %u slots: maintained counters (as the daemon reads them, poll by dirty "
                                   "word) are %s as fast as summing slots, and %s as fast as with a poll of "
                                   "every slot.",
                                   slot_counts[s],
                                   bench_fmt_ratio(buf[0], sizeof buf[0], sum->stat.median / m->stat.median),
                                   bench_fmt_ratio(buf[1], sizeof buf[1], walk->stat.median / m->stat.median));
                }
        }
        return bench_finish();
}
