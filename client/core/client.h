/* SPDX-License-Identifier: MIT */
/*
 * client.h - the library's client object (mb_client), shared by its
 * modules (not installed):
 *
 *   stock.c     the per-CPU stocks of charged pages and the page fast paths
 *   session.c   the request engine: the reader, waiters, calls to the daemon
 *   reclaim.c   answers to Reclaim and Drain, the shrinkers
 *   connect.c   connecting, reconnecting after a daemon restart, closing
 *   client.c    the object itself: errors, lifetime, fork(), accessors
 *
 * over wire_conn.c (the transport) and reconnect.c (the re-claim protocol).
 *
 * Pages move between three places:
 *   application  <-- pop / push -->  stock of some CPU  <-- Charge / Uncharge -->  daemon
 * and the stats slots follow them: MB_STAT_PAGES counts pages the
 * application holds, MB_STAT_STOCK pages in the stocks, MB_STAT_PGALLOC and
 * MB_STAT_PGFREE every alloc and free.  A slot is written only under the
 * lock of the stock of the same CPU (mb_stats_abi.h: one writer per slot).
 *
 * Locks, in order: conn_lock (the application's exchanges with the daemon,
 * one at a time) -> io_lock (reader role, waiters, queued requests, session
 * state) -> a stock lock; send_lock (-> held_lock) and cb_lock are taken
 * alone; shrinker_lock (read) is held while shrinkers run, with no other
 * lock.  The rules are asserted in debug builds (mb_assert_debug()).
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macros.h"
#include "core/mb_internal.h"
#include "mb_limits.h"
#include "mb_stats_abi.h"
#include "membroker.h"


struct session_hooks;
struct stock;
struct waiter;
struct wire_conn;

/* The pages charged to this client (kept by session/reconnect.c): one bit per arena page (an anonymous
 * mapping that costs only what is touched: 1 bit per page). */
struct reconnect_held {
        uint64_t *bits;
        uint64_t npages;
        size_t bytes;
        uint64_t count; /* bits set */
};


/* A Reclaim or Drain from the daemon, to be answered (reclaim.c). */
struct daemon_request {
        uint32_t seq;
        uint64_t pages; /* UINT64_MAX: Drain */
};

struct pending_event {
        char *name;
        uint64_t count;
};

/* A PSI trigger of the application (pressure.c), in io_lock's list. */
struct client_pressure_trigger {
        struct client_pressure_trigger *next;
        uint32_t id;
        int fd;       /* eventfd the application polls */
        char *trigger;
        bool active;  /* the daemon accepted it (re-sent after a restart) */
};

/* Charging ahead of need (stock/stock_refill.c): a stock below low pages
 * (0: never) asks the library's thread for pages ahead, while the last
 * Grant left headroom (pages before the nearest high or max of the
 * tenant's path, UINT64_MAX: none) for them and for all the stocks may
 * hold. */
struct client_refill {
        unsigned low;
        uint64_t headroom;             /* atomic */
        int pending;                   /* atomic: some stock asked */
        uint64_t misses;               /* atomic: allocations that found their stock empty */
};

/* Charged pages between the CPUs' stocks (stock/spill.c): a stock that
 * overflows spills a batch here, one that runs dry takes from here before
 * it charges. */
struct stock_spill {
        pthread_mutex_t lock;
        void **pages;                  /* [cap], LIFO */
        uint32_t n;                    /* atomic reads: a peek spares the lock */
        uint32_t cap;                  /* ncpus * batch_cap */
        uint32_t want;                 /* atomic: 1 + the CPU whose stock ran dry with
                                        * the spill empty; 0: nobody waits for pages */
};

/* Surviving a restart of the daemon (session/reconnect.h): the pages
 * charged to this client (held_lock), its token, its arena's identity,
 * where to go. */
struct client_restart {
        struct reconnect_held held;
        pthread_mutex_t held_lock;     /* the held bitmap */
        uint64_t token;
        dev_t arena_dev;
        ino_t arena_ino;
        char *socket_path;
};

/* The session with the daemon (session/): its locks, the reader, the
 * waiters, the daemon's requests, the library's thread. */
struct client_session {
        /* conn_lock serialises the application's exchanges with the daemon
         * (charges, and the returns of overfull stocks). */
        pthread_mutex_t conn_lock;
        struct wire_conn *conn;        /* read by the reader only (io_lock) */
        uint32_t next_seq;             /* atomic */
        /* What the session calls above it (session.h), set by mb_connect(). */
        const struct session_hooks *hooks;

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
        bool thread_running;           /* session_thread() has started (io_lock) */
        pthread_mutex_t send_lock;     /* one frame at a time on the socket */
        uint64_t conn_gen;             /* connections so far: moves on at a reconnection */
        pthread_t thread;              /* the library's thread ... */
        bool thread_started;           /* ... unless MB_CONNECT_NO_THREAD */
        int wake_fd;                   /* eventfd: wakes the thread from poll() */
        int notify_fd;                 /* eventfd: work for mb_process() (NO_THREAD) */
        int poll_fd;                   /* epoll of the socket and notify_fd: mb_get_fd() */
        /* PSI triggers (session/pressure.c), under io_lock; pressure_ok:
         * the daemon takes them (Welcome.pressure_triggers). */
        struct client_pressure_trigger *pressure_triggers;
        uint32_t pressure_last_id;
        bool pressure_ok;
        bool outside_ok;               /* the daemon takes charges outside the arena
                                        * (Welcome.outside_charges) */
};

/* The shrinkers (stock/reclaim.c); lock is held (read) while they run. */
struct client_shrinkers {
        pthread_rwlock_t lock;
        const struct mb_shrinker **list;
        size_t n;
};

/* The application's event callback and the queued events, under lock. */
struct client_events {
        pthread_mutex_t lock;
        mb_event_fn fn;
        void *userdata;
        struct pending_event *queue;
        size_t n;
        int pending;                   /* atomic hint: n > 0 */
};

struct mb_client {
        /* Read by every fast path; written only while connecting.  The
         * stocks' own fields change with their words (stock.h). */
        struct stock *stocks;          /* [ncpus], two cache lines each */
        uint8_t *base;                 /* the tenant arena, mapped shared */
        uint64_t arena_bytes;
        uint64_t page_mask;            /* page_size - 1 */
        ptrdiff_t rseq_offset;         /* cpu_rseq_offset(), -1 without rseq */
        ptrdiff_t rseq_area;           /* __rseq_offset: the struct rseq */
        bool rseq_lock;                /* stocks in rseq mode (stock.h) */
        unsigned rseq_ncpus;           /* ncpus in rseq mode, else 0: the fast
                                        * paths' bound on the rseq CPU */
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
        struct client_refill refill;
        struct stock_spill spill;
        uint64_t reclaim_requests;     /* atomic: the daemon's Reclaim and Drain requests answered */
        char *tenant;
        struct mb_stats_region *stats;
        size_t stats_bytes;
        void **stock_pages;            /* backing of every stock's pages[] */
        unsigned flags;
        bool forked;                   /* this copy lives in a fork() child */

        struct client_restart restart;
        struct client_session session;
        struct client_shrinkers shrink;
        struct client_events ev;

        struct {                       /* every live client, for fork() (stock/fork.c) */
                mb_client *prev, *next;
        } reg;

        struct kmalloc_ctx *kmalloc;   /* mb_malloc()'s size classes (malloc.c),
                                        * made by the first call; atomic */
};

/* Whether @page is a page of @c's arena (the start of one). */
static inline bool client_page_valid(const mb_client *c, const void *page) {
        uintptr_t off = (uintptr_t) page - (uintptr_t) c->base;

        return off < c->arena_bytes && (off & c->page_mask) == 0;
}

/**
 * client_new - a client object with its locks set up and nothing else (no
 * connection, no mapping).  NULL when out of memory.
 */
mb_client *client_new(unsigned flags);

/* Free @c and everything it owns; NULL is a no-op.  No thread of the
 * library may run any more. */
void client_free(mb_client *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(mb_client *, client_free);

/* True in the library's own thread (session_thread()): what it allocates
 * must not come from the broker (the preload shim sends it to glibc). */
#ifdef MB_PRELOAD
/* The shim checks it on every malloc(): one load, no __tls_get_addr(). */
extern __thread bool mb_library_thread __attribute__((tls_model("initial-exec")));
#else
extern __thread bool mb_library_thread;
#endif
