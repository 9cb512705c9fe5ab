/* SPDX-License-Identifier: MIT */
/*
 * malloc.c - one sample of malloc()+free() for tables 1 and 9, run in a
 * child process with another allocator preloaded (LD_PRELOAD): the
 * allocator replaces malloc() for the whole process, which is why it gets
 * a process of its own.  Linked against nothing but libc and the harness.
 *
 *   bench-malloc --mode one|64|mixed --threads N --iters K [--size BYTES]
 *                [--expect SYMBOL]
 *
 * prints CPU ns per malloc+free pair (per replacement for "mixed") per
 * thread.  "one": malloc then free, one at a time; "64": 64 mallocs, then
 * the 64 frees (memory not touched, as the page stock does not touch the
 * pages it hands out); "mixed": table 9b's pattern, each thread keeping
 * 4,096 live objects of 16..512 bytes and replacing a random one per
 * operation (free, allocate a random size, write its first byte); the live
 * set is made and warmed before the timed replacements.  With --expect,
 * exits 3 unless SYMBOL resolves: the preload did not take effect.
 */
#include <dlfcn.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MIXED_SIZES 6
#define MIXED_LIVE 4096
#define MAX_THREADS 64

static const size_t mixed_sizes[MIXED_SIZES] = { 16, 32, 64, 128, 256, 512 };

enum mode { MODE_ONE, MODE_64, MODE_MIXED };

struct ctx {
        enum mode mode;
        size_t size;
        bool warm;
};

static inline uint64_t xorshift(uint64_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

/* The live sets of "mixed", one per thread, kept from the warm-up run to
 * the timed one. */
static void *live[MAX_THREADS][MIXED_LIVE];

static void mixed(struct ctx *c, unsigned tid, uint64_t iters) {
        void **obj = live[tid];
        uint64_t rng = 0x1234567ULL + tid * 0x9e3779b97f4a7c15ULL + iters;

        if (!c->warm)
                for (unsigned i = 0; i < MIXED_LIVE; i++)
                        obj[i] = malloc(mixed_sizes[xorshift(&rng) % MIXED_SIZES]);
        for (uint64_t n = 0; n < iters; n++) {
                uint64_t r = xorshift(&rng);
                unsigned i = (unsigned) (r % MIXED_LIVE);

                free(obj[i]);
                obj[i] = malloc(mixed_sizes[(r >> 32) % MIXED_SIZES]);
                *(volatile char *) obj[i] = 1;
        }
}

static void loop(void *arg, unsigned tid, uint64_t iters) {
        struct ctx *c = arg;
        void *p[64];

        switch (c->mode) {
        case MODE_ONE:
                for (uint64_t i = 0; i < iters; i++) {
                        void *q = malloc(c->size);
                        bench_clobber(q);
                        free(q);
                }
                break;
        case MODE_64:
                for (uint64_t i = 0; i < iters; i += 64) {
                        for (unsigned j = 0; j < 64; j++) {
                                p[j] = malloc(c->size);
                                bench_clobber(p[j]);
                        }
                        for (unsigned j = 0; j < 64; j++)
                                free(p[j]);
                }
                break;
        case MODE_MIXED:
                mixed(c, tid, iters);
                break;
        }
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "mode", required_argument, NULL, 'm' },
                { "threads", required_argument, NULL, 't' },
                { "iters", required_argument, NULL, 'i' },
                { "size", required_argument, NULL, 's' },
                { "expect", required_argument, NULL, 'e' },
                {}
        };
        struct ctx c = { .size = 4096 };
        const char *expect = NULL;
        unsigned threads = 1;
        uint64_t iters = 1 << 16;
        double ns;
        int o;

        while ((o = getopt_long(argc, argv, "", opts, NULL)) >= 0)
                switch (o) {
                case 'm':
                        c.mode = strcmp(optarg, "64") == 0 ? MODE_64 : strcmp(optarg, "mixed") == 0 ? MODE_MIXED : MODE_ONE;
                        break;
                case 't':
                        threads = (unsigned) atoi(optarg);
                        break;
                case 'i':
                        iters = strtoull(optarg, NULL, 10);
                        break;
                case 's':
                        c.size = strtoull(optarg, NULL, 10);
                        break;
                case 'e':
                        expect = optarg;
                        break;
                default:
                        return 2;
                }
        if (expect && !dlsym(RTLD_DEFAULT, expect)) {
                fprintf(stderr, "bench-malloc: %s does not resolve: the preload did not take effect\n", expect);
                return 3;
        }
        iters = (iters + 63) / 64 * 64;
        if (iters == 0 || threads < 1 || threads > MAX_THREADS)
                return 2;
        /* Warm up this process's heap (and make the live sets). */
        (void) bench_threads(threads, loop, &c, iters / 8 + 64, true);
        c.warm = true;
        ns = bench_threads(threads, loop, &c, iters, true);
        printf("%.4f\n", ns / (double) iters);
        return 0;
}
