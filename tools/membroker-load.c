/* SPDX-License-Identifier: MIT */
/*
 * membroker-load - a real client that holds and churns memory in a tenant,
 * for demos, tests and benchmarks (docs/design.md; think stress-ng for the
 * broker).
 *
 * Threads each allocate their share of --hold and write into every page a
 * pattern derived from (client, page handle, generation); --churn frees and
 * reallocates pages at the given total rate, checking each page before it
 * goes; --cache pages sit behind a shrinker the daemon may call on (the
 * oldest go first, like an LRU; the cache fills up to --cache, or to what
 * the tenant's limits leave once the daemon starts taking cache pages back,
 * and with --churn it grows back at the churn rate).  At the
 * end every page still held is verified and one line is printed:
 *
 *   held=BYTES cache=BYTES allocs=N frees=N errors=N verify=ok|FAILED
 *
 * Exit status: 0 success, 1 an allocation failed for a limit (ENOMEM),
 * 2 any other error (including a failed verification).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "macros.h"
#include "mb_size.h"
#include "membroker.h"

#define EXIT_LIMIT 1
#define EXIT_ERROR 2
#define MAIN_TICK_NSEC (100 * 1000 * 1000L) /* how often the main thread looks at the socket */
#define CHURN_TICK_NSEC (5 * 1000 * 1000L)
#define CHURN_MAX_PER_TICK 65536u

struct page_rec {
        void *page;
        uint64_t gen;
};

struct load {
        /* options */
        const char *socket_path;
        const char *tenant;
        uint64_t hold_bytes;
        uint64_t cache_bytes;
        uint64_t churn_per_sec;
        unsigned nthreads;
        long seconds; /* -1: until SIGTERM/SIGINT */
        bool quiet;

        mb_client *client;
        size_t page_size;
        uint64_t seed; /* the client's part of the pattern */

        atomic_bool stop;
        atomic_uint_fast64_t allocs, frees, errors, held_pages, verify_failures;
        atomic_bool limit_hit, other_error;

        /* workers that finished their initial allocation */
        pthread_mutex_t fill_lock;
        pthread_cond_t fill_cond;
        unsigned nfilled;

        /* the cache, behind a shrinker: a ring, oldest at cache_head */
        pthread_mutex_t cache_lock;
        struct page_rec *cache;
        size_t ncache, cache_cap, cache_head;
        uint64_t cache_gen;
        uint64_t cache_target;   /* pages */
        uint64_t cache_evicted;  /* pages the shrinker gave back */
};

struct worker {
        struct load *load;
        pthread_t thread;
        unsigned id;
        uint64_t want;         /* pages to hold */
        struct page_rec *pages;
        size_t n;
        uint64_t gen;
        uint64_t rng;
        double rate;           /* churn, pages per second */
};

static uint64_t splitmix64(uint64_t x) {
        x += UINT64_C(0x9E3779B97F4A7C15);
        x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
        x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
        return x ^ (x >> 31);
}

/* The first word of the pattern of one page; word i is key ^ i * odd. */
static uint64_t pattern_key(const struct load *l, const void *page, uint64_t gen) {
        mb_handle_t h = mb_page_to_handle(l->client, page);

        return splitmix64(l->seed ^ splitmix64(h ^ (gen << 40)));
}

static void pattern_write(const struct load *l, void *page, uint64_t gen) {
        uint64_t key = pattern_key(l, page, gen), *w = page;

        for (size_t i = 0; i < l->page_size / sizeof(uint64_t); i++)
                w[i] = key ^ (i * UINT64_C(0xD1B54A32D192ED03));
}

static bool pattern_check(struct load *l, const void *page, uint64_t gen) {
        uint64_t key = pattern_key(l, page, gen);
        const uint64_t *w = page;

        for (size_t i = 0; i < l->page_size / sizeof(uint64_t); i++)
                if (w[i] != (key ^ (i * UINT64_C(0xD1B54A32D192ED03)))) {
                        if (atomic_fetch_add(&l->verify_failures, 1) == 0)
                                fprintf(stderr, "membroker-load: page %" PRIu64 " (generation %" PRIu64
                                        ") holds the wrong data at byte %zu\n",
                                        mb_page_to_handle(l->client, page), gen, i * sizeof(uint64_t));
                        return false;
                }
        return true;
}

/* Allocate one page and write its pattern; false (counted) on failure. */
static bool load_alloc(struct load *l, struct page_rec *rec, uint64_t gen) {
        void *p = mb_page_alloc(l->client);

        if (!p) {
                int e = errno;

                atomic_fetch_add(&l->errors, 1);
                if (e == ENOMEM) {
                        if (!atomic_exchange(&l->limit_hit, true) && !l->quiet)
                                fprintf(stderr, "membroker-load: allocation failed at a limit: %s\n",
                                        mb_last_error());
                } else if (!atomic_exchange(&l->other_error, true))
                        fprintf(stderr, "membroker-load: allocation failed: %s (%s)\n", mb_last_error(),
                                strerror(e));
                return false;
        }
        atomic_fetch_add(&l->allocs, 1);
        pattern_write(l, p, gen);
        *rec = (struct page_rec) { .page = p, .gen = gen };
        return true;
}

static void load_free(struct load *l, struct page_rec *rec) {
        int r;

        pattern_check(l, rec->page, rec->gen);
        r = mb_page_free(l->client, rec->page);
        if (r < 0) {
                atomic_fetch_add(&l->errors, 1);
                if (!atomic_exchange(&l->other_error, true))
                        fprintf(stderr, "membroker-load: free failed: %s\n", mb_last_error());
                return;
        }
        atomic_fetch_add(&l->frees, 1);
}

static uint64_t now_nsec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * UINT64_C(1000000000) + (uint64_t) ts.tv_nsec;
}

static void sleep_nsec(long nsec) {
        struct timespec ts = { .tv_sec = nsec / 1000000000L, .tv_nsec = nsec % 1000000000L };

        nanosleep(&ts, NULL);
}

/* Free a random page and allocate a new one in its place. */
static void worker_churn_one(struct worker *w) {
        struct load *l = w->load;
        size_t i;

        if (w->n == 0)
                return;
        w->rng = splitmix64(w->rng);
        i = (size_t) (w->rng % w->n);
        load_free(l, &w->pages[i]);
        if (!load_alloc(l, &w->pages[i], ++w->gen)) {
                w->pages[i] = w->pages[--w->n];
                atomic_fetch_sub(&l->held_pages, 1);
        }
}

static void *worker_run(void *arg) {
        struct worker *w = arg;
        struct load *l = w->load;
        uint64_t start, done = 0;

        while (w->n < w->want && !atomic_load(&l->stop) && !atomic_load(&l->limit_hit) &&
               !atomic_load(&l->other_error)) {
                if (!load_alloc(l, &w->pages[w->n], w->gen))
                        break;
                w->n++;
                atomic_fetch_add(&l->held_pages, 1);
        }
        pthread_mutex_lock(&l->fill_lock);
        l->nfilled++;
        pthread_cond_broadcast(&l->fill_cond);
        pthread_mutex_unlock(&l->fill_lock);

        start = now_nsec();
        while (!atomic_load(&l->stop)) {
                if (w->rate > 0) {
                        uint64_t due = (uint64_t) ((double) (now_nsec() - start) / 1e9 * w->rate);

                        for (unsigned k = 0; done < due && k < CHURN_MAX_PER_TICK && !atomic_load(&l->stop);
                             k++, done++)
                                worker_churn_one(w);
                }
                sleep_nsec(CHURN_TICK_NSEC);
        }

        /* Verify every page still held. */
        for (size_t i = 0; i < w->n; i++)
                pattern_check(l, w->pages[i].page, w->pages[i].gen);
        return NULL;
}

/* ---- the cache: plain pages a shrinker can take back ---- */

static unsigned long cache_count(void *userdata) {
        struct load *l = userdata;
        unsigned long n;

        pthread_mutex_lock(&l->cache_lock);
        n = l->ncache;
        pthread_mutex_unlock(&l->cache_lock);
        return n;
}

/* The shrinker: free the oldest cache pages, as an LRU would.  It may run
 * on the library's thread while other threads allocate, so nobody holds
 * cache_lock while allocating. */
static unsigned long cache_scan(void *userdata, unsigned long nr_to_scan) {
        struct load *l = userdata;
        unsigned long freed = 0;

        pthread_mutex_lock(&l->cache_lock);
        while (freed < nr_to_scan && l->ncache > 0) {
                load_free(l, &l->cache[l->cache_head]);
                l->cache_head = (l->cache_head + 1) % l->cache_cap;
                l->ncache--;
                freed++;
        }
        l->cache_evicted += freed;
        pthread_mutex_unlock(&l->cache_lock);
        return freed;
}

static const struct mb_shrinker cache_shrinker_template = {
        .count = cache_count,
        .scan = cache_scan,
};

/*
 * Put up to @max_pages more pages into the cache, up to its target.  Stops
 * early when the daemon took cache pages back meanwhile: the cache is then
 * as large as the tenant's limits let it be, and filling on would only
 * evict its own older pages.  Returns the pages added.
 */
static uint64_t cache_fill(struct load *l, uint64_t max_pages) {
        uint64_t evicted, added = 0;

        pthread_mutex_lock(&l->cache_lock);
        evicted = l->cache_evicted;
        pthread_mutex_unlock(&l->cache_lock);

        while (added < max_pages && !atomic_load(&l->stop) && !atomic_load(&l->limit_hit) &&
               !atomic_load(&l->other_error)) {
                struct page_rec rec;
                bool full;

                pthread_mutex_lock(&l->cache_lock);
                full = l->ncache >= l->cache_target || l->cache_evicted != evicted;
                pthread_mutex_unlock(&l->cache_lock);
                if (full)
                        break;
                /* Allocated without the lock: the shrinker may run now. */
                if (!load_alloc(l, &rec, l->cache_gen))
                        break;
                pthread_mutex_lock(&l->cache_lock);
                l->cache[(l->cache_head + l->ncache) % l->cache_cap] = rec;
                l->ncache++;
                pthread_mutex_unlock(&l->cache_lock);
                added++;
        }
        return added;
}

static void cache_verify(struct load *l) {
        pthread_mutex_lock(&l->cache_lock);
        for (size_t i = 0; i < l->ncache; i++) {
                const struct page_rec *r = &l->cache[(l->cache_head + i) % l->cache_cap];

                pattern_check(l, r->page, r->gen);
        }
        pthread_mutex_unlock(&l->cache_lock);
}

static void print_result(struct load *l) {
        size_t ncache;

        pthread_mutex_lock(&l->cache_lock);
        ncache = l->ncache;
        pthread_mutex_unlock(&l->cache_lock);
        printf("held=%" PRIu64 " cache=%" PRIu64 " allocs=%" PRIu64 " frees=%" PRIu64 " errors=%" PRIu64
               " verify=%s\n",
               (uint64_t) atomic_load(&l->held_pages) * l->page_size, (uint64_t) ncache * l->page_size,
               (uint64_t) atomic_load(&l->allocs), (uint64_t) atomic_load(&l->frees),
               (uint64_t) atomic_load(&l->errors), atomic_load(&l->verify_failures) ? "FAILED" : "ok");
        fflush(stdout);
}

/* ---- command line ---- */

static void usage(FILE *f) {
        fprintf(f,
                "Usage: membroker-load [OPTION...]\n"
                "Attach to a membroker tenant, hold and churn pages, verify them, report.\n"
                "\n"
                "  --socket PATH          broker socket (default $" MB_SOCKET_ENV " or " MB_DEFAULT_SOCKET_PATH ")\n"
                "  --tenant PATH|auto     tenant to attach to (default auto: by cgroup)\n"
                "  --hold SIZE            bytes of pages to allocate, write and hold (default 0)\n"
                "  --cache SIZE           bytes of reclaimable cache pages behind a shrinker (default 0)\n"
                "  --churn PAGES_PER_SEC  free and reallocate held pages at this total rate (default 0)\n"
                "  --threads N            threads sharing --hold and --churn (default 1)\n"
                "  --seconds N            run time; 0 = hold, verify and exit at once\n"
                "                         (default: until SIGTERM or SIGINT)\n"
                "  --quiet                no progress messages on stderr\n"
                "  --help                 this text\n"
                "  --version              the version\n"
                "\n"
                "SIZE takes K, M, G, T (powers of 1024).  SIGUSR1 prints the result line\n"
                "without stopping.  At exit prints:\n"
                "  held=BYTES cache=BYTES allocs=N frees=N errors=N verify=ok|FAILED\n"
                "Exit status: 0 ok, 1 an allocation failed for a limit, 2 any other error.\n");
}

static int parse_unsigned(const char *s, unsigned long long max, unsigned long long *ret) {
        char *end;
        unsigned long long v;

        if (!*s || *s == '-')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || *end || end == s)
                return -EINVAL;
        if (v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

/* Every held page is written, so what is held must fit in the machine's
 * memory and swap: refuse more at once, with the figures, rather than fail
 * later to track or write the pages. */
static int check_sizes(const struct load *l) {
        char b_want[MB_SIZE_FORMAT_MAX];
        struct sysinfo si;
        uint64_t have, want = l->hold_bytes + l->cache_bytes;

        if (want < l->hold_bytes || sysinfo(&si) < 0)
                return want < l->hold_bytes ? -ERANGE : 0;
        have = ((uint64_t) si.totalram + si.totalswap) * si.mem_unit;
        if (want <= have)
                return 0;
        fprintf(stderr, "membroker-load: --hold%s asks for %s, more than this machine's memory and swap "
                "(%.1f GiB)\n",
                l->cache_bytes ? " and --cache" : "", mb_size_format(b_want, sizeof(b_want), want),
                (double) have / (1024.0 * 1024.0 * 1024.0));
        return -E2BIG;
}

static int parse_args(int argc, char **argv, struct load *l) {
        enum {
                ARG_SOCKET = 0x100,
                ARG_TENANT,
                ARG_HOLD,
                ARG_CACHE,
                ARG_CHURN,
                ARG_THREADS,
                ARG_SECONDS,
                ARG_QUIET,
                ARG_VERSION,
        };
        static const struct option options[] = {
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "tenant", required_argument, NULL, ARG_TENANT },
                { "hold", required_argument, NULL, ARG_HOLD },
                { "cache", required_argument, NULL, ARG_CACHE },
                { "churn", required_argument, NULL, ARG_CHURN },
                { "threads", required_argument, NULL, ARG_THREADS },
                { "seconds", required_argument, NULL, ARG_SECONDS },
                { "quiet", no_argument, NULL, ARG_QUIET },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {}
        };
        unsigned long long v;
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case ARG_SOCKET:
                        l->socket_path = optarg;
                        break;
                case ARG_TENANT:
                        l->tenant = optarg;
                        break;
                case ARG_HOLD:
                case ARG_CACHE:
                        /* "64K", "1.5M", also "64KiB", "64KB", "4096B". */
                        if (mb_size_parse(optarg, 0, MB_SIZE_BYTE_UNIT,
                                          c == ARG_HOLD ? &l->hold_bytes : &l->cache_bytes) < 0) {
                                fprintf(stderr, "membroker-load: invalid size for --%s: '%s'\n",
                                        c == ARG_HOLD ? "hold" : "cache", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_CHURN:
                        if (parse_unsigned(optarg, UINT64_MAX, &v) < 0) {
                                fprintf(stderr, "membroker-load: invalid rate for --churn: '%s'\n", optarg);
                                return -EINVAL;
                        }
                        l->churn_per_sec = v;
                        break;
                case ARG_THREADS:
                        if (parse_unsigned(optarg, 1024, &v) < 0 || v == 0) {
                                fprintf(stderr, "membroker-load: --threads takes 1 to 1024: '%s'\n", optarg);
                                return -EINVAL;
                        }
                        l->nthreads = (unsigned) v;
                        break;
                case ARG_SECONDS:
                        if (parse_unsigned(optarg, LONG_MAX / 1000000000L, &v) < 0) {
                                fprintf(stderr, "membroker-load: invalid number for --seconds: '%s'\n", optarg);
                                return -EINVAL;
                        }
                        l->seconds = (long) v;
                        break;
                case ARG_QUIET:
                        l->quiet = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 1;
                case ARG_VERSION:
                        printf("membroker-load %s\n", PACKAGE_VERSION);
                        return 1;
                default:
                        usage(stderr);
                        return -EINVAL;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "membroker-load: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        return check_sizes(l);
}

/* Wait for the end (deadline or SIGTERM/SIGINT), printing on SIGUSR1 and
 * handling what the daemon sends in between. */
static void main_wait(struct load *l, const sigset_t *sigs) {
        bool has_deadline = l->seconds >= 0;
        uint64_t deadline = has_deadline ? now_nsec() + (uint64_t) l->seconds * UINT64_C(1000000000) : 0;

        for (;;) {
                struct timespec ts = { .tv_nsec = MAIN_TICK_NSEC };
                int sig, r;

                if (has_deadline) {
                        uint64_t now = now_nsec();

                        if (now >= deadline)
                                return;
                        if (deadline - now < (uint64_t) MAIN_TICK_NSEC)
                                ts.tv_nsec = (long) (deadline - now);
                }
                sig = sigtimedwait(sigs, NULL, &ts);
                if (sig == SIGTERM || sig == SIGINT)
                        return;
                if (sig == SIGUSR1)
                        print_result(l);
                /* With --churn the cache grows back at the churn rate, as
                 * an application re-reads what was evicted. */
                if (l->churn_per_sec > 0 && l->cache_target > 0)
                        (void) cache_fill(l, MB_MAX(l->churn_per_sec * MAIN_TICK_NSEC / 1000000000L, (uint64_t) 1));
                r = mb_process(l->client);
                if (r < 0 && r != -ECHILD) {
                        if (!atomic_exchange(&l->other_error, true))
                                fprintf(stderr, "membroker-load: %s\n", mb_last_error());
                        return;
                }
        }
}

int main(int argc, char **argv) {
        struct load l = {
                .tenant = NULL,
                .nthreads = 1,
                .seconds = -1,
                .cache_lock = PTHREAD_MUTEX_INITIALIZER,
                .fill_lock = PTHREAD_MUTEX_INITIALIZER,
                .fill_cond = PTHREAD_COND_INITIALIZER,
        };
        struct mb_shrinker shrinker = cache_shrinker_template;
        _cleanup_(freep) struct worker *workers = NULL;
        uint64_t hold_pages, cache_pages;
        sigset_t sigs;
        unsigned started = 0;
        int r, status;

        r = parse_args(argc, argv, &l);
        if (r != 0)
                return r > 0 ? 0 : EXIT_ERROR;

        /* Signals are taken by sigtimedwait() in the main thread only. */
        sigemptyset(&sigs);
        sigaddset(&sigs, SIGTERM);
        sigaddset(&sigs, SIGINT);
        sigaddset(&sigs, SIGUSR1);
        pthread_sigmask(SIG_BLOCK, &sigs, NULL);

        r = mb_connect(l.socket_path, l.tenant, &l.client);
        if (r < 0) {
                fprintf(stderr, "membroker-load: cannot attach to tenant %s: %s\n", l.tenant ? l.tenant : "auto",
                        mb_last_error());
                return EXIT_ERROR;
        }
        l.page_size = mb_page_size(l.client);
        l.seed = splitmix64(mb_client_id(l.client) ^ ((uint64_t) getpid() << 32));
        hold_pages = DIV_ROUND_UP(l.hold_bytes, l.page_size);
        cache_pages = DIV_ROUND_UP(l.cache_bytes, l.page_size);

        shrinker.userdata = &l;
        l.cache_cap = cache_pages ? cache_pages : 1;
        l.cache_target = cache_pages;
        l.cache = calloc(l.cache_cap, sizeof(*l.cache));
        workers = calloc(l.nthreads, sizeof(*workers));
        if (!l.cache || !workers) {
                fprintf(stderr, "membroker-load: out of memory\n");
                mb_close(l.client);
                return EXIT_ERROR;
        }
        if (cache_pages > 0 && mb_register_shrinker(l.client, &shrinker) < 0) {
                fprintf(stderr, "membroker-load: cannot register the cache shrinker: %s\n", mb_last_error());
                mb_close(l.client);
                return EXIT_ERROR;
        }

        for (unsigned i = 0; i < l.nthreads; i++) {
                struct worker *w = &workers[i];

                w->load = &l;
                w->id = i;
                w->want = hold_pages / l.nthreads + (i < hold_pages % l.nthreads ? 1 : 0);
                w->rate = (double) l.churn_per_sec / l.nthreads;
                w->rng = splitmix64(l.seed + i);
                w->pages = calloc(w->want ? w->want : 1, sizeof(*w->pages));
                if (!w->pages) {
                        fprintf(stderr, "membroker-load: cannot allocate the table of %" PRIu64 " pages of "
                                "thread %u (--hold %" PRIu64 " bytes): out of memory\n",
                                (uint64_t) w->want, i, l.hold_bytes);
                        atomic_store(&l.other_error, true);
                        atomic_store(&l.stop, true);
                        break;
                }
                if ((r = pthread_create(&w->thread, NULL, worker_run, w)) != 0) {
                        fprintf(stderr, "membroker-load: cannot start thread %u: %s\n", i, strerror(r));
                        atomic_store(&l.other_error, true);
                        atomic_store(&l.stop, true);
                        free(w->pages);
                        w->pages = NULL;
                        break;
                }
                started++;
        }
        /* The threads hold their share; then the cache fills up. */
        pthread_mutex_lock(&l.fill_lock);
        while (l.nfilled < started)
                pthread_cond_wait(&l.fill_cond, &l.fill_lock);
        pthread_mutex_unlock(&l.fill_lock);
        if (started == l.nthreads) {
                (void) cache_fill(&l, cache_pages);
                if (!l.quiet)
                        fprintf(stderr,
                                "membroker-load: tenant %s, client %" PRIu64 ": holding %" PRIu64
                                " pages, cache %zu pages (page size %zu, batch %u)\n",
                                mb_tenant_path(l.client), mb_client_id(l.client),
                                (uint64_t) atomic_load(&l.held_pages), l.ncache, l.page_size,
                                mb_charge_batch(l.client));
                main_wait(&l, &sigs);
        }
        atomic_store(&l.stop, true);
        for (unsigned i = 0; i < started; i++)
                pthread_join(workers[i].thread, NULL);
        cache_verify(&l);

        print_result(&l);

        if (atomic_load(&l.verify_failures) > 0 || atomic_load(&l.other_error))
                status = EXIT_ERROR;
        else if (atomic_load(&l.limit_hit))
                status = EXIT_LIMIT;
        else
                status = EXIT_SUCCESS;

        if (cache_pages > 0)
                mb_unregister_shrinker(l.client, &shrinker);
        mb_close(l.client);
        for (unsigned i = 0; i < l.nthreads; i++)
                free(workers[i].pages);
        free(l.cache);
        return status;
}
