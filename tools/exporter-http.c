/* SPDX-License-Identifier: MIT */
/*
 * exporter-http.c - the deadline and the slots of membroker-exporter's
 * HTTP connections (see exporter-http.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "exporter-http.h"

#define GUARD_TICK_USEC 100000u
#define GUARD_LOG_INTERVAL_USEC (10u * 1000000u)

struct http_slot {
        int fd;
        uint8_t addr[16]; /* the peer's address, without its port */
        uint8_t addr_len;
        uint64_t begin_usec;
        bool answered; /* its request is complete and being answered */
        bool cut;
        struct http_slot *prev, *next; /* oldest first */
};

static struct {
        pthread_mutex_t lock;
        pthread_cond_t wake;
        pthread_t thread;
        bool running, stopping;
        struct http_slot *head, *tail;
        unsigned n; /* slots not cut */
        uint64_t cut_deadline, cut_evicted, refused;
        uint64_t logged_usec;
} guard = {
        .lock = PTHREAD_MUTEX_INITIALIZER,
        .wake = PTHREAD_COND_INITIALIZER,
};

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void addr_key(const struct sockaddr *sa, struct http_slot *s) {
        if (sa && sa->sa_family == AF_INET) {
                memcpy(s->addr, &((const struct sockaddr_in *) sa)->sin_addr, 4);
                s->addr_len = 4;
        } else if (sa && sa->sa_family == AF_INET6) {
                memcpy(s->addr, &((const struct sockaddr_in6 *) sa)->sin6_addr, 16);
                s->addr_len = 16;
        } else {
                s->addr_len = 0; /* a local socket: one address for all */
        }
}

static bool same_addr(const struct http_slot *a, const struct http_slot *b) {
        return a->addr_len == b->addr_len && memcmp(a->addr, b->addr, a->addr_len) == 0;
}

/* Caller holds the lock. */
static void slot_cut(struct http_slot *s) {
        if (s->cut)
                return;
        s->cut = true;
        guard.n--;
        (void) shutdown(s->fd, SHUT_RDWR);
}

/* Caller holds the lock.  Once per interval at most, what was cut since. */
static void guard_log(uint64_t now) {
        if (now - guard.logged_usec < GUARD_LOG_INTERVAL_USEC)
                return;
        guard.logged_usec = now;
        fprintf(stderr,
                "membroker-exporter: connections cut so far: %" PRIu64 " past the %u s request deadline, %" PRIu64
                " idle ones for newer requests, %" PRIu64 " refused with every slot busy\n",
                guard.cut_deadline, EXPORTER_HTTP_REQUEST_DEADLINE_SEC, guard.cut_evicted, guard.refused);
}

/* The oldest slot still waiting for its request (of @s's address when
 * @same is set), other than @s. Caller holds the lock. */
static struct http_slot *oldest_waiting(const struct http_slot *s, bool same) {
        for (struct http_slot *v = guard.head; v; v = v->next)
                if (v != s && !v->cut && !v->answered && (!same || same_addr(v, s)))
                        return v;
        return NULL;
}

static void slot_admit(struct http_slot *s) {
        unsigned same = 0;
        struct http_slot *victim = NULL;

        for (struct http_slot *v = guard.head; v; v = v->next)
                if (!v->cut && same_addr(v, s))
                        same++;
        if (same > EXPORTER_HTTP_SLOTS_PER_ADDRESS)
                victim = oldest_waiting(s, true);
        else if (guard.n > EXPORTER_HTTP_SLOTS)
                victim = oldest_waiting(s, false);
        else
                return;
        if (victim) {
                slot_cut(victim);
                guard.cut_evicted++;
        } else {
                slot_cut(s);
                guard.refused++;
        }
        guard_log(now_usec());
}

void exporter_http_notify_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                                     enum MHD_ConnectionNotificationCode toe) {
        struct http_slot *s = *socket_context;

        (void) cls;
        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *fd = MHD_get_connection_info(connection,
                                                                             MHD_CONNECTION_INFO_CONNECTION_FD);
                const union MHD_ConnectionInfo *ad = MHD_get_connection_info(connection,
                                                                             MHD_CONNECTION_INFO_CLIENT_ADDRESS);

                s = calloc(1, sizeof(*s));
                if (!s || !fd) {
                        /* Unguarded is worse than refused. */
                        free(s);
                        if (fd)
                                (void) shutdown(fd->connect_fd, SHUT_RDWR);
                        return;
                }
                s->fd = fd->connect_fd;
                addr_key(ad ? ad->client_addr : NULL, s);
                s->begin_usec = now_usec();
                pthread_mutex_lock(&guard.lock);
                s->prev = guard.tail;
                if (guard.tail)
                        guard.tail->next = s;
                else
                        guard.head = s;
                guard.tail = s;
                guard.n++;
                slot_admit(s);
                pthread_mutex_unlock(&guard.lock);
                *socket_context = s;
                return;
        }
        if (toe != MHD_CONNECTION_NOTIFY_CLOSED || !s)
                return;
        /* Before libmicrohttpd closes the descriptor: once out of the list
         * under the lock, the deadline thread cannot shut it down. */
        pthread_mutex_lock(&guard.lock);
        if (!s->cut)
                guard.n--;
        if (s->prev)
                s->prev->next = s->next;
        else
                guard.head = s->next;
        if (s->next)
                s->next->prev = s->prev;
        else
                guard.tail = s->prev;
        pthread_mutex_unlock(&guard.lock);
        free(s);
        *socket_context = NULL;
}

static struct http_slot *slot_of(struct MHD_Connection *connection) {
        const union MHD_ConnectionInfo *i = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return i ? i->socket_context : NULL;
}

void exporter_http_request_answered(struct MHD_Connection *connection) {
        struct http_slot *s = slot_of(connection);

        if (!s)
                return;
        pthread_mutex_lock(&guard.lock);
        s->answered = true;
        pthread_mutex_unlock(&guard.lock);
}

void exporter_http_notify_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                                    enum MHD_RequestTerminationCode toe) {
        struct http_slot *s = slot_of(connection);

        (void) cls;
        (void) req_cls;
        (void) toe;
        if (!s)
                return;
        /* A kept-alive connection: the next request's deadline runs from
         * here, and until it is complete it is one that waits. */
        pthread_mutex_lock(&guard.lock);
        s->answered = false;
        s->begin_usec = now_usec();
        pthread_mutex_unlock(&guard.lock);
}

static void *guard_main(void *userdata) {
        (void) userdata;
        pthread_mutex_lock(&guard.lock);
        while (!guard.stopping) {
                uint64_t now = now_usec(), cut = 0;
                struct timespec ts;

                for (struct http_slot *s = guard.head; s; s = s->next)
                        if (!s->cut && now - s->begin_usec >= EXPORTER_HTTP_REQUEST_DEADLINE_SEC * 1000000ull) {
                                slot_cut(s);
                                cut++;
                        }
                if (cut > 0) {
                        guard.cut_deadline += cut;
                        guard_log(now);
                }
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += GUARD_TICK_USEC * 1000;
                if (ts.tv_nsec >= 1000000000) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000;
                }
                (void) pthread_cond_timedwait(&guard.wake, &guard.lock, &ts);
        }
        pthread_mutex_unlock(&guard.lock);
        return NULL;
}

void exporter_http_raise_nofile(void) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
}

int exporter_http_guard_start(void) {
        int r = pthread_create(&guard.thread, NULL, guard_main, NULL);

        if (r != 0)
                return -r;
        guard.running = true;
        return 0;
}

void exporter_http_guard_stop(void) {
        if (!guard.running)
                return;
        pthread_mutex_lock(&guard.lock);
        guard.stopping = true;
        pthread_cond_signal(&guard.wake);
        pthread_mutex_unlock(&guard.lock);
        pthread_join(guard.thread, NULL);
        guard.running = false;
}
