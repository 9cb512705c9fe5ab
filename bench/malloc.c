/* SPDX-License-Identifier: MIT */
/*
 * malloc.c - one sample of malloc(SIZE)+free for the hot-path table,
 * linked against another allocator (bench-malloc-jemalloc links
 * -ljemalloc, bench-malloc-tcmalloc -ltcmalloc_minimal; both replace
 * malloc() for the whole process, which is why they are separate programs).
 *
 *   bench-malloc-X --mode one|64 --threads N --iters K [--size BYTES]
 *
 * prints ns per malloc+free pair per thread.  "one": malloc then free, one
 * at a time; "64": 64 mallocs, then the 64 frees.  Memory is not touched
 * (neither does the page stock touch the pages it hands out).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

struct ctx {
        bool batch64;
        size_t size;
};

static void loop(void *arg, unsigned tid, uint64_t iters) {
        struct ctx *c = arg;
        void *p[64];

        if (!c->batch64) {
                for (uint64_t i = 0; i < iters; i++) {
                        void *q = malloc(c->size);
                        bench_clobber(q);
                        free(q);
                }
                return;
        }
        for (uint64_t i = 0; i < iters; i += 64) {
                for (unsigned j = 0; j < 64; j++) {
                        p[j] = malloc(c->size);
                        bench_clobber(p[j]);
                }
                for (unsigned j = 0; j < 64; j++)
                        free(p[j]);
        }
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "mode", required_argument, NULL, 'm' },
                { "threads", required_argument, NULL, 't' },
                { "iters", required_argument, NULL, 'i' },
                { "size", required_argument, NULL, 's' },
                {}
        };
        struct ctx c = { .size = 4096 };
        unsigned threads = 1;
        uint64_t iters = 1 << 16;
        double ns;
        int o;

        while ((o = getopt_long(argc, argv, "", opts, NULL)) >= 0)
                switch (o) {
                case 'm':
                        c.batch64 = strcmp(optarg, "64") == 0;
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
                default:
                        return 2;
                }
        if (c.batch64)
                iters = (iters + 63) / 64 * 64;
        if (iters == 0 || threads < 1)
                return 2;
        loop(&c, 0, iters / 8 + 64); /* warm up this process's heap */
        ns = bench_threads(threads, loop, &c, iters, true);
        printf("%.4f\n", ns / (double) iters);
        return 0;
}
