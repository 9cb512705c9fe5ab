/* SPDX-License-Identifier: MIT */
/*
 * slab-remote.c - remote frees and remote drains against the slab fast
 * paths on every CPU, with a real client of a real membrokerd.
 *
 *   slab-remote SOCKET TENANT ROUNDS [MIN_DRAINS]
 *
 * One worker thread pinned to each CPU the process may run on.  Every
 * round a worker allocates a batch of objects from three caches, stamps
 * each one (a unique id at its start, its complement at its end), frees
 * some itself, keeps some for the next round, and hands the rest to the
 * worker of the next CPU, which frees them there (remote frees: the
 * objects land on another CPU's list).  Meanwhile a drainer thread moves
 * itself over every CPU in turn and takes the per-CPU lists from there
 * (mb_cache_shrink(), mb_slab_drain(), mb_cache_stats(), mb_slab_stats(),
 * mb_client_drain_stocks()), so that remote lockers and their rseq fences
 * meet the sequences of the CPU they drain, and local ones those of their
 * own CPU.
 *
 * Checked: every stamp intact at free (an object handed out twice while
 * live is overwritten by its second holder); no two objects live at once
 * overlap; the caches' allocs and frees equal the test's own tally; the
 * byte stock invariant and, after mb_slab_drain(), the slab stat in the
 * stats region equal the bytes of the live objects; at the end every
 * object is back in its slab (shrink leaves no slab), every page is
 * returned, the stats are zero.  Prints "rseq=1" when the fast paths may
 * run as restartable sequences (glibc registered rseq, MEMBROKER_SLAB_RSEQ
 * is not 0).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/rseq.h>

#include "macros.h"
#include "core/mb_internal.h"
#include "membroker.h"

#define CHECK(cond, ...)                                                  \
        do {                                                              \
                if (!(cond)) {                                            \
                        fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
                        fprintf(stderr, __VA_ARGS__);                     \
                        fputc('\n', stderr);                              \
                        exit(1);                                          \
                }                                                         \
        } while (0)

#define MAX_WORKERS 64u
#define BATCH_OBJECTS 96u        /* allocated per round and worker */
#define KEEP_OBJECTS 32u         /* held across rounds */
#define NCACHES 3u
#define MIN_DRAINS 1000ul        /* by default, workers go on until the drainer made this many */

static const size_t sizes[NCACHES] = { 16, 64, 200 };
static mb_client *client;
static mb_cache *caches[NCACHES];

struct obj {
        uint64_t *p;
        uint64_t id;
        uint32_t cache;
};

/* A worker's inbox: objects the previous CPU's worker hands over. */
struct inbox {
        pthread_mutex_t lock;
        struct obj *v;
        size_t n, cap;
};

struct worker {
        unsigned idx, cpu;
        unsigned long rounds;
        struct inbox inbox;
        struct worker *next;
        struct obj keep[KEEP_OBJECTS];
        uint64_t allocs[NCACHES], frees[NCACHES];
        unsigned seed;
};

static struct worker workers[MAX_WORKERS];
static unsigned long drains; /* the drainer's rounds (atomic) */
static unsigned long min_drains = MIN_DRAINS;
static unsigned nworkers;
static unsigned cpus[MAX_WORKERS];

static void pin(unsigned cpu) {
        cpu_set_t set;

        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        CHECK(sched_setaffinity(0, sizeof(set), &set) == 0, "sched_setaffinity(%u): %s", cpu, strerror(errno));
}

static void stamp(struct obj *o) {
        size_t words = sizes[o->cache] / 8;

        o->p[0] = o->id;
        o->p[words - 1] = ~o->id;
}

static void free_checked(struct worker *w, struct obj *o) {
        size_t words = sizes[o->cache] / 8;

        CHECK(o->p[0] == o->id && o->p[words - 1] == ~o->id,
              "object %p of cache %zu: stamp %#" PRIx64 "/%#" PRIx64 ", expected %#" PRIx64
              " (handed out twice, or written after its free)",
              (void *) o->p, sizes[o->cache], o->p[0], o->p[words - 1], o->id);
        mb_cache_free(caches[o->cache], o->p);
        w->frees[o->cache]++;
        o->p = NULL;
}

static void *worker_run(void *arg) {
        struct worker *w = arg;
        struct obj batch[BATCH_OBJECTS], *mine;
        uint64_t next_id = ((uint64_t) w->idx + 1) << 40;
        unsigned long rounds = w->rounds, r;

        pin(w->cpu);
        mine = malloc(BATCH_OBJECTS * sizeof(*mine));
        CHECK(mine, "out of memory");
        for (r = 0; r < rounds || __atomic_load_n(&drains, __ATOMIC_RELAXED) < min_drains; r++) {
                size_t nmine = 0, nsend = 0;
                struct obj *in;
                size_t nin;

                for (unsigned i = 0; i < BATCH_OBJECTS; i++) {
                        struct obj *o = &batch[i];

                        o->cache = (uint32_t) ((unsigned) rand_r(&w->seed) % NCACHES);
                        o->p = mb_cache_alloc(caches[o->cache]);
                        CHECK(o->p, "mb_cache_alloc: %s", mb_last_error());
                        o->id = next_id++;
                        stamp(o);
                        w->allocs[o->cache]++;
                }
                /* A third freed here, a third to the next CPU, a third
                 * swapped with the kept ones. */
                {
                        MB_LOCK_GUARD(&w->next->inbox.lock);
                        struct inbox *ib = &w->next->inbox;

                        for (unsigned i = 0; i < BATCH_OBJECTS; i++) {
                                unsigned k = (unsigned) rand_r(&w->seed) % 3;

                                if (k == 0 && ib->n < ib->cap) {
                                        ib->v[ib->n++] = batch[i];
                                        nsend++;
                                } else if (k == 1) {
                                        struct obj *kept = &w->keep[(unsigned) rand_r(&w->seed) % KEEP_OBJECTS];

                                        if (kept->p)
                                                mine[nmine++] = *kept;
                                        *kept = batch[i];
                                } else
                                        mine[nmine++] = batch[i];
                        }
                }
                for (size_t i = 0; i < nmine; i++)
                        free_checked(w, &mine[i]);
                /* The objects the previous CPU's worker sent: remote frees. */
                {
                        MB_LOCK_GUARD(&w->inbox.lock);
                        nin = w->inbox.n;
                        in = malloc((nin + 1) * sizeof(*in));
                        CHECK(in, "out of memory");
                        memcpy(in, w->inbox.v, nin * sizeof(*in));
                        w->inbox.n = 0;
                }
                for (size_t i = 0; i < nin; i++)
                        free_checked(w, &in[i]);
                free(in);
                (void) nsend;
        }
        free(mine);
        w->rounds = r;
        return NULL;
}

struct drainer {
        bool stop;
        unsigned long rounds;
};

static void *drainer_run(void *arg) {
        struct drainer *d = arg;
        unsigned seed = 4242;

        while (!__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE)) {
                struct mb_cache_stats st;
                struct mb_slab_stats ss;
                mb_cache *s = caches[(unsigned) rand_r(&seed) % NCACHES];

                pin(cpus[d->rounds % nworkers]);
                switch (rand_r(&seed) % 4) {
                case 0:
                        mb_cache_shrink(s);
                        break;
                case 1:
                        mb_slab_drain(client);
                        break;
                case 2:
                        CHECK(mb_cache_stats(s, &st) == 0 && mb_slab_stats(client, &ss) == 0, "stats");
                        break;
                default:
                        CHECK(mb_client_drain_stocks(client) >= 0, "mb_client_drain_stocks: %s", mb_last_error());
                }
                d->rounds++;
                __atomic_store_n(&drains, d->rounds, __ATOMIC_RELAXED);
                /* Let the workers on (valgrind runs one thread at a time). */
                sched_yield();
        }
        return NULL;
}

static int64_t region_stat(enum mb_stat_item item) {
        const struct mb_stats_region *r = mb_client_stats_region(client);
        int64_t sum = 0;

        for (uint32_t i = 0; i < r->nslots; i++)
                sum += __atomic_load_n(&r->slot[i].v[item], __ATOMIC_RELAXED);
        return sum;
}

/* The caches' counts against the test's tally, and the bytes. */
static void check_exact(uint64_t live_bytes_want) {
        uint64_t live_bytes = 0, recl = 0;
        struct mb_slab_stats ss;

        for (unsigned c = 0; c < NCACHES; c++) {
                struct mb_cache_stats st;
                uint64_t allocs = 0, frees = 0;

                for (unsigned i = 0; i < nworkers; i++) {
                        allocs += workers[i].allocs[c];
                        frees += workers[i].frees[c];
                }
                CHECK(mb_cache_stats(caches[c], &st) == 0, "mb_cache_stats");
                CHECK(st.allocs == allocs && st.frees == frees,
                      "cache %zu counts %" PRIu64 " allocs, %" PRIu64 " frees; the test %" PRIu64 ", %" PRIu64,
                      sizes[c], st.allocs, st.frees, allocs, frees);
                CHECK(st.errors == 0, "cache %zu reported %" PRIu64 " errors", sizes[c], st.errors);
                live_bytes += st.live_objects * st.object_bytes;
                if (st.flags & MB_CACHE_RECLAIMABLE)
                        recl += st.live_objects * st.object_bytes;
        }
        CHECK(live_bytes == live_bytes_want, "caches hold %" PRIu64 " live bytes, the test %" PRIu64, live_bytes,
              live_bytes_want);
        CHECK(mb_slab_stats(client, &ss) == 0, "mb_slab_stats");
        CHECK((ss.charged_pages - ss.uncharged_pages) * mb_page_size(client) == live_bytes + ss.stock_bytes,
              "byte stock: charged %" PRIu64 " - uncharged %" PRIu64 " pages vs %" PRIu64 " live + %" PRIu64
              " stocked bytes", ss.charged_pages, ss.uncharged_pages, live_bytes, ss.stock_bytes);
        mb_slab_drain(client);
        CHECK(region_stat(MB_STAT_SLAB_RECLAIMABLE) == (int64_t) recl &&
              region_stat(MB_STAT_SLAB_UNRECLAIMABLE) == (int64_t) (live_bytes - recl),
              "region slab stats %" PRId64 " + %" PRId64 ", live %" PRIu64 " + %" PRIu64,
              region_stat(MB_STAT_SLAB_RECLAIMABLE), region_stat(MB_STAT_SLAB_UNRECLAIMABLE), recl,
              live_bytes - recl);
        printf("ok counts and bytes exact: %" PRIu64 " live bytes\n", live_bytes);
}

static int span_cmp(const void *a, const void *b) {
        uintptr_t x = (uintptr_t) ((const struct obj *) a)->p, y = (uintptr_t) ((const struct obj *) b)->p;

        return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
        unsigned long rounds;
        pthread_t t[MAX_WORKERS], dt;
        struct drainer d = {};
        cpu_set_t set;
        struct obj *all;
        size_t nall = 0;
        uint64_t live_bytes = 0;
        int r;

        if (argc != 4 && argc != 5) {
                fprintf(stderr, "usage: %s SOCKET TENANT ROUNDS [MIN_DRAINS]\n", argv[0]);
                return 2;
        }
        rounds = strtoul(argv[3], NULL, 10);
        if (argc == 5)
                min_drains = strtoul(argv[4], NULL, 10);
        CHECK(sched_getaffinity(0, sizeof(set), &set) == 0, "sched_getaffinity");
        for (unsigned c = 0; c < CPU_SETSIZE && nworkers < MAX_WORKERS; c++)
                if (CPU_ISSET(c, &set))
                        cpus[nworkers++] = c;
        r = mb_connect(argv[1], argv[2], &client);
        if (r < 0) {
                fprintf(stderr, "mb_connect: %s (%s)\n", mb_last_error(), strerror(-r));
                return 2;
        }
        {
                const char *e = getenv("MEMBROKER_SLAB_RSEQ");

                /* What the slab fast paths run as (slab.h): sequences when
                 * glibc registered rseq and the user did not say 0. */
                printf("rseq=%d cpus=%u\n",
                       __rseq_size > 0 && mb_client_cpu_offset(client) >= 0 && !(e && strcmp(e, "0") == 0),
                       nworkers);
        }
        for (unsigned c = 0; c < NCACHES; c++) {
                char name[32];

                snprintf(name, sizeof(name), "remote-%zu", sizes[c]);
                caches[c] = mb_cache_create(client, name, sizes[c], 0, c == 1 ? MB_CACHE_RECLAIMABLE : 0, NULL);
                CHECK(caches[c], "mb_cache_create: %s", mb_last_error());
        }
        for (unsigned i = 0; i < nworkers; i++) {
                struct worker *w = &workers[i];

                w->idx = i;
                w->cpu = cpus[i];
                w->rounds = rounds;
                w->seed = 77u + i;
                w->next = &workers[(i + 1) % nworkers];
                pthread_mutex_init(&w->inbox.lock, NULL);
                w->inbox.cap = 4u * BATCH_OBJECTS;
                w->inbox.v = calloc(w->inbox.cap, sizeof(struct obj));
                CHECK(w->inbox.v, "out of memory");
        }
        CHECK(pthread_create(&dt, NULL, drainer_run, &d) == 0, "pthread_create");
        for (unsigned i = 0; i < nworkers; i++)
                CHECK(pthread_create(&t[i], NULL, worker_run, &workers[i]) == 0, "pthread_create");
        for (unsigned i = 0; i < nworkers; i++)
                CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
        __atomic_store_n(&d.stop, true, __ATOMIC_RELEASE);
        CHECK(pthread_join(dt, NULL) == 0, "pthread_join");
        for (unsigned i = 0; i < nworkers; i++)
                rounds = MB_MIN(rounds, workers[i].rounds);
        printf("ok %u pinned workers x %lu+ rounds, %lu remote drains from every CPU, stamps intact\n", nworkers,
               rounds, d.rounds);

        /* What is still live: kept objects and undelivered inboxes. */
        all = calloc((size_t) nworkers * (KEEP_OBJECTS + 4u * BATCH_OBJECTS), sizeof(*all));
        CHECK(all, "out of memory");
        for (unsigned i = 0; i < nworkers; i++) {
                for (unsigned k = 0; k < KEEP_OBJECTS; k++)
                        if (workers[i].keep[k].p)
                                all[nall++] = workers[i].keep[k];
                for (size_t k = 0; k < workers[i].inbox.n; k++)
                        all[nall++] = workers[i].inbox.v[k];
        }
        qsort(all, nall, sizeof(*all), span_cmp);
        for (size_t i = 0; i < nall; i++) {
                struct mb_cache_stats st;

                CHECK(mb_cache_stats(caches[all[i].cache], &st) == 0, "mb_cache_stats");
                live_bytes += st.object_bytes;
                if (i > 0)
                        CHECK((uintptr_t) all[i - 1].p + sizes[all[i - 1].cache] <= (uintptr_t) all[i].p,
                              "live objects %p and %p overlap", (void *) all[i - 1].p, (void *) all[i].p);
        }
        printf("ok %zu live objects, no overlap\n", nall);
        check_exact(live_bytes);

        for (size_t i = 0; i < nall; i++)
                free_checked(&workers[0], &all[i]);
        free(all);
        check_exact(0);
        for (unsigned c = 0; c < NCACHES; c++) {
                struct mb_cache_stats st;

                mb_cache_shrink(caches[c]);
                CHECK(mb_cache_stats(caches[c], &st) == 0, "mb_cache_stats");
                CHECK(st.slabs == 0 && st.live_objects == 0 && st.cpu_free_objects == 0,
                      "cache %zu keeps %" PRIu64 " slabs: objects lost", sizes[c], st.slabs);
                CHECK(mb_cache_destroy(caches[c]) == 0, "live objects at destroy");
        }
        CHECK(mb_client_drain_stocks(client) >= 0, "mb_client_drain_stocks");
        CHECK(region_stat(MB_STAT_SLAB_RECLAIMABLE) == 0 && region_stat(MB_STAT_SLAB_UNRECLAIMABLE) == 0,
              "slab stat not back to zero");
        CHECK(region_stat(MB_STAT_PAGES) == 0, "%" PRId64 " pages still in use", region_stat(MB_STAT_PAGES));
        printf("ok every object back in its slab, every page returned, stats zero\n");
        mb_close(client);
        return 0;
}
