/* SPDX-License-Identifier: MIT */
/*
 * rightsize-client.c - a real client with a large cold cache and a small
 * hot set, for the right-sizing tests and benchmark.
 *
 *   rightsize-client --socket PATH --tenant PATH --hot PAGES --cold PAGES
 *                    [--pass-usec USEC]
 *
 * It allocates --hot pages it touches (writes) over and over, one pass every
 * --pass-usec (default 2000), and --cold pages it never touches again.  All
 * of them sit behind one shrinker, ordered as an LRU would order them: the
 * cold pages go first, then hot pages, round robin.  A hot page the
 * shrinker gave away is missing at the next pass: the client allocates it
 * again at once (a refault), and that charge is what stalls when the
 * tenant is at its limit.
 *
 * Prints "ready hot=H cold=C" once everything is allocated; on SIGUSR1
 * "status hot=H cold=C refaults=R" (pages present, refaults so far); on
 * SIGTERM or SIGINT the same line as "done ..." and exits 0.  Exit 2 on an
 * error (connect, an allocation that fails).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "membroker.h"

struct rs_client {
        mb_client *c;
        pthread_mutex_t lock;
        void **hot;          /* NULL: given back, to be refaulted */
        size_t nhot, hot_present, hot_cursor;
        void **cold;         /* a stack of cold pages */
        size_t ncold;
        uint64_t refaults;
};

static volatile sig_atomic_t stop_requested, status_requested;

static void on_signal(int sig) {
        if (sig == SIGUSR1)
                status_requested = 1;
        else
                stop_requested = 1;
}

static unsigned long rs_count(void *userdata) {
        struct rs_client *s = userdata;
        unsigned long n;

        pthread_mutex_lock(&s->lock);
        n = s->ncold + s->hot_present;
        pthread_mutex_unlock(&s->lock);
        return n;
}

/* Cold pages first, then hot ones round robin (an LRU's order). */
static unsigned long rs_scan(void *userdata, unsigned long nr) {
        struct rs_client *s = userdata;
        unsigned long freed = 0;

        pthread_mutex_lock(&s->lock);
        while (freed < nr && s->ncold > 0) {
                (void) mb_page_free(s->c, s->cold[--s->ncold]);
                freed++;
        }
        for (size_t tries = 0; freed < nr && s->hot_present > 0 && tries < s->nhot; tries++) {
                size_t i = s->hot_cursor;

                s->hot_cursor = (s->hot_cursor + 1) % s->nhot;
                if (!s->hot[i])
                        continue;
                (void) mb_page_free(s->c, s->hot[i]);
                s->hot[i] = NULL;
                s->hot_present--;
                freed++;
        }
        pthread_mutex_unlock(&s->lock);
        return freed;
}

static void print_line(struct rs_client *s, const char *what) {
        pthread_mutex_lock(&s->lock);
        printf("%s hot=%zu cold=%zu refaults=%" PRIu64 "\n", what, s->hot_present, s->ncold, s->refaults);
        pthread_mutex_unlock(&s->lock);
        fflush(stdout);
}

static void *alloc_or_die(struct rs_client *s) {
        void *p = mb_page_alloc(s->c);

        if (!p) {
                fprintf(stderr, "rightsize-client: allocation failed: %s\n", mb_last_error());
                exit(2);
        }
        memset(p, 0xa5, 64);
        return p;
}

/* One pass over the hot set: touch what is there, refault what is not. */
static void touch_pass(struct rs_client *s) {
        for (size_t i = 0; i < s->nhot && !stop_requested; i++) {
                void *p;

                pthread_mutex_lock(&s->lock);
                p = s->hot[i];
                if (p)
                        ((volatile char *) p)[i % 4096] ^= 1;
                pthread_mutex_unlock(&s->lock);
                if (p)
                        continue;
                p = alloc_or_die(s); /* may wait in the daemon: the stall */
                pthread_mutex_lock(&s->lock);
                if (s->hot[i]) {
                        /* Cannot happen (only this thread fills slots). */
                        pthread_mutex_unlock(&s->lock);
                        (void) mb_page_free(s->c, p);
                        continue;
                }
                s->hot[i] = p;
                s->hot_present++;
                s->refaults++;
                pthread_mutex_unlock(&s->lock);
        }
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' }, { "tenant", required_argument, NULL, 't' },
                { "hot", required_argument, NULL, 'h' },    { "cold", required_argument, NULL, 'c' },
                { "pass-usec", required_argument, NULL, 'p' }, {},
        };
        struct rs_client s = { .lock = PTHREAD_MUTEX_INITIALIZER };
        struct mb_shrinker shrinker = { .count = rs_count, .scan = rs_scan, .userdata = &s };
        const char *socket_path = NULL, *tenant = NULL;
        unsigned long pass_usec = 2000;
        size_t cold = 0;
        struct sigaction sa = { .sa_handler = on_signal };
        int o, r;

        while ((o = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
                switch (o) {
                case 's': socket_path = optarg; break;
                case 't': tenant = optarg; break;
                case 'h': s.nhot = strtoul(optarg, NULL, 10); break;
                case 'c': cold = strtoul(optarg, NULL, 10); break;
                case 'p': pass_usec = strtoul(optarg, NULL, 10); break;
                default: return 2;
                }
        }
        if (!tenant || s.nhot == 0) {
                fprintf(stderr, "usage: rightsize-client --socket PATH --tenant PATH --hot PAGES --cold PAGES "
                                "[--pass-usec USEC]\n");
                return 2;
        }
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGUSR1, &sa, NULL);

        r = mb_connect(socket_path, tenant, &s.c);
        if (r < 0) {
                fprintf(stderr, "rightsize-client: cannot connect: %s\n", strerror(-r));
                return 2;
        }
        s.hot = calloc(s.nhot, sizeof(*s.hot));
        s.cold = calloc(cold ? cold : 1, sizeof(*s.cold));
        if (!s.hot || !s.cold)
                return 2;
        for (size_t i = 0; i < s.nhot; i++) {
                s.hot[i] = alloc_or_die(&s);
                s.hot_present++;
        }
        for (size_t i = 0; i < cold; i++) {
                void *p = alloc_or_die(&s);

                pthread_mutex_lock(&s.lock);
                s.cold[s.ncold++] = p;
                pthread_mutex_unlock(&s.lock);
        }
        r = mb_register_shrinker(s.c, &shrinker);
        if (r < 0) {
                fprintf(stderr, "rightsize-client: cannot register the shrinker: %s\n", strerror(-r));
                return 2;
        }
        print_line(&s, "ready");

        while (!stop_requested) {
                struct timespec ts = { .tv_sec = (time_t) (pass_usec / 1000000),
                                       .tv_nsec = (long) (pass_usec % 1000000) * 1000 };

                touch_pass(&s);
                if (status_requested) {
                        status_requested = 0;
                        print_line(&s, "status");
                }
                nanosleep(&ts, NULL);
        }
        (void) mb_unregister_shrinker(s.c, &shrinker);
        print_line(&s, "done");
        mb_close(s.c);
        free(s.hot);
        free(s.cold);
        return 0;
}
