/* SPDX-License-Identifier: MIT */
/*
 * malloc-client.c - mb_malloc() and friends against the real daemon
 * ($MEMBROKER_SOCKET), for tests/test-client-malloc.sh:
 *
 *   malloc-client sizes TENANT
 *        every size from 1 byte to 1 MiB (each class edge and its
 *        neighbours): allocate, check the alignment and usable size, fill,
 *        check the fill of every block, free; calloc() zero after a dirty
 *        free; realloc() growing and shrinking keeps the contents;
 *        aligned_alloc() up to the page; foreign pointers are refused.
 *   malloc-client threads TENANT THREADS ROUNDS
 *        THREADS threads allocate random sizes (8 B .. 64 KiB), fill, hand
 *        half of them to the next thread to free (remote frees), check
 *        every block before freeing it.
 *   malloc-client hold TENANT BYTES
 *        mb_malloc(BYTES), write it, print "held", wait for a line on stdin,
 *        mb_free() it, print "freed", wait for another line, exit.
 *   malloc-client limit TENANT BYTES
 *        mb_malloc(BYTES) must fail with ENOMEM; prints the reason.
 *   malloc-client keep TENANT COUNT BYTES
 *        mb_malloc() COUNT blocks of BYTES, free them all (the library
 *        keeps the runs for reuse, still charged), print "kept", wait for a
 *        line on stdin, exit.
 *   malloc-client classes TENANT
 *        allocate one object of each class and print the class table.
 *   malloc-client large TENANT
 *        blocks of 600 KiB .. 4 MiB, up to 8 live, replaced at random
 *        (each filled, and checked before it is freed: a kept run handed
 *        out twice, or cut wrong, shows as a broken fill); then two
 *        neighbouring runs freed are one run for a request of both sizes,
 *        and freeing a kept run, or the head of a run merged into another,
 *        is refused.  Prints the peak of live bytes and "held", waits for a
 *        line on stdin (the test reads the tenant's usage), exits.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "membroker.h"

static mb_client *c;

#define CHECK(cond, ...)                                                   \
        do {                                                               \
                if (!(cond)) {                                             \
                        fprintf(stderr, "malloc-client: FAIL %s:%d: ", __FILE__, __LINE__); \
                        fprintf(stderr, __VA_ARGS__);                      \
                        fprintf(stderr, " (%s)\n", mb_last_error());       \
                        exit(1);                                           \
                }                                                          \
        } while (0)

static void fill(void *p, size_t n, unsigned seed) {
        unsigned char *b = p;

        for (size_t i = 0; i < n; i++)
                b[i] = (unsigned char) (seed + i * 31);
}

static int check_fill(const void *p, size_t n, unsigned seed) {
        const unsigned char *b = p;

        for (size_t i = 0; i < n; i++)
                if (b[i] != (unsigned char) (seed + i * 31))
                        return 0;
        return 1;
}

static size_t expected_align(size_t size) {
        size_t ps = mb_page_size(c);

        /* Objects of 3/4, 9/8, 5/4 and 3/2 of a page straddle pages on
         * multi-page slabs: aligned to an eighth of a page. */
        if ((size > ps / 2 && size <= ps / 4 * 3) || (size > ps && size <= ps / 2 * 3))
                return ps / 8;
        if (size > ps / 2)
                return ps;
        if (size <= 8)
                return 8;
        return 16;
}

static int cmd_sizes(void) {
        static void *blocks[4096];
        static size_t sizes[4096];
        size_t ps = mb_page_size(c), n = 0;
        unsigned char *p;
        int x;

        for (size_t s = 1; s <= (1u << 20); s = s < 64 ? s + 1 : s + s / 7) {
                sizes[n++] = s;
                if (s > 2) {
                        sizes[n++] = s - 1;
                }
        }
        for (size_t e = 8; e <= 4 * ps; e *= 2)
                for (int d = -1; d <= 1; d++)
                        sizes[n++] = e + (size_t) d;
        sizes[n++] = 96;
        sizes[n++] = 97;
        sizes[n++] = 192;
        sizes[n++] = 193;
        for (size_t i = 0; i < n; i++) {
                blocks[i] = mb_malloc(c, sizes[i]);
                CHECK(blocks[i], "mb_malloc(%zu)", sizes[i]);
                CHECK(((uintptr_t) blocks[i] & (expected_align(sizes[i]) - 1)) == 0, "mb_malloc(%zu) = %p misaligned",
                      sizes[i], blocks[i]);
                CHECK(mb_malloc_usable_size(c, blocks[i]) >= sizes[i], "usable size %zu < %zu",
                      mb_malloc_usable_size(c, blocks[i]), sizes[i]);
                CHECK(mb_page_to_handle(c, (void *) ((uintptr_t) blocks[i] & ~(uintptr_t) (ps - 1))) !=
                              MB_HANDLE_INVALID,
                      "%p outside the arena", blocks[i]);
                fill(blocks[i], sizes[i], (unsigned) i);
        }
        for (size_t i = 0; i < n; i++) {
                CHECK(check_fill(blocks[i], sizes[i], (unsigned) i), "block %zu of %zu bytes overwritten", i,
                      sizes[i]);
                mb_free(c, blocks[i]);
        }
        printf("sizes: %zu blocks from 1 B to 1 MiB ok\n", n);

        /* calloc after dirty frees of the same classes. */
        for (size_t s = 8; s <= 64 * ps; s *= 2) {
                p = mb_malloc(c, s);
                CHECK(p, "mb_malloc(%zu)", s);
                memset(p, 0xee, s);
                mb_free(c, p);
                p = mb_calloc(c, 1, s);
                CHECK(p, "mb_calloc(%zu)", s);
                for (size_t i = 0; i < s; i++)
                        CHECK(p[i] == 0, "mb_calloc(%zu) byte %zu = %#x", s, i, p[i]);
                mb_free(c, p);
        }
        errno = 0;
        CHECK(!mb_calloc(c, SIZE_MAX / 2, 3) && errno == ENOMEM, "calloc overflow not refused");
        printf("calloc: zeroed after dirty frees, overflow refused\n");

        /* realloc up and down keeps the contents. */
        p = mb_malloc(c, 5);
        CHECK(p, "mb_malloc(5)");
        fill(p, 5, 7);
        for (size_t s = 5, prev = 5; s <= 512 * 1024; prev = s, s = s * 3 + 1) {
                p = mb_realloc(c, p, s);
                CHECK(p, "mb_realloc(%zu)", s);
                CHECK(check_fill(p, prev, 7), "mb_realloc to %zu lost the contents", s);
                fill(p, s, 7);
        }
        p = mb_realloc(c, p, 512 * 1024);
        CHECK(p, "mb_realloc(512 KiB)");
        fill(p, 512 * 1024, 7);
        for (size_t s = 512 * 1024; s >= 3; s /= 3) {
                p = mb_realloc(c, p, s);
                CHECK(p, "mb_realloc(%zu)", s);
                CHECK(check_fill(p, s, 7), "mb_realloc down to %zu lost the contents", s);
        }
        CHECK(mb_realloc(c, p, 0) == NULL, "mb_realloc(p, 0) returned memory");
        printf("realloc: contents kept growing to 512 KiB and shrinking\n");

        for (size_t a = 1; a <= ps; a *= 2)
                for (size_t s = 1; s <= 3 * ps; s = s * 5 + 3) {
                        p = mb_aligned_alloc(c, a, s);
                        CHECK(p, "mb_aligned_alloc(%zu, %zu)", a, s);
                        CHECK(((uintptr_t) p & (a - 1)) == 0, "mb_aligned_alloc(%zu, %zu) = %p", a, s, (void *) p);
                        CHECK(mb_malloc_usable_size(c, p) >= s, "aligned usable size");
                        memset(p, 1, s);
                        mb_free(c, p);
                }
        errno = 0;
        CHECK(!mb_aligned_alloc(c, 3, 8) && errno == EINVAL, "alignment 3 accepted");
        errno = 0;
        CHECK(!mb_aligned_alloc(c, 2 * ps, 8) && errno == EINVAL, "alignment above a page accepted");
        printf("aligned_alloc: every power of two up to the page\n");

        /* Not ours: ignored, usable size 0, realloc refused. */
        mb_free(c, &x);
        CHECK(strstr(mb_last_error(), "not allocated by mb_malloc"), "foreign free not reported");
        CHECK(mb_malloc_usable_size(c, &x) == 0, "usable size of a foreign pointer");
        errno = 0;
        CHECK(!mb_realloc(c, &x, 10) && errno == EINVAL, "realloc of a foreign pointer");
        CHECK(mb_page_free_contig(c, &x, 1) == -EINVAL, "mb_page_free_contig of a foreign pointer");
        errno = 0;
        CHECK(!mb_page_alloc_contig(c, 0, 0) && errno == EINVAL, "a run of 0 pages");
        printf("foreign pointers refused\n");
        return 0;
}

struct thr {
        unsigned id, rounds;
        void **handoff;       /* blocks for the next thread to free */
        size_t *handoff_size;
        pthread_mutex_t *lock;
};

static unsigned nthreads;
static struct thr *thr;

static void *thread_run(void *arg) {
        struct thr *t = arg;
        unsigned seed = t->id * 7919u + 1;
        enum { N = 64 };

        for (unsigned r = 0; r < t->rounds; r++) {
                void *b[N];
                size_t s[N];
                struct thr *next = &thr[(t->id + 1) % nthreads];

                for (unsigned i = 0; i < N; i++) {
                        seed = seed * 1103515245u + 12345u;
                        s[i] = (seed >> 8) % 100 < 90 ? 8 + (seed >> 4) % 1024 : 4096 + (seed >> 4) % 61440;
                        b[i] = mb_malloc(c, s[i]);
                        CHECK(b[i], "thread %u: mb_malloc(%zu)", t->id, s[i]);
                        fill(b[i], s[i], (unsigned) s[i]);
                }
                for (unsigned i = 0; i < N; i++) {
                        CHECK(check_fill(b[i], s[i], (unsigned) s[i]), "thread %u: block of %zu overwritten", t->id,
                              s[i]);
                        if (i % 2) {
                                mb_free(c, b[i]);
                                continue;
                        }
                        /* To the next thread, which frees it (remote free). */
                        pthread_mutex_lock(next->lock);
                        if (next->handoff[i / 2]) {
                                CHECK(check_fill(next->handoff[i / 2], next->handoff_size[i / 2],
                                                 (unsigned) next->handoff_size[i / 2]),
                                      "handed-off block overwritten");
                                mb_free(c, next->handoff[i / 2]);
                        }
                        next->handoff[i / 2] = b[i];
                        next->handoff_size[i / 2] = s[i];
                        pthread_mutex_unlock(next->lock);
                }
        }
        return NULL;
}

static int cmd_threads(unsigned n, unsigned rounds) {
        pthread_t *tid = calloc(n, sizeof(*tid));

        nthreads = n;
        thr = calloc(n, sizeof(*thr));
        for (unsigned i = 0; i < n; i++) {
                thr[i] = (struct thr) { .id = i, .rounds = rounds, .handoff = calloc(32, sizeof(void *)),
                                        .handoff_size = calloc(32, sizeof(size_t)), .lock = malloc(sizeof(pthread_mutex_t)) };
                pthread_mutex_init(thr[i].lock, NULL);
        }
        for (unsigned i = 0; i < n; i++)
                CHECK(pthread_create(&tid[i], NULL, thread_run, &thr[i]) == 0, "pthread_create");
        for (unsigned i = 0; i < n; i++)
                pthread_join(tid[i], NULL);
        for (unsigned i = 0; i < n; i++)
                for (unsigned k = 0; k < 32; k++)
                        if (thr[i].handoff[k])
                                mb_free(c, thr[i].handoff[k]);
        for (unsigned i = 0; i < n; i++) {
                pthread_mutex_destroy(thr[i].lock);
                free(thr[i].lock);
                free(thr[i].handoff);
                free(thr[i].handoff_size);
        }
        free(thr);
        free(tid);
        printf("threads: %u threads x %u rounds ok\n", n, rounds);
        return 0;
}

static int cmd_hold(size_t bytes) {
        char line[64];
        void *p = mb_malloc(c, bytes);

        CHECK(p, "mb_malloc(%zu)", bytes);
        memset(p, 0x5a, bytes);
        printf("held %zu\n", mb_malloc_usable_size(c, p));
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
                return 1;
        mb_free(c, p);
        printf("freed\n");
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
                return 1;
        return 0;
}

static int cmd_keep(unsigned count, size_t bytes) {
        char line[64];
        void **v = calloc(count, sizeof(void *));

        CHECK(v, "calloc");
        for (unsigned i = 0; i < count; i++) {
                v[i] = mb_malloc(c, bytes);
                CHECK(v[i], "mb_malloc(%zu)", bytes);
                memset(v[i], 1, bytes);
        }
        for (unsigned i = 0; i < count; i++)
                mb_free(c, v[i]);
        free(v);
        printf("kept\n");
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
                return 1;
        return 0;
}

static int cmd_limit(size_t bytes) {
        void *p;

        errno = 0;
        p = mb_malloc(c, bytes);
        CHECK(!p && errno == ENOMEM, "mb_malloc(%zu) past the limit: %p errno %d", bytes, p, errno);
        printf("refused: ENOMEM: %s\n", mb_last_error());
        /* The session goes on: a small allocation still works. */
        p = mb_malloc(c, 100);
        CHECK(p, "mb_malloc(100) after the refusal");
        mb_free(c, p);
        return 0;
}

/* Blocks between half a page and two pages sit on multi-page slabs whose
 * objects straddle page boundaries: 4500 bytes take 4608 (9/8 of a page),
 * consecutive blocks of a slab 4608 bytes apart, not 2-page runs. */
static int cmd_mid(void) {
        size_t ps = mb_page_size(c), obj = ps / 8 * 9, want = obj - 108;
        enum { N = 64 };
        unsigned char *v[N];
        unsigned adjacent = 0;
        char name[64];

        for (unsigned i = 0; i < N; i++) {
                v[i] = mb_malloc(c, want);
                CHECK(v[i], "mb_malloc(%zu)", want);
                CHECK(mb_malloc_usable_size(c, v[i]) == obj, "usable size of %zu bytes: %zu, not %zu", want,
                      mb_malloc_usable_size(c, v[i]), obj);
                CHECK(((uintptr_t) v[i] & (ps / 8 - 1)) == 0, "%p not aligned to %zu", (void *) v[i], ps / 8);
                memset(v[i], (int) i, want);
                if (i > 0 && (size_t) (v[i] - v[i - 1]) == obj)
                        adjacent++;
        }
        /* 8 to a slab: 7 of every 8 follow the one before. */
        CHECK(adjacent >= N / 8 * 7 - 1, "only %u of %d blocks right after the one before", adjacent, N);
        for (unsigned i = 0; i < N; i++)
                for (size_t b = 0; b < want; b++)
                        CHECK(v[i][b] == (unsigned char) i, "block %u overwritten at %zu", i, b);
        /* Not an object's start, then a double free: refused. */
        mb_free(c, v[1] + 16);
        snprintf(name, sizeof(name), "%p was not allocated", (void *) (v[1] + 16));
        CHECK(strstr(mb_last_error(), name), "an interior pointer was accepted: %s", mb_last_error());
        mb_free(c, v[2]);
        mb_free(c, v[2]);
        snprintf(name, sizeof(name), "%p was not allocated", (void *) v[2]);
        CHECK(strstr(mb_last_error(), name), "a double free was accepted: %s", mb_last_error());
        v[2] = mb_malloc(c, want);
        CHECK(v[2], "mb_malloc again");
        for (unsigned i = 0; i < N; i++)
                CHECK(i == 2 || v[i] != v[2], "block %u handed out twice", i);
        for (unsigned i = 0; i < N; i++)
                mb_free(c, v[i]);
        /* A realloc across the classes keeps the contents. */
        v[0] = mb_malloc(c, 2500);
        CHECK(v[0], "mb_malloc(2500)");
        memset(v[0], 7, 2500);
        v[0] = mb_realloc(c, v[0], 6000);
        CHECK(v[0] && v[0][2499] == 7 && mb_malloc_usable_size(c, v[0]) == ps / 2 * 3, "realloc to 6000");
        mb_free(c, v[0]);
        mb_malloc_trim(c);
        printf("mid ok\n");
        return 0;
}

static int cmd_classes(void) {
        struct mb_cache_stats st[32];
        int n;
        void *p = mb_malloc(c, 1);

        CHECK(p, "mb_malloc(1)");
        n = mb_malloc_class_stats(c, st, 32);
        CHECK(n > 0, "mb_malloc_class_stats: %d", n);
        for (int i = 0; i < n; i++)
                printf("%s object_bytes=%zu align=%zu live=%llu\n", st[i].name, st[i].object_bytes, st[i].align,
                       (unsigned long long) st[i].live_objects);
        mb_free(c, p);
        return 0;
}

static int cmd_large(void) {
        enum { SLOTS = 8, ROUNDS = 200 };
        void *slot[SLOTS] = { 0 }, *a, *b, *ab;
        size_t len[SLOTS] = { 0 }, live = 0, peak = 0, mib = 1 << 20;
        unsigned seed = 12345, sd[SLOTS] = { 0 };
        char line[64];

        for (unsigned r = 0; r < ROUNDS; r++) {
                unsigned i;
                size_t n;

                seed = seed * 1103515245u + 12345u;
                i = (seed >> 16) % SLOTS;
                seed = seed * 1103515245u + 12345u;
                n = (600u << 10) + (seed >> 8) % (3500u << 10);
                if (slot[i]) {
                        CHECK(check_fill(slot[i], len[i], sd[i]), "the fill of a %zu-byte block", len[i]);
                        mb_free(c, slot[i]);
                        live -= len[i];
                }
                slot[i] = mb_malloc(c, n);
                CHECK(slot[i], "mb_malloc(%zu)", n);
                CHECK(mb_malloc_usable_size(c, slot[i]) >= n, "usable size of %zu bytes", n);
                sd[i] = r;
                fill(slot[i], n, sd[i]);
                len[i] = n;
                live += n;
                peak = live > peak ? live : peak;
        }
        for (unsigned i = 0; i < SLOTS; i++)
                if (slot[i]) {
                        CHECK(check_fill(slot[i], len[i], sd[i]), "the fill of a %zu-byte block", len[i]);
                        mb_free(c, slot[i]);
                }

        /* Two neighbours freed are one run. */
        a = mb_malloc(c, mib);
        b = mb_malloc(c, mib);
        CHECK(a && b, "two blocks of 1 MiB");
        if ((char *) b == (char *) a + mib || (char *) a == (char *) b + mib) {
                void *lo = a < b ? a : b, *hi = a < b ? b : a;

                mb_free(c, a);
                mb_free(c, b);
                ab = mb_malloc(c, 2 * mib);
                CHECK(ab == lo, "2 MiB from the two freed neighbours at %p (got %p)", lo, ab);
                mb_free(c, hi);
                CHECK(strstr(mb_last_error(), "was not allocated"), "freeing the head of a merged run is refused");
                mb_free(c, ab);
                mb_free(c, ab);
                CHECK(strstr(mb_last_error(), "was not allocated"), "freeing a kept run again is refused");
                printf("merged\n");
        } else {
                printf("note: the two runs were not neighbours (%p, %p): the merge is not checked\n", a, b);
                mb_free(c, a);
                mb_free(c, b);
        }
        printf("peak %zu\nheld\n", peak);
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
                return 1;
        return 0;
}

int main(int argc, char **argv) {
        int r;

        if (argc < 3) {
                fprintf(stderr, "usage: malloc-client sizes|threads|hold|limit|keep|mid|classes|large TENANT ...\n");
                return 2;
        }
        r = mb_connect(NULL, argv[2], &c);
        if (r < 0) {
                fprintf(stderr, "malloc-client: connect: %s: %s\n", strerror(-r), mb_last_error());
                return 1;
        }
        if (strcmp(argv[1], "sizes") == 0)
                r = cmd_sizes();
        else if (strcmp(argv[1], "threads") == 0 && argc >= 5)
                r = cmd_threads((unsigned) atoi(argv[3]), (unsigned) atoi(argv[4]));
        else if (strcmp(argv[1], "hold") == 0 && argc >= 4)
                r = cmd_hold(strtoull(argv[3], NULL, 0));
        else if (strcmp(argv[1], "limit") == 0 && argc >= 4)
                r = cmd_limit(strtoull(argv[3], NULL, 0));
        else if (strcmp(argv[1], "keep") == 0 && argc >= 5)
                r = cmd_keep((unsigned) atoi(argv[3]), strtoull(argv[4], NULL, 0));
        else if (strcmp(argv[1], "mid") == 0)
                r = cmd_mid();
        else if (strcmp(argv[1], "classes") == 0)
                r = cmd_classes();
        else if (strcmp(argv[1], "large") == 0)
                r = cmd_large();
        else {
                fprintf(stderr, "malloc-client: bad command\n");
                r = 2;
        }
        mb_close(c);
        return r;
}
