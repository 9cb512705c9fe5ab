/* SPDX-License-Identifier: MIT */
/*
 * client.c - libmembroker: a session with membrokerd and the per-CPU stock.
 *
 * The fast paths (mb_page_alloc(), mb_page_free() and their bulk forms when
 * the stock covers them) read the CPU from rseq, take that CPU's stock lock
 * (one uncontended atomic exchange), pop or push a pointer, bump the CPU's
 * stats slot and unlock: no system call, no daemon.  Everything else is the
 * slow path and runs under the connection mutex `conn_lock`, which
 * serialises every request/reply exchange with the daemon; replies are
 * matched by `seq`.
 *
 * Pages move between three places:
 *   application  <-- pop / push -->  stock of some CPU  <-- Charge / Uncharge -->  daemon
 * and the stats slots follow them: MB_STAT_PAGES counts pages the
 * application holds, MB_STAT_STOCK pages in the stocks, MB_STAT_PGALLOC and
 * MB_STAT_PGFREE every alloc and free.  A slot is written only under the
 * lock of the stock of the same CPU (mb_stats_abi.h: one writer per slot).
 *
 * Daemon-initiated messages (Reclaim, Drain, Event) are read and handled by
 * the library's own thread while the application is busy, or with
 * MB_CONNECT_NO_THREAD by mb_process() and by threads waiting for a reply
 * (see "the session" below for who reads and who answers).  Reclaim is
 * answered from the stocks first, then by the application's shrinkers;
 * Event callbacks are called with no library lock held, so that a callback
 * may call back into the library.
 *
 * Locks, in order: conn_lock (the application's exchanges with the daemon,
 * one at a time) -> io_lock (reader role, waiters, queued requests, session
 * state) -> a stock lock; send_lock and cb_lock are taken alone;
 * shrinker_lock (read) is held while shrinkers run, with no other lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/membarrier.h>

#include "wire_conn.h"
#include "reconnect.h"
#include "cpu.h"
#include "macros.h"
#include "mb_internal.h"
#include "membroker.h"
#include "stock.h"
#include "wire.h"

/* Protocol limits (protocol.md §4): pages per Charge. */
#define CHARGE_MAX_PAGES 16384u
/* Extents per Uncharge frame: 2048 * at most 19 bytes stays well under
 * WIRE_MAX_FRAME_BYTES. */
#define UNCHARGE_MAX_EXTENTS 2048u
/* How long mb_close() waits for the daemon to acknowledge the disconnect. */
#define CLOSE_TIMEOUT_MSEC 5000
#define ERROR_MESSAGE_BYTES 512

struct pending_event {
        char *name;
        uint64_t count;
};

struct mb_client {
        /* Read by every fast path; written only while connecting.  The
         * stocks' own fields change under their locks. */
        struct stock *stocks;          /* [ncpus], one cache line each */
        uint8_t *base;                 /* the tenant arena, mapped shared */
        uint64_t arena_bytes;
        uint64_t page_mask;            /* page_size - 1 */
        ptrdiff_t rseq_offset;         /* cpu_rseq_offset(), -1 without rseq */
        ptrdiff_t rseq_area;           /* __rseq_offset: the struct rseq */
        bool rseq_lock;                /* stock locks taken with rseq (stock.h) */
        unsigned ncpus;                /* = stats slots = stocks */
        unsigned page_shift;

        /* The session, fixed by the Welcome. */
        size_t page_size;
        unsigned charge_batch;         /* pages per Charge; the daemon may change it
                                        * (Grant.charge_batch), under conn_lock */
        unsigned batch_cap;            /* the largest batch the Welcome allowed
                                        * (charge_batch_max): the stocks have room
                                        * for 2 * batch_cap + 1 pages each */
        uint64_t arena_pages;
        uint64_t client_id;
        bool unlimited;
        char *tenant;
        struct mb_stats_region *stats;
        size_t stats_bytes;
        void **stock_pages;            /* backing of every stock's pages[] */
        unsigned flags;

        /* conn_lock serialises the application's exchanges with the daemon
         * (charges, and the returns of overfull stocks). */
        pthread_mutex_t conn_lock;
        struct wire_conn *conn;             /* read by the reader only (io_lock) */
        uint32_t next_seq;             /* atomic */
        bool forked;                   /* this copy lives in a fork() child */
        /* Surviving a restart of the daemon (reconnect.h): the pages charged
         * to this client (held_lock), its token, its arena's identity, where
         * to go. */
        struct reconnect_held held;
        uint64_t token;
        dev_t arena_dev;
        ino_t arena_ino;
        char *socket_path;

        /* io_lock guards who reads the socket, the threads waiting for
         * replies, the daemon's queued requests and the session state;
         * io_cond signals a change of any of them. */
        pthread_mutex_t io_lock;
        pthread_cond_t io_cond;
        bool reading;                  /* a thread is reading the socket */
        struct waiter *waiters;
        struct daemon_request *requests; /* Reclaim/Drain to answer, in order */
        size_t nrequests, requests_alloc;
        int broken;                    /* negative errno once the session is lost (atomic reads) */
        char *broken_reason;
        bool closing;
        bool thread_running;           /* client_thread() has started (io_lock) */
        pthread_mutex_t send_lock;     /* one frame at a time on the socket */
        uint64_t conn_gen;             /* connections so far: moves on at a reconnection */
        pthread_mutex_t held_lock;     /* the held bitmap (reconnect.h) */
        pthread_t thread;              /* the library's thread ... */
        bool thread_started;           /* ... unless MB_CONNECT_NO_THREAD */
        int wake_fd;                   /* eventfd: wakes the thread from poll() */
        int notify_fd;                 /* eventfd: work for mb_process() (NO_THREAD) */
        int poll_fd;                   /* epoll of the socket and notify_fd: mb_get_fd() */

        /* shrinker_lock guards the shrinkers (read while they run). */
        pthread_rwlock_t shrinker_lock;
        const struct mb_shrinker **shrinkers;
        size_t nshrinkers;

        /* cb_lock guards the application's event callback and the queued
         * events. */
        pthread_mutex_t cb_lock;
        mb_event_fn event_fn;
        void *event_userdata;
        struct pending_event *events;
        size_t nevents;
        int events_pending;            /* atomic hint: nevents > 0 */

        mb_client *reg_prev, *reg_next; /* every live client, for fork() */
};

/* ---- errors ---- */

static __thread char error_message[ERROR_MESSAGE_BYTES];

void mb_set_error(const char *fmt, ...) {
        char buf[ERROR_MESSAGE_BYTES];
        va_list ap;

        /* Through a copy, so that an argument may be mb_last_error(). */
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        memcpy(error_message, buf, sizeof(buf));
}

const char *mb_last_error(void) {
        return error_message;
}

/* rseq mode needs the kernel to abort other CPUs' critical sections on
 * demand; registered once per process. */
static pthread_once_t rseq_fence_once = PTHREAD_ONCE_INIT;
static bool rseq_fence_ok;

static void rseq_fence_init(void) {
        long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

        if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ))
                return;
        rseq_fence_ok = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0;
}

/* ---- fork(): every live client, disabled in the child ---- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;
static mb_client *registry_head;

static void registry_prepare(void) {
        pthread_mutex_lock(&registry_lock);
}

static void registry_parent(void) {
        pthread_mutex_unlock(&registry_lock);
}

/* In the child: every connection belongs to the parent.  Empty and disable
 * the stocks (so that every alloc and free takes the slow path, which
 * refuses with -ECHILD) without writing anything the parent shares: the
 * stocks are private memory, the stats region and the arena are not. */
static void registry_child(void) {
        for (mb_client *c = registry_head; c; c = c->reg_next) {
                c->forked = true;
                for (unsigned i = 0; i < c->ncpus; i++) {
                        c->stocks[i].lock = 0;
                        c->stocks[i].nr = 0;
                        c->stocks[i].limit = 0;
                }
        }
        /* The membarrier registration belongs to the parent's mm: register
         * the child's, for the clients it connects. */
        if (rseq_fence_ok)
                rseq_fence_ok = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0;
        pthread_mutex_unlock(&registry_lock);
}

static void registry_init(void) {
        (void) pthread_atfork(registry_prepare, registry_parent, registry_child);
}

static void registry_add(mb_client *c) {
        pthread_mutex_lock(&registry_lock);
        c->reg_next = registry_head;
        if (registry_head)
                registry_head->reg_prev = c;
        registry_head = c;
        pthread_mutex_unlock(&registry_lock);
}

static void registry_remove(mb_client *c) {
        pthread_mutex_lock(&registry_lock);
        if (c->reg_prev)
                c->reg_prev->reg_next = c->reg_next;
        else if (registry_head == c)
                registry_head = c->reg_next;
        if (c->reg_next)
                c->reg_next->reg_prev = c->reg_prev;
        c->reg_prev = c->reg_next = NULL;
        pthread_mutex_unlock(&registry_lock);
}

/* ---- stocks ---- */

/* Whether this process can take stock locks with rseq (stock.h). */
static bool rseq_lock_available(void) {
        const char *e = getenv("MEMBROKER_RSEQ");

        if (!STOCK_HAVE_RSEQ || cpu_rseq_offset() < 0)
                return false;
        if (e && strcmp(e, "0") == 0)
                return false;
        (void) pthread_once(&rseq_fence_once, rseq_fence_init);
        return rseq_fence_ok;
}

/* Abort every rseq critical section running on @cpu now. */
static void rseq_fence(unsigned cpu) {
        if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_CMD_FLAG_CPU, (int) cpu) < 0 &&
            errno != EINVAL)
                /* EINVAL: that CPU is offline, nothing runs there.  Else be
                 * safe with a fence on every CPU. */
                (void) syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0);
}

/*
 * Take the lock of stock @cpu from wherever the caller runs (stock.h: the
 * remote way in rseq mode).  Slow paths only.
 */
static __attribute__((noinline)) struct stock *client_stock_lock_cpu(const mb_client *c, unsigned cpu) {
        struct stock *s = &c->stocks[cpu];

        if (!c->rseq_lock) {
                stock_lock_atomic(s);
                return s;
        }
        for (;;) {
                int expected = STOCK_UNLOCKED;

                if (__atomic_compare_exchange_n(&s->lock, &expected, STOCK_LOCKED_REMOTE, false, __ATOMIC_ACQUIRE,
                                                __ATOMIC_RELAXED)) {
                        /* A sequence on @cpu may have read 0 before our swap
                         * and not committed yet: abort it, then look. */
                        rseq_fence(cpu);
                        if (__atomic_load_n(&s->lock, __ATOMIC_ACQUIRE) == STOCK_LOCKED_REMOTE)
                                return s;
                        /* It committed first and holds the lock now. */
                }
                stock_wait_unlocked(s);
        }
}

/* client_stock_lock() when the first attempt failed: busy, aborted, no
 * valid rseq CPU, or atomic mode. */
static __attribute__((noinline)) struct stock *client_stock_lock_slow(const mb_client *c) {
#if STOCK_HAVE_RSEQ
        if (c->rseq_lock) {
                for (;;) {
                        uint32_t cpu = __atomic_load_n(
                                (const uint32_t *) ((const char *) __builtin_thread_pointer() + c->rseq_offset),
                                __ATOMIC_RELAXED);
                        struct stock *s;
                        int r;

                        if (cpu >= c->ncpus)
                                /* No valid rseq CPU for this thread. */
                                return client_stock_lock_cpu(c, cpu_fallback(c->ncpus));
                        s = &c->stocks[cpu];
                        r = stock_rseq_trylock(&s->lock, cpu, c->rseq_area);
                        if (r == STOCK_RSEQ_LOCKED)
                                return s;
                        if (r == STOCK_RSEQ_BUSY)
                                stock_wait_unlocked(s);
                }
        }
#endif
        {
                struct stock *s = &c->stocks[cpu_current(c->rseq_offset, c->ncpus)];

                stock_lock_atomic(s);
                return s;
        }
}

/* Lock the stock of the CPU the caller runs on: the fast path.  In rseq
 * mode one attempt inline, without any atomic instruction. */
static inline __attribute__((always_inline)) struct stock *client_stock_lock(const mb_client *c) {
#if STOCK_HAVE_RSEQ
        if (_likely_(c->rseq_lock)) {
                uint32_t cpu = __atomic_load_n(
                        (const uint32_t *) ((const char *) __builtin_thread_pointer() + c->rseq_offset),
                        __ATOMIC_RELAXED);

                if (_likely_(cpu < c->ncpus)) {
                        struct stock *s = &c->stocks[cpu];

                        if (_likely_(stock_rseq_trylock(&s->lock, cpu, c->rseq_area) == STOCK_RSEQ_LOCKED))
                                return s;
                }
        }
#endif
        return client_stock_lock_slow(c);
}

/* After an update of @s's stats slot, stock lock held: mark the region
 * dirty for the daemon (mb_stats_abi.h); a read of a shared line while the
 * word is set, no fence.  A reconnection publishes the new region before it
 * moves the slots, under each stock's lock, and unmaps the old one after:
 * a writer holding any stock lock sees a mapped region. */
static inline __attribute__((always_inline)) void stock_stat_dirty(const mb_client *c) {
        mb_stats_region_mark_dirty(__atomic_load_n(&c->stats, __ATOMIC_RELAXED));
}

/* A slow path's update of @s's slot is complete: bump `updates` and mark the
 * region (every time; the fast path marks every STOCK_STAT_DIRTY_UPDATES). */
static inline void stock_slot_commit(const mb_client *c, struct stock *s) {
        stock_slot_updated(s->slot);
        stock_stat_dirty(c);
}

/* The fast path's stats: @n pages between the application and the stock
 * (stock_stat_use()), the region marked when it is due. */
static inline __attribute__((always_inline)) void stock_use(const mb_client *c, struct stock *s, int64_t n) {
        if (_unlikely_(stock_stat_use(s->slot, n)))
                stock_stat_dirty(c);
}

/* Move the @take topmost pages of the locked stock @s to @out. */
static void stock_take_locked(const mb_client *c, struct stock *s, void **out, uint32_t take) {
        s->nr -= take;
        memcpy(out, s->pages + s->nr, take * sizeof(void *));
        stock_slot_add(s->slot, MB_STAT_STOCK, -(int64_t) take);
        stock_slot_commit(c, s);
}

/* Empty and disable every stock: the session is lost, and the daemon has
 * freed (or will free) every page this client held, stocked or not. */
static void stocks_disable(mb_client *c) {
        for (unsigned i = 0; i < c->ncpus; i++) {
                struct stock *s = client_stock_lock_cpu(c, i);

                s->nr = 0;
                s->limit = 0;
                stock_unlock(s);
        }
}

/* Take up to @n stocked pages from any CPU (the local drain_all_stock()).
 * Returns how many were taken. */
static size_t stocks_take_all(mb_client *c, void **out, size_t n) {
        size_t got = 0;
        unsigned first = cpu_current(c->rseq_offset, c->ncpus);

        for (unsigned k = 0; k < c->ncpus && got < n; k++) {
                unsigned cpu = (first + k) % c->ncpus;
                struct stock *s;
                uint32_t take;

                /* A racy peek spares locking (a membarrier in rseq mode)
                 * an empty stock; pages that arrive meanwhile stay there. */
                if (__atomic_load_n(&c->stocks[cpu].nr, __ATOMIC_RELAXED) == 0)
                        continue;
                s = client_stock_lock_cpu(c, cpu);
                take = (uint32_t) MB_MIN((size_t) s->nr, n - got);
                if (take > 0)
                        stock_take_locked(c, s, out + got, take);
                stock_unlock(s);
                got += take;
        }
        return got;
}

/* Take up to @n pages from the stock of this CPU only. */
static size_t stock_take_local(mb_client *c, void **out, size_t n) {
        struct stock *s = client_stock_lock(c);
        uint32_t take = (uint32_t) MB_MIN((size_t) s->nr, n);

        if (take > 0)
                stock_take_locked(c, s, out, take);
        stock_unlock(s);
        return take;
}

/* ---- the session ---- */

/*
 * Who reads the socket.  Exactly one thread at a time is "the reader"
 * (c->reading, under io_lock): it reads frames without holding any lock and
 * hands each to whom it concerns (client_dispatch_locked()): a reply to the
 * thread waiting for that seq (struct waiter, woken through io_cond), a
 * Reclaim or Drain to the request queue, an Event to the event queue.  By
 * default the library's thread is the reader whenever nobody else is; a
 * thread waiting for its reply becomes the reader itself when nobody reads
 * (the library's thread may be busy in a shrinker, or absent with
 * MB_CONNECT_NO_THREAD) and gives the role up as soon as its reply is in.
 *
 * Who answers Reclaim and Drain.  The library's thread, or with
 * MB_CONNECT_NO_THREAD the thread that read the request: mb_process(), or a
 * thread waiting for its own reply (the way an allocating task runs direct
 * reclaim in the kernel).  The answer takes stocked pages first, then calls
 * the shrinkers, and sends what they freed in one Uncharge{reply_to}; it
 * never waits for the daemon, so it is safe in any of those threads.
 */

/* A thread waiting for the reply to its request (client_call()). */
struct waiter {
        uint32_t seq;
        bool done;
        Mb__Msg *reply;
        struct waiter *next;
};

/* A Reclaim or Drain from the daemon, to be answered. */
struct daemon_request {
        uint32_t seq;
        uint64_t pages; /* UINT64_MAX: Drain */
};

/* While a thread answers a Reclaim, pages its shrinkers free that do not fit
 * the stock (the mb_page_free() slow path) join the answer instead of going
 * back on their own -- and never wait for the daemon. */
struct reclaim_ctx {
        mb_client *c;
        void **pages;
        size_t n, alloc;
};

static __thread struct reclaim_ctx *reclaim_ctx;

static int client_broken(const mb_client *c) {
        return __atomic_load_n(&c->broken, __ATOMIC_ACQUIRE);
}

static int client_lost(mb_client *c) {
        int err;

        if (c->forked) {
                mb_set_error("this membroker connection belongs to the parent process; "
                             "a child of fork() must connect anew");
                return -ECHILD;
        }
        pthread_mutex_lock(&c->io_lock);
        mb_set_error("the connection to membrokerd is lost: %s",
                     c->broken_reason ? c->broken_reason : "unknown reason");
        err = c->broken ? c->broken : -ECONNRESET;
        pthread_mutex_unlock(&c->io_lock);
        return err;
}

/* The session is over (io_lock held): remember why, empty the stocks, wake
 * every waiter.  Returns @err. */
static int client_break_locked(mb_client *c, int err, const char *reason) {
        if (c->broken == 0) {
                free(c->broken_reason);
                c->broken_reason = strdup(reason && *reason ? reason : "unknown reason");
                __atomic_store_n(&c->broken, err, __ATOMIC_RELEASE);
                stocks_disable(c);
                c->nrequests = 0;
                if (c->notify_fd >= 0)
                        (void) eventfd_write(c->notify_fd, 1);
                pthread_cond_broadcast(&c->io_cond);
        }
        return err;
}

/* The same, with this thread's mb_last_error() as the reason. */
static int client_break(mb_client *c, int err) {
        pthread_mutex_lock(&c->io_lock);
        err = client_break_locked(c, err, mb_last_error());
        pthread_mutex_unlock(&c->io_lock);
        return err;
}

static int client_protocol_error(mb_client *c, const char *what) {
        mb_set_error("protocol error: %s", what);
        return client_break(c, -EPROTO);
}

static void client_queue_event(mb_client *c, const char *name, uint64_t count) {
        struct pending_event *ev;
        char *copy = strdup(name);

        if (!copy)
                return;
        pthread_mutex_lock(&c->cb_lock);
        if (!c->event_fn) {
                pthread_mutex_unlock(&c->cb_lock);
                free(copy);
                return;
        }
        ev = realloc(c->events, (c->nevents + 1) * sizeof(*ev));
        if (!ev) {
                pthread_mutex_unlock(&c->cb_lock);
                free(copy);
                return;
        }
        c->events = ev;
        c->events[c->nevents++] = (struct pending_event) { .name = copy, .count = count };
        __atomic_store_n(&c->events_pending, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&c->cb_lock);
}

/* Call the event callback for queued events.  No library lock may be held. */
static void client_dispatch_events(mb_client *c) {
        struct pending_event *evs;
        size_t n;
        mb_event_fn fn;
        void *userdata;

        if (!__atomic_load_n(&c->events_pending, __ATOMIC_ACQUIRE))
                return;
        pthread_mutex_lock(&c->cb_lock);
        evs = TAKE_PTR(c->events);
        n = c->nevents;
        c->nevents = 0;
        __atomic_store_n(&c->events_pending, 0, __ATOMIC_RELAXED);
        fn = c->event_fn;
        userdata = c->event_userdata;
        pthread_mutex_unlock(&c->cb_lock);

        for (size_t i = 0; i < n; i++) {
                if (fn)
                        fn(c, evs[i].name, evs[i].count, userdata);
                free(evs[i].name);
        }
        free(evs);
}

static int cmp_ptr(const void *a, const void *b) {
        uintptr_t x = (uintptr_t) *(void *const *) a, y = (uintptr_t) *(void *const *) b;

        return x < y ? -1 : x > y;
}

static uint32_t client_next_seq(mb_client *c) {
        return __atomic_add_fetch(&c->next_seq, 1, __ATOMIC_RELAXED);
}

/*
 * Send one frame; frames of several threads never interleave.  The pages of
 * an Uncharge stop being ours to re-claim after a daemon restart as it goes
 * out (under send_lock, which a reconnection holds: reconnect.h).
 */
static int client_send(mb_client *c, const Mb__Msg *msg) {
        int r;

        pthread_mutex_lock(&c->send_lock);
        if (msg->body_case == MB__MSG__BODY_UNCHARGE && c->held.bits) {
                pthread_mutex_lock(&c->held_lock);
                for (size_t i = 0; i < msg->uncharge->n_extents; i++)
                        reconnect_held_clear(&c->held, msg->uncharge->extents[i]->start, msg->uncharge->extents[i]->count);
                pthread_mutex_unlock(&c->held_lock);
        }
        r = wire_conn_send(c->conn, msg);
        pthread_mutex_unlock(&c->send_lock);
        return r;
}

/* ---- surviving a daemon restart (reconnect.h) ---- */

/* The end of the connection without an Error: the daemon went away (a
 * restart).  Can this session be carried over? */
static bool client_can_reconnect(const mb_client *c, int err) {
        return err == -ECONNRESET && c->token != 0 && !c->forked && client_broken(c) == 0 && c->held.bits &&
               !c->closing;
}

/*
 * Connect again and re-claim every charged page (reconnect.h).  Called by
 * the reader that saw the end of the connection, with no lock held; holds
 * send_lock throughout, so that no Uncharge changes the held bitmap or goes
 * out meanwhile.  On success the session goes on with the same arena
 * mapping, a new connection and a new stats region, seeded with the old
 * slots so that the figures carry over; conn_gen moves on, so threads
 * waiting for a reply know their request was lost (client_call()).  Returns
 * 0, or the error that ends the session (with mb_set_error()).
 */
static int client_reconnect(mb_client *c) {
        struct reconnect_info info = {
                .socket_path = c->socket_path,
                .tenant = c->tenant,
                .client_name = program_invocation_short_name,
                .token = c->token,
                .arena_dev = c->arena_dev,
                .arena_ino = c->arena_ino,
                .timeout_sec = reconnect_timeout_sec(),
                .cancel = &c->closing,
        };
        struct epoll_event ev = { .events = EPOLLIN };
        struct mb_stats_region *stats, *old = c->stats;
        struct wire_conn *conn = NULL, *old_conn;
        Mb__Msg *msg = NULL;
        int stats_fd = -1, arena_fd = -1, r;

        pthread_mutex_lock(&c->send_lock);
        r = reconnect_session(&info, &c->held, &conn, &msg, &stats_fd, &arena_fd);
        if (r < 0)
                goto out;
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
                close(arena_fd);
                if (p == MAP_FAILED) {
                        close(stats_fd);
                        wire_conn_free(conn);
                        mb__msg__free_unpacked(msg, NULL);
                        mb_set_error("membrokerd came back with a different arena for tenant %s", c->tenant);
                        r = -ESTALE;
                        goto out;
                }
                c->arena_dev = st.st_dev;
                c->arena_ino = st.st_ino;
        }
        if (msg->welcome->stats_slots != c->ncpus) {
                close(stats_fd);
                wire_conn_free(conn);
                mb_set_error("membrokerd came back with %u stats slots instead of %u", msg->welcome->stats_slots,
                             c->ncpus);
                mb__msg__free_unpacked(msg, NULL);
                r = -EPROTO;
                goto out;
        }
        stats = mmap(NULL, c->stats_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, stats_fd, 0);
        close(stats_fd);
        if (stats == MAP_FAILED) {
                r = negative_errno();
                wire_conn_free(conn);
                mb__msg__free_unpacked(msg, NULL);
                mb_set_error("cannot map the new stats region: %s", strerror(-r));
                goto out;
        }
        /* Writers mark c->stats dirty under a stock lock: publish the new
         * region first, unmap the old one only after every lock was taken
         * once (stock_stat_dirty()). */
        __atomic_store_n(&c->stats, stats, __ATOMIC_RELAXED);
        /* Every CPU's counters move to the new region, under its lock. */
        for (unsigned i = 0; i < c->ncpus; i++) {
                struct stock *s = client_stock_lock_cpu(c, i);

                stats->slot[i] = old->slot[i];
                s->slot = &stats->slot[i];
                stock_unlock(s);
        }
        /* The new region's daemon learns of changes from its dirty word. */
        mb_stats_region_writer_attach(stats);
        munmap(old, c->stats_bytes);

        pthread_mutex_lock(&c->io_lock);
        old_conn = c->conn;
        (void) epoll_ctl(c->poll_fd, EPOLL_CTL_DEL, old_conn->fd, NULL);
        c->conn = conn;
        (void) epoll_ctl(c->poll_fd, EPOLL_CTL_ADD, conn->fd, &ev);
        c->conn_gen++;
        c->client_id = msg->welcome->client_id;
        pthread_cond_broadcast(&c->io_cond);
        pthread_mutex_unlock(&c->io_lock);
        wire_conn_free(old_conn);
        mb__msg__free_unpacked(msg, NULL);
        r = 0;
out:
        pthread_mutex_unlock(&c->send_lock);
        return r;
}

/* An Ack for an Uncharge lost with the previous daemon: its pages are not
 * re-claimed, so the next daemon returns them anyway. */
static int client_lost_ack(uint32_t seq, Mb__Msg **ret) {
        Mb__Msg m = MB__MSG__INIT;
        Mb__Ack ack = MB__ACK__INIT;
        uint8_t buf[64];
        size_t n;

        ack.seq = seq;
        m.body_case = MB__MSG__BODY_ACK;
        m.ack = &ack;
        n = mb__msg__pack(&m, buf);
        *ret = mb__msg__unpack(NULL, n, buf);
        return *ret ? 0 : -ENOMEM;
}

/* The reader's read failed with @r (the reader role still ours, no lock
 * held): carry the session over to a restarted daemon when it can be.
 * Returns 0 when the session goes on, else the error to end it with. */
static int client_read_failed(mb_client *c, int r) {
        if (!client_can_reconnect(c, r))
                return r;
        return client_reconnect(c);
}

static int client_call(mb_client *c, const Mb__Msg *req, uint32_t seq, Mb__Msg **ret);

/*
 * Send Uncharge frames for @pages (sorted in place, coalesced into extents,
 * at most UNCHARGE_MAX_EXTENTS per frame).  With @wait, wait for each Ack
 * (conn_lock held: the application's slow paths); without, the Acks are
 * dropped when they arrive (any thread).  With @has_reply_to the last frame
 * answers the daemon's request @reply_to (always at least one frame then,
 * possibly without extents).
 */
static int client_uncharge_locked(mb_client *c, void **pages, size_t n, Mb__UnchargeReason reason,
                                  bool wait, bool has_reply_to, uint32_t reply_to) {
        _cleanup_(freep) Mb__Extent *ext = NULL;
        _cleanup_(freep) Mb__Extent **extp = NULL;
        size_t i = 0;
        int r;

        if (n == 0 && !has_reply_to)
                return 0;
        ext = calloc(UNCHARGE_MAX_EXTENTS, sizeof(*ext));
        extp = calloc(UNCHARGE_MAX_EXTENTS, sizeof(*extp));
        if (!ext || !extp)
                return -ENOMEM;
        if (n > 0)
                qsort(pages, n, sizeof(void *), cmp_ptr);

        do {
                Mb__Uncharge un = MB__UNCHARGE__INIT;
                Mb__Msg msg = MB__MSG__INIT;
                size_t next = 0;
                uint64_t npages = 0;
                Mb__Msg *reply = NULL;

                while (i < n && next < UNCHARGE_MAX_EXTENTS) {
                        uint64_t idx = (uint64_t) ((uint8_t *) pages[i] - c->base) >> c->page_shift;

                        if (next > 0 && ext[next - 1].start + ext[next - 1].count == idx &&
                            ext[next - 1].count < UINT32_MAX)
                                ext[next - 1].count++;
                        else {
                                mb__extent__init(&ext[next]);
                                ext[next].start = idx;
                                ext[next].count = 1;
                                extp[next] = &ext[next];
                                next++;
                        }
                        npages++;
                        i++;
                }

                un.seq = client_next_seq(c);
                un.n_extents = next;
                un.extents = extp;
                un.has_reason = true;
                un.reason = reason;
                if (has_reply_to && i == n) {
                        un.has_reply_to = true;
                        un.reply_to = reply_to;
                }
                msg.body_case = MB__MSG__BODY_UNCHARGE;
                msg.uncharge = &un;

                if (!wait) {
                        r = client_send(c, &msg);
                        /* Lost with a daemon that restarted: these pages are
                         * not re-claimed, so it returns them anyway. */
                        if (r < 0 && !client_can_reconnect(c, r))
                                return client_break(c, r);
                        continue;
                }
                r = client_call(c, &msg, un.seq, &reply);
                if (r < 0)
                        return r;
                if (reply->body_case != MB__MSG__BODY_ACK) {
                        mb__msg__free_unpacked(reply, NULL);
                        return client_protocol_error(c, "an Uncharge was not answered with an Ack");
                }
                mb__msg__free_unpacked(reply, NULL);
        } while (i < n);
        return 0;
}

static bool reply_seq(const Mb__Msg *m, uint32_t *ret) {
        switch (m->body_case) {
        case MB__MSG__BODY_GRANT:
                *ret = m->grant->seq;
                return true;
        case MB__MSG__BODY_ACK:
                *ret = m->ack->seq;
                return true;
        case MB__MSG__BODY_ERROR:
                *ret = m->error->seq;
                return m->error->has_seq;
        default:
                return false;
        }
}

static void client_queue_request(mb_client *c, uint32_t seq, uint64_t pages) {
        if (c->nrequests == c->requests_alloc) {
                size_t a = MB_MAX(c->requests_alloc * 2, (size_t) 4);
                struct daemon_request *v = realloc(c->requests, a * sizeof(*v));

                if (!v) {
                        /* Unanswered, the daemon skips us after its timeout. */
                        return;
                }
                c->requests = v;
                c->requests_alloc = a;
        }
        c->requests[c->nrequests++] = (struct daemon_request) { .seq = seq, .pages = pages };
}

/* Hand one frame from the daemon to whom it concerns.  io_lock held; takes
 * @m. */
static void client_dispatch_locked(mb_client *c, Mb__Msg *m) {
        uint32_t seq;

        switch (m->body_case) {
        case MB__MSG__BODY_GRANT:
        case MB__MSG__BODY_ACK:
        case MB__MSG__BODY_ERROR:
                if (reply_seq(m, &seq))
                        for (struct waiter *w = c->waiters; w; w = w->next)
                                if (!w->done && w->seq == seq) {
                                        if (m->body_case == MB__MSG__BODY_GRANT && c->held.bits) {
                                                /* Ours to re-claim after a restart from the
                                                 * moment they arrive (reconnect.h). */
                                                pthread_mutex_lock(&c->held_lock);
                                                for (size_t i = 0; i < m->grant->n_extents; i++)
                                                        reconnect_held_set(&c->held, m->grant->extents[i]->start,
                                                                    m->grant->extents[i]->count);
                                                pthread_mutex_unlock(&c->held_lock);
                                        }
                                        w->reply = m;
                                        w->done = true;
                                        pthread_cond_broadcast(&c->io_cond);
                                        return;
                                }
                if (m->body_case == MB__MSG__BODY_ACK)
                        break; /* of an Uncharge nobody waits for */
                if (m->body_case == MB__MSG__BODY_ERROR)
                        /* Not the reply to a request anybody waits for:
                         * fatal, the daemon closes the connection after it. */
                        client_break_locked(c, m->error->code > 0 ? -m->error->code : -EPROTO, m->error->reason);
                else
                        client_break_locked(c, -EPROTO, "protocol error: a Grant for no request");
                break;
        case MB__MSG__BODY_RECLAIM:
                client_queue_request(c, m->reclaim->seq, m->reclaim->pages);
                pthread_cond_broadcast(&c->io_cond);
                break;
        case MB__MSG__BODY_DRAIN:
                client_queue_request(c, m->drain->seq, UINT64_MAX);
                pthread_cond_broadcast(&c->io_cond);
                break;
        case MB__MSG__BODY_EVENT:
                client_queue_event(c, m->event->event, m->event->count);
                pthread_cond_broadcast(&c->io_cond);
                break;
        default: {
                char what[128];

                snprintf(what, sizeof(what), "protocol error: unexpected %s message from membrokerd",
                         wire_msg_name(m));
                client_break_locked(c, -EPROTO, what);
        }
        }
        mb__msg__free_unpacked(m, NULL);
}

/*
 * Be the reader (c->reading set by the caller, io_lock not held): dispatch
 * the frames that arrived.  With @until, stop right after the frame that
 * completes that waiter, leaving the rest for the next reader.  With
 * @block, wait until at least one frame came (and with @wake, return early
 * when c->wake_fd is readable).  Returns the number of frames, or a
 * negative errno when the session is lost (mb_last_error() says why).
 */
static int client_read(mb_client *c, bool block, bool wake, const struct waiter *until) {
        int n = 0;

        for (;;) {
                Mb__Msg *m;
                bool done;
                int r;

                r = wire_conn_recv(c->conn, false, &m);
                if (r == -EAGAIN) {
                        struct pollfd p[2] = {
                                { .fd = c->conn->fd, .events = POLLIN },
                                { .fd = wake ? c->wake_fd : -1, .events = POLLIN },
                        };

                        if (!block || n > 0)
                                return n;
                        if (poll(p, 2, -1) < 0 && errno != EINTR) {
                                r = negative_errno();
                                mb_set_error("cannot wait for membrokerd: %s", strerror(-r));
                                return r;
                        }
                        if (p[1].revents) {
                                eventfd_t v;

                                (void) eventfd_read(c->wake_fd, &v);
                                return n;
                        }
                        continue;
                }
                if (r < 0)
                        return r;
                if (c->conn->nfds > 0)
                        wire_conn_close_fds(c->conn); /* only the Welcome carries descriptors */

                pthread_mutex_lock(&c->io_lock);
                client_dispatch_locked(c, m);
                done = until && until->done;
                pthread_mutex_unlock(&c->io_lock);
                n++;
                if (done)
                        return n;
        }
}

/* The reader is done (io_lock held): let the next one in, and with
 * MB_CONNECT_NO_THREAD make mb_get_fd() readable while a whole frame or a
 * request waits, since the socket alone would not say so. */
static void client_reader_done_locked(mb_client *c) {
        if (!c->thread_started && c->notify_fd >= 0 && (wire_conn_has_frame(c->conn) || c->nrequests > 0))
                (void) eventfd_write(c->notify_fd, 1);
        c->reading = false;
        pthread_cond_broadcast(&c->io_cond);
}

static void client_answer(mb_client *c, const struct daemon_request *rq);

/* Answer the queued daemon requests, in order.  No lock held. */
static void client_run_requests(mb_client *c) {
        for (;;) {
                struct daemon_request rq;

                pthread_mutex_lock(&c->io_lock);
                if (c->nrequests == 0 || c->broken) {
                        pthread_mutex_unlock(&c->io_lock);
                        return;
                }
                rq = c->requests[0];
                memmove(c->requests, c->requests + 1, (c->nrequests - 1) * sizeof(*c->requests));
                c->nrequests--;
                pthread_mutex_unlock(&c->io_lock);
                client_answer(c, &rq);
        }
}

static void waiter_unlink_locked(mb_client *c, struct waiter *w) {
        for (struct waiter **p = &c->waiters; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        return;
                }
}

/*
 * Send @req and wait for the reply carrying @seq.  Returns 0 and *@ret (a
 * Grant or an Ack), or -errno: an Error reply gives its code and reason
 * (ENOMEM, the only one after which the session goes on; any other ends
 * it, as the daemon closes).  When the daemon restarts meanwhile and the
 * session is carried over (reconnect.h), a lost Charge is sent again (pages
 * it may have been granted are not re-claimed, so the daemon returns them)
 * and a lost Uncharge is done, for the same reason.  conn_lock held (the
 * application's slow paths).
 */
static int client_call(mb_client *c, const Mb__Msg *req, uint32_t seq, Mb__Msg **ret) {
        struct waiter w = { .seq = seq };
        uint64_t gen;
        Mb__Msg *m;
        int r;

        pthread_mutex_lock(&c->io_lock);
        if (c->broken) {
                pthread_mutex_unlock(&c->io_lock);
                return client_lost(c);
        }
        /* Registered before sending: the reply cannot come too early. */
        w.next = c->waiters;
        c->waiters = &w;
resend:
        gen = c->conn_gen;
        pthread_mutex_unlock(&c->io_lock);

        r = client_send(c, req);

        pthread_mutex_lock(&c->io_lock);
        if (r < 0 && !client_can_reconnect(c, r)) {
                char reason[ERROR_MESSAGE_BYTES];
                struct timespec deadline;

                waiter_unlink_locked(c, &w);
                snprintf(reason, sizeof(reason), "%s", mb_last_error());
                /* The daemon may have said why before it closed. */
                if (!c->reading) {
                        c->reading = true;
                        pthread_mutex_unlock(&c->io_lock);
                        (void) client_read(c, false, false, NULL);
                        pthread_mutex_lock(&c->io_lock);
                        client_reader_done_locked(c);
                } else {
                        clock_gettime(CLOCK_MONOTONIC, &deadline);
                        deadline.tv_sec += 1;
                        while (!c->broken && pthread_cond_timedwait(&c->io_cond, &c->io_lock, &deadline) == 0)
                                ;
                }
                client_break_locked(c, r, reason);
                mb_set_error("%s", c->broken_reason);
                r = c->broken;
                pthread_mutex_unlock(&c->io_lock);
                return r;
        }
        /* A failed send on a connection that can be carried over: the
         * reader finds its end, reconnects, and conn_gen moves on. */

        while (!w.done && !c->broken) {
                if (c->conn_gen != gen) {
                        /* Lost with the daemon that went away. */
                        if (req->body_case == MB__MSG__BODY_UNCHARGE) {
                                waiter_unlink_locked(c, &w);
                                pthread_mutex_unlock(&c->io_lock);
                                return client_lost_ack(seq, ret);
                        }
                        goto resend;
                }
                if (c->reading) {
                        pthread_cond_wait(&c->io_cond, &c->io_lock);
                        continue;
                }
                c->reading = true;
                pthread_mutex_unlock(&c->io_lock);
                r = client_read(c, true, false, &w);
                if (r < 0)
                        r = client_read_failed(c, r);
                pthread_mutex_lock(&c->io_lock);
                if (r < 0)
                        client_break_locked(c, r, mb_last_error());
                client_reader_done_locked(c);
                if (!c->thread_started && c->nrequests > 0 && !w.done && !c->broken) {
                        /* Nobody else will answer: direct reclaim. */
                        pthread_mutex_unlock(&c->io_lock);
                        client_run_requests(c);
                        pthread_mutex_lock(&c->io_lock);
                }
        }
        waiter_unlink_locked(c, &w);
        if (!w.done) {
                /* The session broke while we waited: its reason is ours. */
                mb_set_error("%s", c->broken_reason ? c->broken_reason : "the connection to membrokerd is lost");
                r = c->broken;
                pthread_mutex_unlock(&c->io_lock);
                return r;
        }
        pthread_mutex_unlock(&c->io_lock);

        m = w.reply;
        if (m->body_case == MB__MSG__BODY_ERROR) {
                int code = m->error->code > 0 ? m->error->code : EPROTO;

                mb_set_error("%s", m->error->reason);
                mb__msg__free_unpacked(m, NULL);
                return code == ENOMEM ? -ENOMEM : client_break(c, -code);
        }
        *ret = m;
        return 0;
}

/* ---- answering Reclaim and Drain ---- */

static int reclaim_ctx_add(struct reclaim_ctx *ctx, void **pages, size_t n) {
        if (ctx->n + n > ctx->alloc) {
                size_t a = MB_MAX(ctx->alloc * 2, ctx->n + n);
                void **v = realloc(ctx->pages, MB_MAX(a, (size_t) 64) * sizeof(void *));

                if (!v)
                        return -ENOMEM;
                ctx->pages = v;
                ctx->alloc = MB_MAX(a, (size_t) 64);
        }
        memcpy(ctx->pages + ctx->n, pages, n * sizeof(void *));
        ctx->n += n;
        return 0;
}

/*
 * Ask the shrinkers for @want pages, each in proportion to what its count()
 * says it could free (do_shrink_slab()'s share of the scan).  Returns how
 * many they freed.  The shrinkers run with no library lock held except
 * shrinker_lock for reading, so they may free pages (not allocate them).
 */
static unsigned long client_shrink(mb_client *c, unsigned long want) {
        unsigned long total = 0, freed = 0;
        _cleanup_(freep) unsigned long *counts = NULL;

        pthread_rwlock_rdlock(&c->shrinker_lock);
        if (c->nshrinkers == 0)
                goto out;
        counts = calloc(c->nshrinkers, sizeof(*counts));
        if (!counts)
                goto out;
        for (size_t i = 0; i < c->nshrinkers; i++) {
                counts[i] = c->shrinkers[i]->count(c->shrinkers[i]->userdata);
                total += counts[i];
        }
        for (size_t i = 0; i < c->nshrinkers && total > 0 && freed < want; i++) {
                unsigned long nr;

                if (counts[i] == 0)
                        continue;
                /* Rounded up, so that a small request still reaches a
                 * shrinker with little to give. */
                nr = (unsigned long) (((unsigned __int128) want * counts[i] + total - 1) / total);
                nr = MB_MIN(nr, MB_MIN(counts[i], want - freed));
                freed += c->shrinkers[i]->scan(c->shrinkers[i]->userdata, nr);
        }
out:
        pthread_rwlock_unlock(&c->shrinker_lock);
        return freed;
}

/*
 * Answer one Reclaim of @rq->pages (or Drain, pages UINT64_MAX): unused
 * stocked pages first (from every CPU, like drain_all_stock()), then the
 * shrinkers; what they freed goes back with the rest in one
 * Uncharge{reply_to}, never more than asked (an excess goes back on its
 * own).  No library lock held; never waits for the daemon.
 */
static void client_answer(mb_client *c, const struct daemon_request *rq) {
        struct reclaim_ctx ctx = { .c = c }, *prev = reclaim_ctx;
        bool drain = rq->pages == UINT64_MAX;
        size_t room = (size_t) c->ncpus * (2u * c->batch_cap + 1u);
        size_t want = drain ? room : (size_t) MB_MIN(rq->pages, (uint64_t) SIZE_MAX / 2);
        size_t cap = MB_MIN(want, room), got = 0, nanswer;
        _cleanup_(freep) void **buf = NULL;
        Mb__UnchargeReason reason = drain ? MB__UNCHARGE_REASON__UNCHARGE_DRAIN : MB__UNCHARGE_REASON__UNCHARGE_RECLAIM;

        if (client_broken(c))
                return;
        buf = malloc(MB_MAX(2 * cap, (size_t) 1) * sizeof(void *));
        if (buf)
                got = stocks_take_all(c, buf, cap);
        if (!drain && buf && got < want) {
                reclaim_ctx = &ctx;
                (void) client_shrink(c, want - got);
                reclaim_ctx = prev;
                /* What the shrinkers freed went to the stocks (or to ctx
                 * when a stock was full). */
                if (ctx.n < want - got)
                        got += stocks_take_all(c, buf + got, MB_MIN(want - got - ctx.n, 2 * cap - got));
        }
        nanswer = MB_MIN(ctx.n, want - got);
        if (nanswer > 0) {
                void **all = malloc((got + nanswer) * sizeof(void *));

                if (all) {
                        memcpy(all, buf, got * sizeof(void *));
                        memcpy(all + got, ctx.pages, nanswer * sizeof(void *));
                        free(buf);
                        buf = all;
                        got += nanswer;
                        memmove(ctx.pages, ctx.pages + nanswer, (ctx.n - nanswer) * sizeof(void *));
                        ctx.n -= nanswer;
                }
        }
        (void) client_uncharge_locked(c, buf, got, reason, false, true, rq->seq);
        /* Shrinkers freed more than asked, past the stocks: home too. */
        if (ctx.n > 0)
                (void) client_uncharge_locked(c, ctx.pages, ctx.n, MB__UNCHARGE_REASON__UNCHARGE_FREE, false, false, 0);
        free(ctx.pages);
}

/* The library's thread (unless MB_CONNECT_NO_THREAD): reads the socket
 * whenever no other thread does, answers Reclaim and Drain, calls the event
 * callback. */
static void *client_thread(void *userdata) {
        mb_client *c = userdata;

        pthread_mutex_lock(&c->io_lock);
        c->thread_running = true;
        pthread_cond_broadcast(&c->io_cond);
        while (!c->closing) {
                int r;

                if (c->nrequests > 0 || __atomic_load_n(&c->events_pending, __ATOMIC_ACQUIRE)) {
                        pthread_mutex_unlock(&c->io_lock);
                        client_run_requests(c);
                        client_dispatch_events(c);
                        pthread_mutex_lock(&c->io_lock);
                        continue;
                }
                if (c->reading || c->broken) {
                        pthread_cond_wait(&c->io_cond, &c->io_lock);
                        continue;
                }
                c->reading = true;
                pthread_mutex_unlock(&c->io_lock);
                r = client_read(c, true, true, NULL);
                if (r < 0)
                        r = client_read_failed(c, r);
                pthread_mutex_lock(&c->io_lock);
                if (r < 0)
                        client_break_locked(c, r, mb_last_error());
                client_reader_done_locked(c);
        }
        pthread_mutex_unlock(&c->io_lock);
        return NULL;
}

/*
 * The daemon told a new batch (Grant.charge_batch): a limit appeared on a
 * tenant that had none, whose clients charged the larger seed-003 batch,
 * or ChargeBatch= changed.  The stocks keep their room (2 * batch_cap + 1
 * pages), so a batch can grow up to what the Welcome allowed
 * (charge_batch_max, else its batch) and no further.  A
 * smaller batch trims every stock to its new limit at once, the excess
 * going back to the daemon, so that the precision bound (ncpus * 2 *
 * charge_batch pages) holds from now on, not only after the stocks happen
 * to overflow.  conn_lock held.
 */
static int client_adopt_batch_locked(mb_client *c, uint32_t batch) {
        _cleanup_(freep) void **back = NULL;
        size_t n = 0;

        batch = MB_MAX(1u, MB_MIN(batch, c->batch_cap));
        if (batch == c->charge_batch)
                return 0;
        back = malloc((size_t) c->ncpus * (2u * c->batch_cap + 1u) * sizeof(void *));
        if (!back)
                return -ENOMEM; /* keep the old batch; the daemon does not tell again */
        __atomic_store_n(&c->charge_batch, batch, __ATOMIC_RELAXED);
        for (unsigned i = 0; i < c->ncpus; i++) {
                struct stock *s = client_stock_lock_cpu(c, i);

                /* limit 0: disabled (fork, lost session): stays so */
                if (s->limit != 0) {
                        s->limit = 2u * batch;
                        if (s->nr > s->limit) {
                                uint32_t take = s->nr - s->limit;

                                stock_take_locked(c, s, back + n, take);
                                n += take;
                        }
                }
                stock_unlock(s);
        }
        return client_uncharge_locked(c, back, n, MB__UNCHARGE_REASON__UNCHARGE_FREE, true, false, 0);
}

/* Charge @n (<= CHARGE_MAX_PAGES) pages, or only @need (<= @n) of them
 * when @n do not fit under a limit (Charge.need); their addresses into
 * @out, their number into @ret_got.  -ENOMEM at a limit (the session goes
 * on).  conn_lock held. */
static int client_charge_locked(mb_client *c, uint32_t n, uint32_t need, void **out, size_t *ret_got) {
        Mb__Charge ch = MB__CHARGE__INIT;
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Msg *reply = NULL;
        uint32_t batch;
        size_t got = 0;
        int r;

        ch.seq = ++c->next_seq;
        ch.pages = n;
        if (need < n) {
                ch.has_need = true;
                ch.need = need;
        }
        msg.body_case = MB__MSG__BODY_CHARGE;
        msg.charge = &ch;

        r = client_call(c, &msg, ch.seq, &reply);
        if (r < 0)
                return r;
        if (reply->body_case != MB__MSG__BODY_GRANT) {
                mb__msg__free_unpacked(reply, NULL);
                return client_protocol_error(c, "a Charge was not answered with a Grant");
        }
        for (size_t i = 0; i < reply->grant->n_extents; i++) {
                const Mb__Extent *e = reply->grant->extents[i];

                if (e->start >= c->arena_pages || e->count > c->arena_pages - e->start ||
                    e->count > n - got) {
                        mb__msg__free_unpacked(reply, NULL);
                        return client_protocol_error(c, "a Grant names pages outside the request or the arena");
                }
                for (uint32_t k = 0; k < e->count; k++)
                        out[got++] = c->base + ((e->start + k) << c->page_shift);
        }
        batch = reply->grant->has_charge_batch ? reply->grant->charge_batch : 0;
        mb__msg__free_unpacked(reply, NULL);
        if (got != n && got != need)
                return client_protocol_error(c, "a Grant carries fewer pages than charged");
        *ret_got = got;
        if (batch > 0)
                (void) client_adopt_batch_locked(c, batch);
        return 0;
}

/*
 * Give @n pages to this CPU's stock.  When the stock would pass its limit
 * (2 * charge_batch), whole batches go back to the daemon until it does not,
 * the coldest pages first (the bottom of the stock, then the oldest of
 * @pages): for one page that is the one Uncharge of charge_batch pages of
 * design.md §3, as the kernel's refill_stock() drains an overfull stock.
 * @freed of the pages come from the application (counted as pgfree).
 * conn_lock held.
 */
static int client_stock_put_locked(mb_client *c, void **pages, size_t n, size_t freed) {
        _cleanup_(freep) void **back = NULL;
        size_t total, nback = 0;
        struct stock *s;

        if (n == 0)
                return 0;
        /* nr <= limit, so at most n rounded up to a batch goes back; no
         * allocation under the stock lock. */
        back = malloc((n + c->charge_batch) * sizeof(void *));
        if (!back)
                return -ENOMEM;

        s = client_stock_lock(c);
        if (s->limit == 0) {
                /* The session broke while we were on our way: nothing to keep. */
                stock_unlock(s);
                return client_lost(c);
        }
        total = s->nr + n;
        if (total > s->limit)
                nback = DIV_ROUND_UP(total - s->limit, c->charge_batch) * c->charge_batch;
        if (nback <= s->nr) {
                memcpy(back, s->pages, nback * sizeof(void *));
                memmove(s->pages, s->pages + nback, (s->nr - nback) * sizeof(void *));
                memcpy(s->pages + s->nr - nback, pages, n * sizeof(void *));
        } else {
                size_t from_new = nback - s->nr;

                memcpy(back, s->pages, s->nr * sizeof(void *));
                memcpy(back + s->nr, pages, from_new * sizeof(void *));
                memcpy(s->pages, pages + from_new, (n - from_new) * sizeof(void *));
        }
        s->nr = (uint32_t) (total - nback);
        stock_slot_add(s->slot, MB_STAT_STOCK, (int64_t) n - (int64_t) nback);
        if (freed > 0) {
                stock_slot_add(s->slot, MB_STAT_PAGES, -(int64_t) freed);
                stock_slot_add(s->slot, MB_STAT_PGFREE, (int64_t) freed);
        }
        stock_slot_commit(c, s);
        stock_unlock(s);

        return client_uncharge_locked(c, back, nback, MB__UNCHARGE_REASON__UNCHARGE_FREE, true, false, 0);
}

/*
 * Charge @n (<= CHARGE_MAX_PAGES) pages for the application into @out.
 * Charges a whole batch when @n is smaller and stocks the rest; at a limit
 * the daemon charges exactly @n instead (Charge.need), as try_charge()
 * falls back from MEMCG_CHARGE_BATCH to nr_pages before counting `max`.
 * conn_lock held.
 */
static int client_charge_batched_locked(mb_client *c, void **out, size_t n) {
        _cleanup_(freep) void **buf = NULL;
        size_t want = MB_MAX(n, (size_t) c->charge_batch), got = 0;
        int r;

        if (want == n)
                return client_charge_locked(c, (uint32_t) n, (uint32_t) n, out, &got);
        buf = malloc(want * sizeof(void *));
        if (!buf)
                return -ENOMEM;
        r = client_charge_locked(c, (uint32_t) want, (uint32_t) n, buf, &got);
        if (r < 0)
                return r;
        memcpy(out, buf, n * sizeof(void *));
        /* The extra pages are ours whatever happens next. */
        if (got > n)
                (void) client_stock_put_locked(c, buf + n, got - n, 0);
        return 0;
}

/*
 * The slow path of every allocation: @n pages into @out, all or nothing.
 * Takes what this CPU's stock has (another thread may have refilled it),
 * charges the rest in batches, and at a limit takes the other CPUs' stocks
 * before failing (drain_all_stock() before the OOM path).
 */
static int client_alloc_slow(mb_client *c, void **out, size_t n) {
        size_t got = 0;
        int r = 0;

        if (c->forked)
                return client_lost(c);
        if (reclaim_ctx && reclaim_ctx->c == c) {
                /* conn_lock may be ours already (direct reclaim). */
                mb_set_error("a shrinker must not allocate broker pages beyond the stock");
                return -EDEADLK;
        }

        pthread_mutex_lock(&c->conn_lock);
        if (client_broken(c)) {
                r = client_lost(c);
                goto out;
        }
        got = stock_take_local(c, out, n);
        while (got < n) {
                size_t chunk = MB_MIN(n - got, (size_t) CHARGE_MAX_PAGES), k;

                r = client_charge_batched_locked(c, out + got, chunk);
                if (r == 0) {
                        got += chunk;
                        continue;
                }
                if (r != -ENOMEM)
                        break;
                k = stocks_take_all(c, out + got, n - got);
                if (k == 0)
                        break;
                got += k;
                r = 0;
        }
        if (got < n) {
                char reason[ERROR_MESSAGE_BYTES];

                /* All or nothing: what we took goes back, the reason stays. */
                snprintf(reason, sizeof(reason), "%s", mb_last_error());
                if (!client_broken(c))
                        (void) client_stock_put_locked(c, out, got, 0);
                mb_set_error("%s", reason);
                if (r == 0)
                        r = -ENOMEM;
        } else {
                struct stock *s = client_stock_lock(c);

                stock_slot_add(s->slot, MB_STAT_PAGES, (int64_t) n);
                stock_slot_add(s->slot, MB_STAT_PGALLOC, (int64_t) n);
                stock_slot_commit(c, s);
                stock_unlock(s);
        }
out:
        pthread_mutex_unlock(&c->conn_lock);
        client_dispatch_events(c);
        return r;
}

/* The slow path of free: the stock is full (or disabled). */
static int client_free_slow(mb_client *c, void **pages, size_t n) {
        int r;

        if (c->forked)
                return client_lost(c);
        if (reclaim_ctx && reclaim_ctx->c == c) {
                /* A shrinker frees while this thread answers a Reclaim: the
                 * pages join the answer (client_answer()). */
                struct stock *s;

                if (reclaim_ctx_add(reclaim_ctx, pages, n) < 0)
                        return client_uncharge_locked(c, pages, n, MB__UNCHARGE_REASON__UNCHARGE_FREE, false, false,
                                                      0);
                s = client_stock_lock(c);
                stock_slot_add(s->slot, MB_STAT_PAGES, -(int64_t) n);
                stock_slot_add(s->slot, MB_STAT_PGFREE, (int64_t) n);
                stock_slot_commit(c, s);
                stock_unlock(s);
                return 0;
        }
        pthread_mutex_lock(&c->conn_lock);
        if (client_broken(c))
                r = client_lost(c);
        else
                r = client_stock_put_locked(c, pages, n, n);
        pthread_mutex_unlock(&c->conn_lock);
        client_dispatch_events(c);
        return r;
}

static __attribute__((noinline)) void *page_alloc_slow(mb_client *c) {
        void *p;
        int r;

        r = client_alloc_slow(c, &p, 1);
        if (r < 0) {
                errno = -r;
                return NULL;
        }
        return p;
}

static __attribute__((noinline)) int page_free_slow(mb_client *c, void *page) {
        return client_free_slow(c, &page, 1);
}

/* ---- the fast paths ---- */

void *mb_page_alloc(mb_client *c) {
        struct stock *s = client_stock_lock(c);
        uint32_t nr = s->nr;

        if (_likely_(nr > 0)) {
                void *p = s->pages[nr - 1];

                stock_use(c, s, 1);
                stock_unlock_nr(s, nr - 1);
                return p;
        }
        stock_unlock(s);
        return page_alloc_slow(c);
}

int mb_page_alloc_bulk(mb_client *c, void **pages, size_t n) {
        struct stock *s;

        if (n == 0)
                return 0;
        if (!pages) {
                mb_set_error("mb_page_alloc_bulk: no array");
                return -EINVAL;
        }
        s = client_stock_lock(c);
        if (_likely_(s->nr >= n)) {
                s->nr -= (uint32_t) n;
                memcpy(pages, s->pages + s->nr, n * sizeof(void *));
                stock_use(c, s, (int64_t) n);
                stock_unlock(s);
                return 0;
        }
        stock_unlock(s);
        return client_alloc_slow(c, pages, n);
}

static inline bool client_page_valid(const mb_client *c, const void *page) {
        uintptr_t off = (uintptr_t) page - (uintptr_t) c->base;

        return off < c->arena_bytes && (off & c->page_mask) == 0;
}

static int client_bad_page(const mb_client *c, const void *page) {
        mb_set_error("%p is not a page of the arena of tenant %s", page, c->tenant);
        return -EINVAL;
}

int mb_page_free(mb_client *c, void *page) {
        struct stock *s;
        uint32_t nr;

        if (_unlikely_(!client_page_valid(c, page)))
                return client_bad_page(c, page);
        s = client_stock_lock(c);
        nr = s->nr;
        if (_likely_(nr < s->limit)) {
                s->pages[nr] = page;
                stock_use(c, s, -1);
                stock_unlock_nr(s, nr + 1);
                return 0;
        }
        stock_unlock(s);
        return page_free_slow(c, page);
}

int mb_page_free_bulk(mb_client *c, void **pages, size_t n) {
        struct stock *s;
        size_t push;

        if (n == 0)
                return 0;
        if (!pages) {
                mb_set_error("mb_page_free_bulk: no array");
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++)
                if (!client_page_valid(c, pages[i]))
                        return client_bad_page(c, pages[i]);

        s = client_stock_lock(c);
        push = MB_MIN(n, (size_t) (s->nr < s->limit ? s->limit - s->nr : 0));
        if (push > 0) {
                memcpy(s->pages + s->nr, pages, push * sizeof(void *));
                s->nr += (uint32_t) push;
                stock_use(c, s, -(int64_t) push);
        }
        stock_unlock(s);
        if (_likely_(push == n))
                return 0;
        return client_free_slow(c, pages + push, n - push);
}

/* ---- connecting ---- */

static int client_map(mb_client *c, const Mb__Welcome *w, int arena_fd, int stats_fd) {
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

static int client_setup_stocks(mb_client *c) {
        size_t cap = 2u * (size_t) c->batch_cap + 1u;
        /* Each CPU's page array starts on a cache line of its own. */
        size_t stride = DIV_ROUND_UP(cap * sizeof(void *), MB_CACHELINE_BYTES) * MB_CACHELINE_BYTES;

        c->stocks = aligned_alloc(MB_CACHELINE_BYTES, c->ncpus * sizeof(struct stock));
        c->stock_pages = aligned_alloc(MB_CACHELINE_BYTES, c->ncpus * stride);
        if (!c->stocks || !c->stock_pages)
                return -ENOMEM;
        for (unsigned i = 0; i < c->ncpus; i++)
                c->stocks[i] = (struct stock) {
                        .limit = 2u * c->charge_batch,
                        .cap = (uint32_t) cap,
                        .pages = (void **) ((uint8_t *) c->stock_pages + i * stride),
                        .slot = &c->stats->slot[i],
                };
        return 0;
}

static int client_welcome(mb_client *c, const Mb__Welcome *w) {
        int fds[2];
        int r;

        r = wire_conn_take_fds(c->conn, fds, 2);
        if (r < 0) {
                mb_set_error("the Welcome of membrokerd did not carry the arena and stats descriptors");
                return -EPROTO;
        }
        if (w->page_size < 64 || w->page_size > (UINT64_C(1) << 30) || (w->page_size & (w->page_size - 1)) ||
            w->charge_batch == 0 || w->charge_batch > CHARGE_MAX_PAGES || w->arena_pages == 0 ||
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
                                       w->charge_batch_max <= CHARGE_MAX_PAGES
                               ? w->charge_batch_max
                               : w->charge_batch;
        c->arena_pages = w->arena_pages;
        c->arena_bytes = w->arena_pages * w->page_size;
        c->ncpus = w->stats_slots;
        c->client_id = w->client_id;
        c->unlimited = w->has_unlimited && w->unlimited;

        /* What a reconnection after a daemon restart needs (reconnect.h);
         * without a token the session ends with the connection. */
        {
                struct stat st;

                c->token = w->has_client_token ? w->client_token : 0;
                if (fstat(fds[0], &st) == 0) {
                        c->arena_dev = st.st_dev;
                        c->arena_ino = st.st_ino;
                } else
                        c->token = 0;
                if (c->token != 0 && reconnect_held_init(&c->held, c->arena_pages) < 0)
                        c->token = 0;
        }

        r = client_map(c, w, fds[0], fds[1]);
        /* The mappings keep the memory; the descriptors are not needed. */
        close(fds[0]);
        close(fds[1]);
        if (r < 0)
                return r;
        return client_setup_stocks(c);
}

static void client_free(mb_client *c) {
        if (!c)
                return;
        wire_conn_free(c->conn);
        if (c->wake_fd >= 0)
                close(c->wake_fd);
        if (c->notify_fd >= 0)
                close(c->notify_fd);
        if (c->poll_fd >= 0)
                close(c->poll_fd);
        free(c->requests);
        if (c->base)
                munmap(c->base, c->arena_bytes);
        if (c->stats)
                munmap(c->stats, c->stats_bytes);
        free(c->stocks);
        free(c->stock_pages);
        free(c->tenant);
        free(c->socket_path);
        reconnect_held_done(&c->held);
        free(c->broken_reason);
        for (size_t i = 0; i < c->nevents; i++)
                free(c->events[i].name);
        free(c->events);
        free(c->shrinkers);
        if (!c->forked) {
                /* A child may inherit these locked by a thread it lacks. */
                pthread_mutex_destroy(&c->conn_lock);
                pthread_mutex_destroy(&c->cb_lock);
                pthread_mutex_destroy(&c->io_lock);
                pthread_mutex_destroy(&c->send_lock);
                pthread_mutex_destroy(&c->held_lock);
                pthread_cond_destroy(&c->io_cond);
                pthread_rwlock_destroy(&c->shrinker_lock);
        }
        free(c);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(mb_client *, client_free);

/* The wake-up eventfd of the thread, and mb_get_fd()'s epoll set: the
 * socket plus an eventfd the library makes readable when work waits that
 * the socket does not show (a frame already read into the buffer). */
static int client_setup_fds(mb_client *c) {
        struct epoll_event ev = { .events = EPOLLIN };

        c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        c->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        c->poll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (c->wake_fd < 0 || c->notify_fd < 0 || c->poll_fd < 0 ||
            epoll_ctl(c->poll_fd, EPOLL_CTL_ADD, c->conn->fd, &ev) < 0 ||
            epoll_ctl(c->poll_fd, EPOLL_CTL_ADD, c->notify_fd, &ev) < 0) {
                int r = negative_errno();

                mb_set_error("cannot set up the connection's event descriptors: %s", strerror(-r));
                return r;
        }
        return 0;
}

static int client_start_thread(mb_client *c) {
        sigset_t all, old;
        int r;

        /* The thread takes no signal: they stay the application's. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&c->thread, NULL, client_thread, c);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                mb_set_error("cannot start the library's thread: %s", strerror(-r));
                return r;
        }
        (void) pthread_setname_np(c->thread, "membroker");
        c->thread_started = true;
        /* Return only once the thread runs: the C library (and a sanitizer's
         * allocator) set a new thread up with locks of their own, and a
         * fork() right after mb_connect() must not catch them held. */
        pthread_mutex_lock(&c->io_lock);
        while (!c->thread_running)
                pthread_cond_wait(&c->io_cond, &c->io_lock);
        pthread_mutex_unlock(&c->io_lock);
        return 0;
}

int mb_connect_ex(const char *socket_path, const char *tenant, unsigned flags, mb_client **ret) {
        _cleanup_(client_freep) mb_client *c = NULL;
        Mb__Hello hello = MB__HELLO__INIT;
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Msg *reply = NULL;
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

        (void) pthread_once(&registry_once, registry_init);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        pthread_mutex_init(&c->conn_lock, NULL);
        pthread_mutex_init(&c->cb_lock, NULL);
        pthread_mutex_init(&c->io_lock, NULL);
        pthread_mutex_init(&c->send_lock, NULL);
        pthread_mutex_init(&c->held_lock, NULL);
        pthread_rwlock_init(&c->shrinker_lock, NULL);
        {
                pthread_condattr_t ca;

                pthread_condattr_init(&ca);
                pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
                pthread_cond_init(&c->io_cond, &ca);
                pthread_condattr_destroy(&ca);
        }
        c->wake_fd = c->notify_fd = c->poll_fd = -1;
        c->flags = flags;
        c->rseq_offset = cpu_rseq_offset();
        c->rseq_area = __rseq_offset;
        c->rseq_lock = rseq_lock_available();

        c->socket_path = strdup(socket_path);
        if (!c->socket_path)
                return -ENOMEM;
        r = wire_conn_open(socket_path, &c->conn);
        if (r < 0)
                return r;
        r = client_setup_fds(c);
        if (r < 0)
                return r;

        hello.version = WIRE_PROTOCOL_VERSION;
        hello.tenant = (char *) tenant;
        hello.client_name = program_invocation_short_name;
        msg.body_case = MB__MSG__BODY_HELLO;
        msg.hello = &hello;
        r = wire_conn_send(c->conn, &msg);
        if (r < 0)
                return r;

        r = wire_conn_recv(c->conn, true, &reply);
        if (r < 0) {
                if (r == -ECONNRESET)
                        mb_set_error("membrokerd closed the connection before answering Hello");
                return r;
        }
        switch (reply->body_case) {
        case MB__MSG__BODY_WELCOME:
                r = client_welcome(c, reply->welcome);
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
        mb__msg__free_unpacked(reply, NULL);
        if (r < 0)
                return r;

        if (!(flags & MB_CONNECT_NO_THREAD)) {
                r = client_start_thread(c);
                if (r < 0)
                        return r;
        }
        registry_add(c);
        *ret = TAKE_PTR(c);
        return 0;
}

int mb_connect(const char *socket_path, const char *tenant, mb_client **ret) {
        return mb_connect_ex(socket_path, tenant, 0, ret);
}

/* Half-close and wait until the daemon has seen the disconnect and closed
 * its end: then everything this client held is uncharged (protocol.md §6). */
static void client_hangup(mb_client *c) {
        int fd = c->conn->fd;
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
        registry_remove(c);
        if (!c->forked) {
                pthread_mutex_lock(&c->io_lock);
                /* atomic: a reconnection polls it without the lock */
                __atomic_store_n(&c->closing, true, __ATOMIC_RELEASE);
                pthread_cond_broadcast(&c->io_cond);
                pthread_mutex_unlock(&c->io_lock);
                if (c->thread_started) {
                        (void) eventfd_write(c->wake_fd, 1);
                        pthread_join(c->thread, NULL);
                        c->thread_started = false;
                }
                pthread_mutex_lock(&c->conn_lock);
                if (!client_broken(c))
                        client_hangup(c);
                pthread_mutex_unlock(&c->conn_lock);
        }
        client_free(c);
}

/* ---- daemon messages on demand ---- */

int mb_get_fd(mb_client *c) {
        if (c->forked)
                return client_lost(c);
        return c->poll_fd;
}

int mb_process(mb_client *c) {
        eventfd_t v;
        int r = 0;

        if (c->forked)
                return client_lost(c);
        (void) eventfd_read(c->notify_fd, &v);
        pthread_mutex_lock(&c->io_lock);
        if (!c->broken && !c->reading) {
                c->reading = true;
                pthread_mutex_unlock(&c->io_lock);
                r = client_read(c, false, false, NULL);
                pthread_mutex_lock(&c->io_lock);
                if (r < 0)
                        client_break_locked(c, r, mb_last_error());
                client_reader_done_locked(c);
        }
        pthread_mutex_unlock(&c->io_lock);
        /* Another thread may be reading: then it handles what comes. */
        client_run_requests(c);
        client_dispatch_events(c);
        if (client_broken(c))
                return client_lost(c);
        return r;
}

int mb_register_shrinker(mb_client *c, const struct mb_shrinker *s) {
        const struct mb_shrinker **v;

        if (!s || !s->count || !s->scan) {
                mb_set_error("mb_register_shrinker: a shrinker needs count() and scan()");
                return -EINVAL;
        }
        pthread_rwlock_wrlock(&c->shrinker_lock);
        for (size_t i = 0; i < c->nshrinkers; i++)
                if (c->shrinkers[i] == s) {
                        pthread_rwlock_unlock(&c->shrinker_lock);
                        mb_set_error("mb_register_shrinker: already registered");
                        return -EEXIST;
                }
        v = realloc(c->shrinkers, (c->nshrinkers + 1) * sizeof(*v));
        if (!v) {
                pthread_rwlock_unlock(&c->shrinker_lock);
                return -ENOMEM;
        }
        c->shrinkers = v;
        c->shrinkers[c->nshrinkers++] = s;
        pthread_rwlock_unlock(&c->shrinker_lock);
        return 0;
}

int mb_unregister_shrinker(mb_client *c, const struct mb_shrinker *s) {
        /* Waits for a reclaim that is running the shrinkers (like the
         * kernel's unregister_shrinker()). */
        pthread_rwlock_wrlock(&c->shrinker_lock);
        for (size_t i = 0; i < c->nshrinkers; i++)
                if (c->shrinkers[i] == s) {
                        memmove(c->shrinkers + i, c->shrinkers + i + 1,
                                (c->nshrinkers - i - 1) * sizeof(*c->shrinkers));
                        c->nshrinkers--;
                        pthread_rwlock_unlock(&c->shrinker_lock);
                        return 0;
                }
        pthread_rwlock_unlock(&c->shrinker_lock);
        mb_set_error("mb_unregister_shrinker: not registered");
        return -ENOENT;
}

int mb_set_event_callback(mb_client *c, mb_event_fn fn, void *userdata) {
        pthread_mutex_lock(&c->cb_lock);
        c->event_fn = fn;
        c->event_userdata = userdata;
        pthread_mutex_unlock(&c->cb_lock);
        return 0;
}

/* ---- accessors ---- */

mb_handle_t mb_page_to_handle(const mb_client *c, const void *page) {
        if (!client_page_valid(c, page))
                return MB_HANDLE_INVALID;
        return (mb_handle_t) ((uintptr_t) page - (uintptr_t) c->base) >> c->page_shift;
}

void *mb_handle_to_page(const mb_client *c, mb_handle_t handle) {
        if (handle >= c->arena_pages) {
                errno = EINVAL;
                return NULL;
        }
        return c->base + (handle << c->page_shift);
}

size_t mb_page_size(const mb_client *c) {
        return c->page_size;
}

unsigned mb_charge_batch(const mb_client *c) {
        return __atomic_load_n(&c->charge_batch, __ATOMIC_RELAXED);
}

const char *mb_tenant_path(const mb_client *c) {
        return c->tenant;
}

uint64_t mb_client_id(const mb_client *c) {
        return c->client_id;
}

/* ---- mb_internal.h ---- */

unsigned mb_client_cpu(const mb_client *c) {
        return cpu_current(c->rseq_offset, c->ncpus);
}

unsigned mb_client_ncpus(const mb_client *c) {
        return c->ncpus;
}

void mb_client_stat_add(mb_client *c, enum mb_stat_item item, int64_t delta) {
        struct stock *s;

        if (c->forked || (unsigned) item >= _MB_STAT_NR)
                return; /* the region is the parent's */
        s = client_stock_lock(c);
        mb_stat_slot_add(s->slot, item, delta);
        stock_stat_dirty(c);
        stock_unlock(s);
}

const struct mb_stats_region *mb_client_stats_region(const mb_client *c) {
        return c->stats;
}
