/* SPDX-License-Identifier: MIT */
/*
 * tcache-client.c - a plain libc program for the shim's per-thread caches
 * (tests/test-preload-tcache.sh): it links nothing of membroker and runs
 * under membroker-run.  Commands on stdin, one answer line each:
 *
 *   threads N BLOCKS SIZE   N threads, one after the other, each allocating
 *                           BLOCKS blocks of SIZE bytes (writing each),
 *                           checking them and freeing them all, then
 *                           exiting; "ok SUM"
 *   fill BLOCKS SIZE        the same in this thread (whose cache keeps them)
 *   until SIZE              blocks of SIZE until malloc() fails; "ok BYTES"
 *                           (freed again before answering)
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct job {
        unsigned blocks;
        size_t size;
        uint64_t sum;
        int err;
};

static void *run(void *arg) {
        struct job *j = arg;
        unsigned char **p = calloc(j->blocks, sizeof(*p));

        if (!p) {
                j->err = ENOMEM;
                return NULL;
        }
        for (unsigned i = 0; i < j->blocks; i++) {
                p[i] = malloc(j->size);
                if (!p[i]) {
                        j->err = errno;
                        break;
                }
                memset(p[i], (int) (i & 0xff), j->size);
        }
        for (unsigned i = 0; i < j->blocks && p[i]; i++) {
                j->sum += p[i][0] + p[i][j->size - 1];
                free(p[i]);
        }
        free(p);
        return NULL;
}

int main(void) {
        char line[256];

        setvbuf(stdout, NULL, _IOLBF, 0);
        while (fgets(line, sizeof(line), stdin)) {
                unsigned n, blocks;
                size_t size;

                if (sscanf(line, "threads %u %u %zu", &n, &blocks, &size) == 3 && size > 0) {
                        uint64_t sum = 0;
                        int err = 0;

                        for (unsigned k = 0; k < n; k++) {
                                struct job j = { .blocks = blocks, .size = size };
                                pthread_t t;

                                if (pthread_create(&t, NULL, run, &j) != 0 || pthread_join(t, NULL) != 0) {
                                        err = EAGAIN;
                                        break;
                                }
                                sum += j.sum;
                                if (j.err)
                                        err = j.err;
                        }
                        if (err)
                                printf("error %s\n", strerror(err));
                        else
                                printf("ok %llu\n", (unsigned long long) sum);
                } else if (sscanf(line, "fill %u %zu", &blocks, &size) == 2 && size > 0) {
                        struct job j = { .blocks = blocks, .size = size };

                        run(&j);
                        if (j.err)
                                printf("error %s\n", strerror(j.err));
                        else
                                printf("ok %llu\n", (unsigned long long) j.sum);
                } else if (sscanf(line, "until %zu", &size) == 1 && size > 0) {
                        void **v = NULL, *p;
                        size_t nv = 0, cap = 0;

                        while ((p = malloc(size))) {
                                if (nv == cap) {
                                        void **w = realloc(v, (cap = cap ? 2 * cap : 1024) * sizeof(*v));

                                        if (!w) {
                                                free(p);
                                                break;
                                        }
                                        v = w;
                                }
                                memset(p, 1, size);
                                v[nv++] = p;
                        }
                        printf("ok %zu\n", nv * size);
                        while (nv > 0)
                                free(v[--nv]);
                        free(v);
                } else
                        printf("error unknown command\n");
        }
        return 0;
}
