/* SPDX-License-Identifier: MIT */
/*
 * worker.h - a thread serving client connections with its own event base.
 *
 * The main thread accepts connections and hands each socket to a worker
 * (round robin); from then on only that worker touches the connection, so
 * a connection's state needs no lock.  Charging is lock-free
 * (page_counter); the arena takes a short per-tenant mutex.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "arena.h"
#include "mb_limits.h"
#include "membroker.pb-c.h"
#include "wire.h"

struct broker;
struct conn;
struct event_base;
struct event;
struct mailbox;
struct worker;

/* What a worker does with its connections: the connection module's
 * (daemon/conn/conn.h), given at creation.  Both run on the worker's thread, or
 * after it ended. */
struct worker_ops {
        /* Take over the accepted socket @fd, admitted for @uid
         * (guard_admit(); closed and released on failure). */
        int (*accept)(struct worker *w, int fd, uid_t uid);
        /* Disconnect every connection of @w, returning what they held. */
        void (*disconnect_all)(struct worker *w);
};

/* Extents one Uncharge frame can carry (each packs to at least 6 bytes). */
#define WORKER_MAX_UNCHARGE_EXTENTS (WIRE_MAX_FRAME_BYTES / 6u + 1u)

struct worker {
        struct broker *b;
        const struct worker_ops *ops;
        unsigned index; /* also this worker's slot in every tenant's daemon stats */
        pthread_t thread;
        bool started;
        struct event_base *base;

        /* Accepted sockets to take over, then the stop (daemon/base/mailbox.h). */
        struct mailbox *inbox;
        bool stopping; /* worker thread only */

        struct conn *conns; /* worker thread only */
        unsigned nconns;

        /* Scratch space for one message at a time (worker thread only). */
        struct arena_extent *extents; /* WORKER_MAX_UNCHARGE_EXTENTS */
        Mb__Extent *pb_extents;       /* MB_FRAME_MAX_EXTENTS */
        Mb__Extent **pb_extent_ptrs;
        uint8_t *frame;               /* WIRE_HEADER_BYTES + WIRE_MAX_FRAME_BYTES */

        /* Pages returned (arena_release_begin()) whose hole punch waits for
         * the end of this loop turn, after the replies went out (worker
         * thread only). */
        struct worker_punch {
                struct arena *arena;
                uint64_t start;
                uint32_t count;
        } *punch;
        size_t npunch, punch_alloc;
        struct event *punch_ev; /* runs at the end of the loop turn */
};

/* Worker @index of @b, serving connections through @ops (static storage).
 * 0 or -ENOMEM. */
int worker_new(struct broker *b, unsigned index, const struct worker_ops *ops, struct worker **ret);
/* Start the thread. */
int worker_start(struct worker *w);
/* Hand an accepted socket over, admitted for @uid by guard_admit();
 * thread-safe.  The worker owns @fd and its admission now (closed and
 * released on failure). */
void worker_add_fd(struct worker *w, int fd, uid_t uid);
/* Disconnect every client (freeing what they held), stop and join the
 * thread. */
void worker_stop(struct worker *w);
void worker_free(struct worker *w);

/**
 * worker_defer_punch - queue the @n extents of @a, just returned with
 * arena_release_begin(), for one coalesced hole punch at the end of this
 * loop turn (after the pending writes, the Ack among them).  Worker thread
 * only; the caller keeps @a alive until worker_flush_punch() ran.  When the
 * queue cannot grow the extents are punched at once.
 */
void worker_defer_punch(struct worker *w, struct arena *a, const struct arena_extent *extents, size_t n);

/**
 * worker_flush_punch - punch and free every queued extent now (adjacent
 * extents of one arena as one run).  Worker thread only; called before a
 * connection lets go of its arena, and when a grant found its arena full.
 */
void worker_flush_punch(struct worker *w);
