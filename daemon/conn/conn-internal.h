/* SPDX-License-Identifier: MIT */
/*
 * conn-internal.h - what the connection's files share, nobody else:
 *
 *   conn.c         transport: sending, framing and dispatch, deadlines,
 *                  the peer's exit, life cycle;
 *   conn-hello.c   admission: Hello (the tenant, the arena, the stats
 *                  region, the Welcome) and the re-claim after a restart;
 *   conn-charge.c  Charge, the Grant, parking for the reclaimer, the
 *                  throttle, Uncharge, and the reclaimer's side
 *                  (struct reclaim_client_ops).
 *
 * Everything here runs on the connection's worker thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "auth.h"
#include "broker.h"
#include "conn.h"
#include "membroker.pb-c.h"
#include "tenant_state.h"

struct bufferevent;
struct event;
struct reclaim_client;

/* After a fatal Error, give the peer this long to take it before closing. */
#define CONN_CLOSE_TIMEOUT_SEC 5
/* Charges a client may send while one waits for reclaim or its throttle;
 * beyond that the daemon stops reading from it until the queue drains. */
#define CONN_QUEUED_CHARGES_MAX 64u
#define CONN_NAME_MAX_BYTES 64
#define CONN_REASON_MAX_BYTES 512

enum conn_state {
        CONN_HELLO,
        CONN_READY,
        CONN_CLOSING,
};

struct conn {
        struct worker *w;
        struct broker *b;
        struct bufferevent *bev;
        int fd;
        enum conn_state state;
        bool reading_paused;
        /* What bounds this connection (guard.h). */
        struct {
                bool user_counted;       /* admitted by guard_admit() for admitted_uid */
                bool incomplete;         /* ...and not through its Hello yet */
                uid_t admitted_uid;
                struct event *peer_exit; /* the opener's pidfd: readable once it exited */
                struct event *deadline;  /* the Hello's, then the frame's (FrameTimeoutSec=) */
                /* Replies left unread: reading stops over the bound, and
                 * the session is cut when it stays over it past this timer. */
                struct event *stall_timer;
                size_t output_peak;
        } guard;

        struct auth_peer peer;
        uint64_t client_id;
        char name[CONN_NAME_MAX_BYTES];

        /* Set once admitted (Welcome sent or being sent). */
        bool attached;
        struct tenant *tenant;
        struct tenant_state *ts;
        struct arena *arena;
        uint32_t owner;   /* arena-local id */
        uint64_t held;    /* pages this client holds */
        uint64_t outside; /* pages charged for its own mappings (Charge.flags OUTSIDE), no arena pages */
        uint64_t token;   /* identity across a daemon restart (restart.h) */
        bool claiming;    /* re-claiming after a restart: Claim messages follow */
        unsigned told_batch; /* the charge batch the client was last told */

        struct mb_stats_region *stats; /* mapping; the daemon writes only `dirty` */
        size_t stats_bytes;
        struct rstat_source *stats_src;

        /* Pressure (daemon/reclaim/reclaim.c).  A Charge that needs reclaim (at a
         * max) or a throttle (over a high) is parked here and completed
         * later by the reclaimer, without blocking the worker; Charges that
         * come meanwhile wait behind it, in order. */
        struct reclaim_client *rc;
        struct {
                bool parked;
                bool parked_charged;  /* its pages are charged (the high path) */
                uint32_t parked_seq, parked_pages;
                bool contig;          /* the charge in progress wants one extent */
                bool outside;         /* the charge in progress is for the client's own mapping */
                uint64_t parked_throttle_usec;
                struct event *throttle_timer;
                struct conn_queued_charge {
                        uint32_t seq, pages, need, flags;
                        bool waiting;
                        bool contig;
                } *queued;
                size_t nqueued, queued_head, queued_alloc;
                bool waiting;         /* the Charge being decided (memory.pressure, below) */
                bool parked_waiting;  /* the parked Charge */
                size_t nqueued_waiting;
        } charge;

        /* memory.pressure (tenant_pressure_change()): the client is a
         * member of its tenant's pressure group while READY, and stalled
         * while a Charge an application thread waits for (Charge.waiting)
         * is parked here or queued behind the parked one (charge.waiting,
         * charge.parked_waiting, charge.nqueued_waiting). */
        struct {
                bool member;
                bool stalled;
                /* The client's PSI triggers on its tenant (conn-pressure.c),
                 * sampled by one timer at a tenth of the shortest window. */
                struct conn_pressure_trigger *triggers;
                size_t ntriggers;
                struct event *timer;
        } psi;

        struct conn *prev, *next;
};

/* ---- conn.c ---- */

/* Pack @msg into the worker's frame buffer; the frame length or a negative
 * errno. */
ssize_t conn_pack(struct conn *c, const Mb__Msg *msg);
/* Queue @msg, trying the socket at once when nothing waits before it.
 * 0 or -ENOMEM / -EMSGSIZE. */
int conn_send(struct conn *c, const Mb__Msg *msg);
void conn_send_error(struct conn *c, bool has_seq, uint32_t seq, int code, const char *reason);
/* A fatal error: log it, send Error{code, reason}, stop reading and close
 * once the Error has left (or after a timeout). */
void conn_fail(struct conn *c, bool has_seq, uint32_t seq, int code, const char *fmt, ...) _printf_(5, 6);
/* The tenant's path for logs, "-" before the Hello. */
const char *conn_tenant_path(const struct conn *c);
/* Count @delta of @item in this worker's slot of the tenant's daemon
 * statistics. */
void conn_daemon_stat(struct conn *c, enum mb_stat_item item, int64_t delta);
/* Handle every complete frame in the input buffer. */
void conn_process_input(struct conn *c);
/* Free @c when it is closing and its output has left; true when freed. */
bool conn_maybe_finish(struct conn *c);

/* ---- conn-hello.c ---- */

void conn_hello(struct conn *c, const Mb__Hello *hello);
void conn_claim_more(struct conn *c, const Mb__Claim *claim);

/* ---- conn-charge.c ---- */

void conn_charge(struct conn *c, const Mb__Charge *charge);

/* ---- conn-pressure.c ---- */

/* PressureTrigger: add or remove one of the client's PSI triggers on its
 * tenant; answers Ack, or Error{EINVAL} without ending the session. */
void conn_pressure_trigger(struct conn *c, const Mb__PressureTrigger *pt);
/* Drop the client's triggers and their timer (conn_free()). */
void conn_pressure_free(struct conn *c);
void conn_uncharge(struct conn *c, const Mb__Uncharge *u);
