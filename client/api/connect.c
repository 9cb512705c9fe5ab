/* SPDX-License-Identifier: MIT */
/*
 * connect.c - a client's connection to membrokerd: Hello and Welcome,
 * mapping the tenant's arena and the stats region, starting the library's
 * thread; connecting again after a restart of the daemon (reconnect.h); and
 * closing.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/client.h"
#include "api/connect.h"
#include "macros.h"
#include "malloc/kmalloc.h"
#include "session/reconnect.h"
#include "session/session.h"
#include "stock/reclaim.h"
#include "stock/stock.h"
#include "wire.h"

/* How long mb_close() waits for the daemon to acknowledge the disconnect. */
#define CLOSE_TIMEOUT_MSEC 5000

static inline void connect_msg_freep(Mb__Msg **m) {
        if (*m)
                mb__msg__free_unpacked(*m, NULL);
}

int connect_again(mb_client *c) {
        struct reconnect_info info = {
                .socket_path = c->restart.socket_path,
                .tenant = c->tenant,
                .client_name = program_invocation_short_name,
                .token = c->restart.token,
                .arena_dev = c->restart.arena_dev,
                .arena_ino = c->restart.arena_ino,
                .timeout_sec = reconnect_timeout_sec(),
                .cancel = &c->session.closing,
        };
        struct epoll_event ev = { .events = EPOLLIN };
        struct mb_stats_region *stats, *old = c->stats;
        _cleanup_(wire_conn_freep) struct wire_conn *conn = NULL;
        _cleanup_(connect_msg_freep) Mb__Msg *msg = NULL;
        _cleanup_(closep) int stats_fd = -1;
        _cleanup_(closep) int arena_fd = -1;
        struct wire_conn *old_conn;
        int r;

        mb_assert_mutex_not_held(&c->session.io_lock);
        MB_LOCK_GUARD(&c->session.send_lock);
        r = reconnect_session(&info, &c->restart.held, &conn, &msg, &stats_fd, &arena_fd);
        if (r < 0)
                return r;
        if (arena_fd >= 0) {
                /* The daemon came back without our memory, and we hold no
                 * page: map its new arena in place of the old one (same
                 * address, so nothing that reads c->base races). */
                struct stat st;
                void *p = MAP_FAILED;

                if (msg->welcome->arena_pages == c->arena_pages && msg->welcome->page_size == c->page_size &&
                    fstat(arena_fd, &st) == 0)
                        p = mmap(c->base, c->arena_bytes, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_NORESERVE | MAP_FIXED, arena_fd, 0);
                if (p == MAP_FAILED) {
                        mb_set_error("membrokerd came back with a different arena for tenant %s", c->tenant);
                        return -ESTALE;
                }
                c->restart.arena_dev = st.st_dev;
                c->restart.arena_ino = st.st_ino;
        }
        if (msg->welcome->stats_slots != c->ncpus) {
                mb_set_error("membrokerd came back with %u stats slots instead of %u", msg->welcome->stats_slots,
                             c->ncpus);
                return -EPROTO;
        }
        stats = mmap(NULL, c->stats_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, stats_fd, 0);
        if (stats == MAP_FAILED) {
                r = negative_errno();
                mb_set_error("cannot map the new stats region: %s", strerror(-r));
                return r;
        }
        /* Writers mark c->stats dirty under a stock lock, or inside a
         * sequence that the lock's rseq fence ends: publish the new region
         * first, unmap the old one only after every lock was taken once
         * (stock_stat_dirty()). */
        __atomic_store_n(&c->stats, stats, __ATOMIC_RELAXED);
        /* Every CPU's counters move to the new region, under its lock. */
        for (unsigned i = 0; i < c->ncpus; i++) {
                struct stock *s = stock_lock_cpu(c, i);

                stats->slot[i] = old->slot[i];
                s->slot = &stats->slot[i];
                stock_unlock(c, s);
        }
        /* The new region's daemon learns of changes from its dirty word. */
        mb_stats_region_writer_attach(stats);
        munmap(old, c->stats_bytes);

        {
                MB_LOCK_GUARD(&c->session.io_lock);

                old_conn = c->session.conn;
                (void) epoll_ctl(c->session.poll_fd, EPOLL_CTL_DEL, old_conn->fd, NULL);
                (void) epoll_ctl(c->session.poll_fd, EPOLL_CTL_ADD, conn->fd, &ev);
                c->session.conn = TAKE_PTR(conn);
                c->session.conn_gen++;
                c->client_id = msg->welcome->client_id;
                c->session.pressure_ok = msg->welcome->has_pressure_triggers && msg->welcome->pressure_triggers;
                c->session.outside_ok = msg->welcome->has_outside_charges && msg->welcome->outside_charges;
                /* The new daemon knows none of our triggers: send them
                 * again (send_lock held; their Acks nobody waits for). */
                session_pressure_resend_locked(c);
                pthread_cond_broadcast(&c->session.io_cond);
        }
        wire_conn_free(old_conn);
        return 0;
}

static int connect_map(mb_client *c, const Mb__Welcome *w, int arena_fd, int stats_fd) {
        struct stat st;
        void *p;

        if (fstat(arena_fd, &st) < 0)
                return negative_errno();
        if ((uint64_t) st.st_size < c->arena_bytes) {
                mb_set_error("the arena of tenant %s is smaller than announced", w->tenant);
                return -EPROTO;
        }
        p = mmap(NULL, c->arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, arena_fd, 0);
        if (p == MAP_FAILED) {
                int r = negative_errno();

                mb_set_error("cannot map the arena of tenant %s (%" PRIu64 " bytes): %s", w->tenant,
                             c->arena_bytes, strerror(-r));
                return r;
        }
        c->base = p;

        if (fstat(stats_fd, &st) < 0)
                return negative_errno();
        c->stats_bytes = mb_stats_region_bytes(w->stats_slots);
        if ((uint64_t) st.st_size < c->stats_bytes) {
                mb_set_error("the stats region is smaller than %u slots", w->stats_slots);
                c->stats_bytes = 0;
                return -EPROTO;
        }
        p = mmap(NULL, c->stats_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, stats_fd, 0);
        if (p == MAP_FAILED) {
                int r = negative_errno();

                c->stats_bytes = 0;
                mb_set_error("cannot map the stats region: %s", strerror(-r));
                return r;
        }
        c->stats = p;
        if (c->stats->magic != MB_STATS_MAGIC || c->stats->version != MB_STATS_VERSION ||
            c->stats->nslots != w->stats_slots) {
                mb_set_error("the stats region has an unknown layout (magic %#x, version %u, %u slots)",
                             c->stats->magic, c->stats->version, c->stats->nslots);
                return -EPROTO;
        }
        /* Slot updates mark the region dirty (stock_stat_dirty()): the
         * slow paths every time, the fast path every 64th of a slot. */
        mb_stats_region_writer_attach(c->stats);
        return 0;
}

static int connect_welcome(mb_client *c, const Mb__Welcome *w) {
        int fds[2];
        int r;

        r = wire_conn_take_fds(c->session.conn, fds, 2);
        if (r < 0) {
                mb_set_error("the Welcome of membrokerd did not carry the arena and stats descriptors");
                return -EPROTO;
        }
        if (w->page_size < 64 || w->page_size > (UINT64_C(1) << 30) || (w->page_size & (w->page_size - 1)) ||
            w->charge_batch == 0 || w->charge_batch > MB_CHARGE_MAX_PAGES || w->arena_pages == 0 ||
            w->arena_pages > (UINT64_MAX >> 1) / w->page_size || w->stats_slots == 0 ||
            w->stats_slots > 65536) {
                close(fds[0]);
                close(fds[1]);
                mb_set_error("the Welcome of membrokerd has impossible values (page size %" PRIu64
                             ", batch %u, %" PRIu64 " arena pages, %u slots)",
                             w->page_size, w->charge_batch, w->arena_pages, w->stats_slots);
                return -EPROTO;
        }
        c->tenant = strdup(w->tenant);
        if (!c->tenant) {
                close(fds[0]);
                close(fds[1]);
                return -ENOMEM;
        }
        c->page_size = (size_t) w->page_size;
        c->page_shift = (unsigned) __builtin_ctzll(w->page_size);
        c->page_mask = w->page_size - 1;
        c->charge_batch = w->charge_batch;
        /* The stocks get room for the largest batch the daemon may tell
         * later (a tenant with nothing limited, Welcome.charge_batch_max). */
        c->batch_cap = w->has_charge_batch_max && w->charge_batch_max > w->charge_batch &&
                                       w->charge_batch_max <= MB_CHARGE_MAX_PAGES
                               ? w->charge_batch_max
                               : w->charge_batch;
        c->arena_pages = w->arena_pages;
        c->arena_bytes = w->arena_pages * w->page_size;
        c->ncpus = w->stats_slots;
        c->client_id = w->client_id;
        c->unlimited = w->has_unlimited && w->unlimited;
        c->session.pressure_ok = w->has_pressure_triggers && w->pressure_triggers;
        c->session.outside_ok = w->has_outside_charges && w->outside_charges;

        /* What a reconnection after a daemon restart needs (reconnect.h);
         * without a token the session ends with the connection. */
        {
                struct stat st;

                c->restart.token = w->has_client_token ? w->client_token : 0;
                if (fstat(fds[0], &st) == 0) {
                        c->restart.arena_dev = st.st_dev;
                        c->restart.arena_ino = st.st_ino;
                } else
                        c->restart.token = 0;
                if (c->restart.token != 0 && reconnect_held_init(&c->restart.held, c->arena_pages) < 0)
                        c->restart.token = 0;
        }

        r = connect_map(c, w, fds[0], fds[1]);
        /* The mappings keep the memory; the descriptors are not needed. */
        close(fds[0]);
        close(fds[1]);
        if (r < 0)
                return r;
        return stock_setup(c);
}

/* The wake-up eventfd of the thread, and mb_get_fd()'s epoll set: the
 * socket plus an eventfd the library makes readable when work waits that
 * the socket does not show (a frame already read into the buffer). */
static int connect_setup_fds(mb_client *c) {
        struct epoll_event ev = { .events = EPOLLIN };

        c->session.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        c->session.notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        c->session.poll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (c->session.wake_fd < 0 || c->session.notify_fd < 0 || c->session.poll_fd < 0 ||
            epoll_ctl(c->session.poll_fd, EPOLL_CTL_ADD, c->session.conn->fd, &ev) < 0 ||
            epoll_ctl(c->session.poll_fd, EPOLL_CTL_ADD, c->session.notify_fd, &ev) < 0) {
                int r = negative_errno();

                mb_set_error("cannot set up the connection's event descriptors: %s", strerror(-r));
                return r;
        }
        return 0;
}

static int connect_start_thread(mb_client *c) {
        sigset_t all, old;
        int r;

        /* The thread takes no signal: they stay the application's. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&c->session.thread, NULL, session_thread, c);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                mb_set_error("cannot start the library's thread: %s", strerror(-r));
                return r;
        }
        (void) pthread_setname_np(c->session.thread, "membroker");
        c->session.thread_started = true;
        /* Return only once the thread runs: the C library (and a sanitizer's
         * allocator) set a new thread up with locks of their own, and a
         * fork() right after mb_connect() must not catch them held. */
        MB_LOCK_GUARD(&c->session.io_lock);
        while (!c->session.thread_running)
                pthread_cond_wait(&c->session.io_cond, &c->session.io_lock);
        return 0;
}

/* The parts of a client under its session, as the session sees them. */
static const struct session_hooks connect_session_hooks = {
        .broken_locked = stock_disable_all,
        .run_requests = reclaim_run_requests,
        .refill = stock_refill_run,
        .batch_changed_locked = stock_adopt_batch_locked,
        .reconnect = connect_again,
};

/* A client composed here is freed part by part. */
static void connect_client_free(mb_client *c) {
        if (!c)
                return;
        session_done(c);
        client_free(c);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(mb_client *, connect_client_free);

int mb_connect_ex(const char *socket_path, const char *tenant, unsigned flags, mb_client **ret) {
        _cleanup_(connect_client_freep) mb_client *c = NULL;
        Mb__Hello hello = MB__HELLO__INIT;
        Mb__Msg msg = MB__MSG__INIT;
        _cleanup_(connect_msg_freep) Mb__Msg *reply = NULL;
        int r;

        if (!ret || (flags & ~MB_CONNECT_NO_THREAD)) {
                mb_set_error("mb_connect_ex: invalid arguments");
                return -EINVAL;
        }
        if (!socket_path || !*socket_path) {
                socket_path = getenv(MB_SOCKET_ENV);
                if (!socket_path || !*socket_path)
                        socket_path = MB_DEFAULT_SOCKET_PATH;
        }
        if (!tenant || !*tenant)
                tenant = "auto";

        c = client_new(flags);
        if (!c)
                return -ENOMEM;
        c->session.hooks = &connect_session_hooks;
        c->restart.socket_path = strdup(socket_path);
        if (!c->restart.socket_path)
                return -ENOMEM;
        r = wire_conn_open(socket_path, &c->session.conn);
        if (r < 0)
                return r;
        r = connect_setup_fds(c);
        if (r < 0)
                return r;

        hello.version = WIRE_PROTOCOL_VERSION;
        hello.tenant = (char *) tenant;
        hello.client_name = program_invocation_short_name;
        msg.body_case = MB__MSG__BODY_HELLO;
        msg.hello = &hello;
        r = wire_conn_send(c->session.conn, &msg);
        if (r < 0)
                return r;

        r = wire_conn_recv(c->session.conn, true, &reply);
        if (r < 0) {
                if (r == -ECONNRESET)
                        mb_set_error("membrokerd closed the connection before answering Hello");
                return r;
        }
        switch (reply->body_case) {
        case MB__MSG__BODY_WELCOME:
                r = connect_welcome(c, reply->welcome);
                break;
        case MB__MSG__BODY_ERROR:
                /* The refusal, in the daemon's words ("uid 65534 is not
                 * allowed in tenant db: AllowUsers=postgres"). */
                mb_set_error("%s", reply->error->reason);
                r = reply->error->code > 0 ? -reply->error->code : -EPROTO;
                break;
        default:
                mb_set_error("membrokerd answered Hello with %s", wire_msg_name(reply));
                r = -EPROTO;
        }
        if (r < 0)
                return r;

        if (!(flags & MB_CONNECT_NO_THREAD)) {
                r = connect_start_thread(c);
                if (r < 0)
                        return r;
        }
        client_registry_add(c);
        *ret = TAKE_PTR(c);
        return 0;
}

int mb_connect(const char *socket_path, const char *tenant, mb_client **ret) {
        return mb_connect_ex(socket_path, tenant, 0, ret);
}

/* Half-close and wait until the daemon has seen the disconnect and closed
 * its end: then everything this client held is uncharged. */
static void connect_hangup(mb_client *c) {
        int fd = c->session.conn->fd;
        uint8_t buf[4096];
        int left = CLOSE_TIMEOUT_MSEC;

        if (shutdown(fd, SHUT_WR) < 0)
                return;
        while (left > 0) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                ssize_t n;
                int k = poll(&pfd, 1, 100);

                if (k < 0 && errno != EINTR)
                        return;
                if (k <= 0) {
                        left -= 100;
                        continue;
                }
                /* What still arrives (Acks, Events) is moot; descriptors
                 * passed without a control buffer are closed by the kernel. */
                n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                        return;
        }
}

void mb_close(mb_client *c) {
        if (!c)
                return;
        kmalloc_destroy(c);
        client_registry_remove(c);
        if (!c->forked) {
                pthread_mutex_lock(&c->session.io_lock);
                /* atomic: a reconnection polls it without the lock */
                __atomic_store_n(&c->session.closing, true, __ATOMIC_RELEASE);
                pthread_cond_broadcast(&c->session.io_cond);
                pthread_mutex_unlock(&c->session.io_lock);
                if (c->session.thread_started) {
                        (void) eventfd_write(c->session.wake_fd, 1);
                        pthread_join(c->session.thread, NULL);
                        c->session.thread_started = false;
                }
                pthread_mutex_lock(&c->session.conn_lock);
                if (!session_broken(c))
                        connect_hangup(c);
                pthread_mutex_unlock(&c->session.conn_lock);
        }
        connect_client_free(c);
}
