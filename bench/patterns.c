/* SPDX-License-Identifier: MIT */
/*
 * patterns.c - the allocation patterns allocators are judged by, as one
 * plain program that uses nothing but malloc()/free()/realloc() (it links
 * only libc): table 18 runs it plainly (glibc), with each peer allocator
 * preloaded and under membroker-run, the same way as table 17's programs.
 *
 *   bench-patterns PATTERN [SCALE]
 *
 *   large     blocks of 5-25 MiB, up to 20 live, each one written once per
 *             page (a program uses what it asks for)
 *   xthread   one thread allocates small blocks, another frees them
 *             (producer/consumer, handed over in batches)
 *   larson    a server's churn: threads replace random blocks of 8-1000
 *             bytes in their own slots, and each generation of threads
 *             inherits (and frees) what the one before allocated
 *   simple    one thread: batches of small blocks allocated, then freed
 *   thread    as simple, in one thread per CPU at once
 *
 * SCALE (default 1) multiplies the work.  Each pattern prints a checksum of
 * what it read back, the same under every allocator, so that a faster run
 * cannot be a wrong one.  The patterns are written here after the
 * descriptions of the well-known benchmarks (mimalloc-bench's malloc-large,
 * xmalloc-test, larson, glibc's bench-malloc-simple and -thread); they are
 * not those programs.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned scale = 1;

/* xorshift64*: the same sequence under every allocator */
static uint64_t rnd(uint64_t *s) {
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        return *s * 2685821657736338717ull;
}

static void *xmalloc(size_t n) {
        void *p = malloc(n);

        if (!p) {
                fprintf(stderr, "bench-patterns: malloc(%zu) failed\n", n);
                exit(1);
        }
        return p;
}

/* ---- large ---- */

static int pattern_large(void) {
        enum { SLOTS = 20 };
        unsigned char *slot[SLOTS] = { 0 };
        size_t len[SLOTS] = { 0 };
        uint64_t s = 42, sum = 0;
        unsigned rounds = 400 * scale;

        for (unsigned r = 0; r < rounds; r++) {
                unsigned i = (unsigned) (rnd(&s) % SLOTS);
                size_t n = ((5u << 20) + rnd(&s) % (20u << 20)) & ~(size_t) 7;

                if (slot[i]) {
                        sum += slot[i][0] + slot[i][len[i] - 1];
                        free(slot[i]);
                }
                slot[i] = xmalloc(n);
                len[i] = n;
                for (size_t off = 0; off < n; off += 4096)
                        slot[i][off] = (unsigned char) (r + off / 4096);
                slot[i][n - 1] = (unsigned char) r;
        }
        for (unsigned i = 0; i < SLOTS; i++)
                free(slot[i]);
        printf("large %u rounds sum %llu\n", rounds, (unsigned long long) sum);
        return 0;
}

/* ---- xthread ---- */

#define XBATCH 512
struct xqueue {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        void **batch[64]; /* a ring of full batches */
        unsigned head, tail;
        bool done;
};

static void *xconsumer(void *arg) {
        struct xqueue *q = arg;
        uint64_t *sum = xmalloc(sizeof(*sum));

        *sum = 0;
        for (;;) {
                void **b;

                pthread_mutex_lock(&q->lock);
                while (q->head == q->tail && !q->done)
                        pthread_cond_wait(&q->cond, &q->lock);
                if (q->head == q->tail) {
                        pthread_mutex_unlock(&q->lock);
                        break;
                }
                b = q->batch[q->head++ % 64];
                pthread_cond_broadcast(&q->cond);
                pthread_mutex_unlock(&q->lock);
                for (unsigned i = 0; i < XBATCH; i++) {
                        *sum += *(unsigned char *) b[i];
                        free(b[i]);
                }
                free(b);
        }
        return sum;
}

static int pattern_xthread(void) {
        struct xqueue q = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
        unsigned nbatches = 8000 * scale;
        uint64_t s = 7, *sum;
        pthread_t t;

        if (pthread_create(&t, NULL, xconsumer, &q) != 0)
                return 1;
        for (unsigned k = 0; k < nbatches; k++) {
                void **b = xmalloc(XBATCH * sizeof(*b));

                for (unsigned i = 0; i < XBATCH; i++) {
                        size_t n = 16 + rnd(&s) % 1009;
                        unsigned char *p = xmalloc(n);

                        p[0] = (unsigned char) (i + k);
                        p[n - 1] = 1;
                        b[i] = p;
                }
                pthread_mutex_lock(&q.lock);
                while (q.tail - q.head == 64)
                        pthread_cond_wait(&q.cond, &q.lock);
                q.batch[q.tail++ % 64] = b;
                pthread_cond_broadcast(&q.cond);
                pthread_mutex_unlock(&q.lock);
        }
        pthread_mutex_lock(&q.lock);
        q.done = true;
        pthread_cond_broadcast(&q.cond);
        pthread_mutex_unlock(&q.lock);
        pthread_join(t, (void **) &sum);
        printf("xthread %u blocks sum %llu\n", nbatches * XBATCH, (unsigned long long) *sum);
        free(sum);
        return 0;
}

/* ---- larson ---- */

#define LSLOTS 1000
struct larson {
        void *slot[LSLOTS];
        uint64_t seed, sum;
};

static void *larson_run(void *arg) {
        struct larson *l = arg;
        unsigned rounds = 200000;

        for (unsigned r = 0; r < rounds; r++) {
                unsigned i = (unsigned) (rnd(&l->seed) % LSLOTS);
                size_t n = 8 + rnd(&l->seed) % 993;
                unsigned char *p;

                if (l->slot[i]) {
                        l->sum += *(unsigned char *) l->slot[i];
                        free(l->slot[i]);
                }
                p = xmalloc(n);
                p[0] = (unsigned char) r;
                l->slot[i] = p;
        }
        return NULL;
}

static int pattern_larson(void) {
        enum { NTHREADS = 4 };
        static struct larson l[NTHREADS];
        unsigned gens = 10 * scale;
        uint64_t sum = 0;

        for (unsigned k = 0; k < NTHREADS; k++)
                l[k].seed = 1000 + k;
        /* each generation's threads inherit the slots of the one before
         * and free what those threads allocated */
        for (unsigned g = 0; g < gens; g++) {
                pthread_t t[NTHREADS];

                for (unsigned k = 0; k < NTHREADS; k++)
                        if (pthread_create(&t[k], NULL, larson_run, &l[k]) != 0)
                                return 1;
                for (unsigned k = 0; k < NTHREADS; k++)
                        pthread_join(t[k], NULL);
        }
        for (unsigned k = 0; k < NTHREADS; k++) {
                for (unsigned i = 0; i < LSLOTS; i++)
                        free(l[k].slot[i]);
                sum += l[k].sum;
        }
        printf("larson %u generations sum %llu\n", gens, (unsigned long long) sum);
        return 0;
}

/* ---- simple, thread ---- */

static uint64_t simple_run(uint64_t seed, unsigned rounds) {
        enum { N = 1000 };
        unsigned char *p[N];
        uint64_t sum = 0;

        for (unsigned r = 0; r < rounds; r++) {
                for (unsigned i = 0; i < N; i++) {
                        size_t n = 16 + rnd(&seed) % 497;

                        p[i] = xmalloc(n);
                        p[i][0] = (unsigned char) i;
                }
                for (unsigned i = 0; i < N; i++) {
                        sum += p[i][0];
                        free(p[i]);
                }
        }
        return sum;
}

static int pattern_simple(void) {
        unsigned rounds = 20000 * scale;

        printf("simple %u rounds sum %llu\n", rounds, (unsigned long long) simple_run(3, rounds));
        return 0;
}

struct thread_arg {
        uint64_t seed, sum;
        unsigned rounds;
};

static void *thread_run(void *arg) {
        struct thread_arg *a = arg;

        a->sum = simple_run(a->seed, a->rounds);
        return NULL;
}

static int pattern_thread(void) {
        long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned n = ncpus > 0 && ncpus < 64 ? (unsigned) ncpus : 2;
        struct thread_arg a[64];
        pthread_t t[64];
        uint64_t sum = 0;

        for (unsigned k = 0; k < n; k++) {
                a[k] = (struct thread_arg) { .seed = 11 + k, .rounds = 20000 * scale / n };
                if (pthread_create(&t[k], NULL, thread_run, &a[k]) != 0)
                        return 1;
        }
        for (unsigned k = 0; k < n; k++) {
                pthread_join(t[k], NULL);
                sum += a[k].sum;
        }
        printf("thread %u threads sum %llu\n", n, (unsigned long long) sum);
        return 0;
}

int main(int argc, char **argv) {
        static const struct {
                const char *name;
                int (*run)(void);
        } patterns[] = {
                { "large", pattern_large },   { "xthread", pattern_xthread }, { "larson", pattern_larson },
                { "simple", pattern_simple }, { "thread", pattern_thread },
        };

        if (argc >= 3)
                scale = (unsigned) strtoul(argv[2], NULL, 10);
        if (argc < 2 || scale == 0) {
                fprintf(stderr, "usage: bench-patterns large|xthread|larson|simple|thread [SCALE]\n");
                return 2;
        }
        for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++)
                if (strcmp(argv[1], patterns[i].name) == 0)
                        return patterns[i].run();
        fprintf(stderr, "bench-patterns: unknown pattern %s\n", argv[1]);
        return 2;
}
