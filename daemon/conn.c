/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <poll.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "auth.h"
#include "charge.h"
#include "conn.h"
#include "guard.h"
#include "log.h"
#include "macros.h"
#include "manager.h"
#include "mb_limits.h"
#include "reclaim.h"
#include "restart.h"
#include "session.h"
#include "tenant_state.h"
#include "worker.h"

/* After a fatal Error, give the peer this long to take it before closing. */
#define CONN_CLOSE_TIMEOUT_SEC 5
/* Charges a client may send while one waits for reclaim or its throttle;
 * beyond that the daemon stops reading from it until the queue drains. */
#define CONN_QUEUED_CHARGES_MAX 64u
/* Stop reading from a client whose replies pile up unread. */
#define CONN_OUTPUT_HIGH_BYTES (1024u * 1024u)
#define CONN_NAME_MAX_BYTES 64
#define CONN_REASON_MAX_BYTES 512

enum conn_state {
        CONN_HELLO,
        CONN_READY,
        CONN_CLOSING,
};

struct conn {
        struct worker *w;
        struct manager *m;
        struct bufferevent *bev;
        int fd;
        enum conn_state state;
        bool reading_paused;
        bool user_counted;       /* in MaxConnectionsPerUser= (guard.h) */
        struct event *peer_exit; /* the opener's pidfd: readable once it exited */
        struct event *deadline;  /* the Hello's, then the frame's (FrameTimeoutSec=) */

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
        uint64_t token;   /* identity across a daemon restart (restart.h) */
        bool claiming;    /* re-claiming after a restart: Claim messages follow */
        unsigned told_batch; /* the charge batch the client was last told */

        struct mb_stats_region *stats; /* mapping; the daemon writes only `dirty` */
        size_t stats_bytes;
        struct rstat_source *stats_src;

        /* Pressure (daemon/reclaim.c).  A Charge that needs reclaim (at a
         * max) or a throttle (over a high) is parked here and completed
         * later by the reclaimer, without blocking the worker; Charges that
         * come meanwhile wait behind it, in order. */
        struct reclaim_client *rc;
        bool charge_parked;
        bool parked_charged;  /* its pages are charged (the high path) */
        uint32_t parked_seq, parked_pages;
        uint64_t parked_throttle_usec;
        struct event *throttle_timer;
        struct conn_queued_charge {
                uint32_t seq, pages, need, flags;
        } *queued;
        size_t nqueued, queued_head, queued_alloc;

        struct conn *prev, *next;
};

static void conn_read_cb(struct bufferevent *bev, void *userdata);
static void conn_process_input(struct conn *c);
static bool conn_maybe_finish(struct conn *c);
static void conn_write_cb(struct bufferevent *bev, void *userdata);
static void conn_event_cb(struct bufferevent *bev, short what, void *userdata);

/* The batch policy is the core's (tenant_effective_charge_batch()): while a
 * tenant and its ancestors have nothing limited, no charge of it can meet a
 * limit, so its clients charge a larger batch per trip, the round trip
 * being the whole cost of a charge here; when a limit appears the next
 * Grant tells the client the normal batch (Grant.charge_batch).  A tenant
 * with clients (and its ancestors) cannot be removed, so no lock. */
static unsigned conn_unlimited_batch(unsigned batch) {
        return MB_MIN(tenant_unlimited_charge_batch(batch), MB_CHARGE_MAX_PAGES);
}

static unsigned conn_base_batch(const struct manager *m, const struct tenant *t) {
        return tenant_charge_batch(t, atomic_load(&m->broker_charge_batch));
}

unsigned conn_charge_batch(const struct manager *m, const struct tenant *t, unsigned current) {
        return tenant_effective_charge_batch(t, atomic_load(&m->broker_charge_batch), current);
}

/* ---- sending ---- */

/* Pack @msg into the worker's frame buffer; returns the frame length or a
 * negative errno. */
static ssize_t conn_pack(struct conn *c, const Mb__Msg *msg) {
        size_t n = mb__msg__get_packed_size(msg);
        uint32_t be;

        if (n == 0 || n > WIRE_MAX_FRAME_BYTES)
                return -EMSGSIZE;
        be = htonl((uint32_t) n);
        memcpy(c->w->frame, &be, sizeof(be));
        mb__msg__pack(msg, c->w->frame + WIRE_HEADER_BYTES);
        return (ssize_t) (WIRE_HEADER_BYTES + n);
}

static int conn_send(struct conn *c, const Mb__Msg *msg) {
        ssize_t n = conn_pack(c, msg), sent = 0;

        if (n < 0)
                return (int) n;
        /* Nothing queued before it: try the socket at once, so that a reply
         * usually leaves without an EV_WRITE round through epoll (two
         * epoll_ctl and a wakeup per request); what does not fit goes to the
         * bufferevent, behind which everything else then queues. */
        if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
                sent = send(c->fd, c->w->frame, (size_t) n, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (sent < 0)
                        sent = 0; /* EAGAIN, or an error the bufferevent will report */
        }
        if (sent < n && bufferevent_write(c->bev, c->w->frame + sent, (size_t) (n - sent)) < 0)
                return -ENOMEM;
        return 0;
}

static void conn_send_error(struct conn *c, bool has_seq, uint32_t seq, int code, const char *reason) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Error err = MB__ERROR__INIT;

        err.has_seq = has_seq;
        err.seq = seq;
        err.code = code;
        err.reason = (char *) reason;
        msg.body_case = MB__MSG__BODY_ERROR;
        msg.error = &err;
        (void) conn_send(c, &msg);
}

static const char *conn_tenant_path(const struct conn *c) {
        return c->tenant ? c->tenant->path : "-";
}

/* Send Error{code, reason}, stop reading and close once the Error has left
 * (or after a timeout). */
static void conn_close_error(struct conn *c, bool has_seq, uint32_t seq, int code, const char *reason) {
        struct timeval tv = { .tv_sec = CONN_CLOSE_TIMEOUT_SEC };

        conn_send_error(c, has_seq, seq, code, reason);
        c->state = CONN_CLOSING;
        evtimer_del(c->deadline);
        bufferevent_disable(c->bev, EV_READ);
        bufferevent_set_timeouts(c->bev, NULL, &tv);
}

/* A fatal error: log it, then conn_close_error(). */
static void conn_fail(struct conn *c, bool has_seq, uint32_t seq, int code, const char *fmt, ...) _printf_(5, 6);
static void conn_fail(struct conn *c, bool has_seq, uint32_t seq, int code, const char *fmt, ...) {
        char reason[CONN_REASON_MAX_BYTES];
        va_list ap;

        if (c->state == CONN_CLOSING)
                return;
        va_start(ap, fmt);
        vsnprintf(reason, sizeof(reason), fmt, ap);
        va_end(ap);
        log_notice("client %" PRIu64 " (%s, pid %d, uid %u, tenant %s): %s; closing", c->client_id, c->name,
                   (int) c->peer.pid, (unsigned) c->peer.uid, conn_tenant_path(c), reason);
        conn_close_error(c, has_seq, seq, code, reason);
}

/* ---- events and stats ---- */

/* memcg_memory_event(): count @event on @t (locally) and its ancestors
 * (hierarchically), and tell the main thread about every tenant whose
 * memory.events changed, the root excepted, like cgroup_file_notify(). */
static void conn_memory_event(struct conn *c, struct tenant *t, enum mb_event event) {
        tenant_memory_event(t, event);
        for (struct tenant *x = t; x && x->parent; x = x->parent)
                manager_queue_event(c->m, x, event);
}

static void conn_daemon_stat(struct conn *c, enum mb_stat_item item, int64_t delta) {
        struct tenant_state *ts = c->ts;

        /* One slot per worker: this thread is its only writer.  The slots
         * are a region of their own whose writers maintain the dirty word
         * (tenant_state_prepare()). */
        mb_stat_slot_add(&ts->daemon_slots[c->w->index], item, delta);
        mb_stats_region_mark_dirty(mb_stats_region_of_slot(ts->daemon_slots, 0));
}

/* ---- Hello ---- */

/* Create the arena and the daemon's stats slots of @ts at first use. */
static int tenant_state_prepare(struct manager *m, struct tenant_state *ts) {
        int r = 0;

        pthread_mutex_lock(&ts->lock);
        if (!ts->daemon_slots) {
                /* A whole stats region (header + slots) in the daemon's own
                 * memory, so that the workers maintain its dirty word like
                 * clients do and a poll of an idle tenant reads one word,
                 * not nworkers slots.  ts->daemon_slots points at the slots;
                 * mb_stats_region_of_slot(ts->daemon_slots, 0) is what to
                 * free. */
                size_t bytes = (size_t) mb_stats_region_bytes(m->nworkers);
                struct mb_stats_region *region = aligned_alloc(MB_CACHELINE_BYTES, bytes);

                if (!region) {
                        r = -ENOMEM;
                        goto out;
                }
                memset(region, 0, bytes);
                *region = (struct mb_stats_region) {
                        .magic = MB_STATS_MAGIC,
                        .version = MB_STATS_VERSION,
                        .nslots = m->nworkers,
                        .nitems = _MB_STAT_NR,
                };
                mb_stats_region_writer_attach(region);
                ts->daemon_slots = region->slot;
                ts->ndaemon_slots = m->nworkers;
        }
        if (!ts->arena) {
                unsigned long pages = page_counter_get_max(&m->tree->root->memory);

                /* With its owner table in a memfd, both in the fd store. */
                r = restart_arena_new(m, ts, pages, &ts->arena);
                if (r < 0)
                        log_error_errno(r, "cannot create the arena of tenant %s (%lu pages): %m", ts->tenant->path,
                                        pages);
        }
out:
        pthread_mutex_unlock(&ts->lock);
        return r;
}

/* ONE sendmsg carrying the Welcome frame and [arena, stats] (protocol.md §3);
 * nothing else has been written to the connection yet, so the frame cannot
 * overtake or be overtaken by anything. */
static int conn_send_welcome(struct conn *c, const Mb__Msg *msg, int arena_fd, int stats_fd) {
        union {
                char buf[CMSG_SPACE(2 * sizeof(int))];
                struct cmsghdr align;
        } control;
        struct iovec iov;
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = sizeof(control.buf),
        };
        struct cmsghdr *cm;
        int fds[2] = { arena_fd, stats_fd };
        ssize_t n, sent;

        n = conn_pack(c, msg);
        if (n < 0)
                return (int) n;
        iov.iov_base = c->w->frame;
        iov.iov_len = (size_t) n;
        memset(&control, 0, sizeof(control));
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(fds));
        memcpy(CMSG_DATA(cm), fds, sizeof(fds));

        do
                sent = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (sent < 0 && errno == EINTR);
        if (sent < 0)
                return -errno;
        /* The fds went with the first byte; queue whatever did not fit. */
        if (sent < n && bufferevent_write(c->bev, c->w->frame + sent, (size_t) (n - sent)) < 0)
                return -ENOMEM;
        return 0;
}

/* Re-claim pages held before a daemon restart (Hello.held, Claim): they move
 * to this session (restart_claim()).  False after conn_fail(). */
static bool conn_claim(struct conn *c, Mb__Extent *const *extents, size_t n, bool more, uint64_t *ret_pages) {
        struct arena_extent *e = c->w->extents;
        uint64_t bad = 0;
        int r;

        if (n > WORKER_MAX_UNCHARGE_EXTENTS) {
                conn_fail(c, false, 0, EINVAL, "too many extents");
                return false;
        }
        for (size_t i = 0; i < n; i++)
                e[i] = (struct arena_extent) { .start = extents[i]->start, .count = extents[i]->count };
        r = restart_claim(c->m, c->ts, c->token, c->owner, e, n, more, ret_pages, &bad);
        if (r == -ESTALE) {
                conn_fail(c, false, 0, ESTALE,
                          "membrokerd has no record of the pages of this client in tenant %s (it restarted without "
                          "its fd store, or the grace period is over)",
                          c->tenant->path);
                return false;
        }
        if (r == -EINVAL) {
                conn_fail(c, false, 0, EINVAL, "page %" PRIu64 " is not held by this client", bad);
                return false;
        }
        if (r < 0) {
                conn_fail(c, false, 0, -r, "cannot re-claim the pages: %s", strerror(-r));
                return false;
        }
        c->held += *ret_pages;
        if (c->rc)
                reclaim_client_set_held(c->rc, c->held);
        c->claiming = more;
        return true;
}

/* Claim{seq, extents, more}: the rest of a re-claim (Hello.held_more). */
static void conn_claim_more(struct conn *c, const Mb__Claim *claim) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Ack ack = MB__ACK__INIT;
        uint64_t pages = 0;

        if (!c->claiming)
                return conn_fail(c, true, claim->seq, EPROTO, "Claim without Hello.held_more");
        if (!conn_claim(c, claim->extents, claim->n_extents, claim->has_more && claim->more, &pages))
                return;
        ack.seq = claim->seq;
        ack.pages = pages;
        msg.body_case = MB__MSG__BODY_ACK;
        msg.ack = &ack;
        if (conn_send(c, &msg) < 0)
                conn_fail(c, true, claim->seq, ENOMEM, "cannot queue the Ack");
}

static void conn_hello(struct conn *c, const Mb__Hello *hello) {
        struct manager *m = c->m;
        _cleanup_(freep) char *path = NULL, *reason = NULL;
        _cleanup_(closep) int stats_fd = -1;
        const char *cgroup = NULL;
        bool is_auto;
        struct tenant *t;
        struct tenant_state *ts;
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Welcome welcome = MB__WELCOME__INIT;
        unsigned batch, batch_max;
        bool unlimited;
        int r;

        session_client_name(c->name, sizeof(c->name), hello->client_name);
        if (guard_pidfd_exited(c->peer.pidfd))
                return conn_fail(c, false, 0, ESRCH, "the process that connected (pid %d) has exited",
                                 (int) c->peer.pid);
        if (hello->version != WIRE_PROTOCOL_VERSION)
                return conn_fail(c, false, 0, EPROTO, "protocol version %u is not supported (membrokerd speaks %u)",
                                 hello->version, WIRE_PROTOCOL_VERSION);

        is_auto = strcmp(hello->tenant, "auto") == 0;
        if (is_auto) {
                r = auth_peer_cgroup(&c->peer, &cgroup);
                if (r < 0)
                        return conn_fail(c, false, 0, -r, "cannot read the cgroup of pid %d for tenant \"auto\": %s",
                                         (int) c->peer.pid, strerror(-r));
        } else {
                r = tenant_path_normalize(hello->tenant, &path);
                if (r < 0)
                        return conn_fail(c, false, 0, EINVAL, "invalid tenant path \"%.64s\"", hello->tenant);
        }

        pthread_rwlock_rdlock(&m->tree_lock);
        if (is_auto) {
                t = session_auto_tenant(m->tree->root, cgroup);
                if (!t) {
                        pthread_rwlock_unlock(&m->tree_lock);
                        return conn_fail(c, false, 0, ENOENT,
                                         "tenant \"auto\": no tenant's Cgroup= contains the client's cgroup %s",
                                         cgroup);
                }
        } else {
                t = tenant_lookup(m->tree, path);
                if (!t) {
                        pthread_rwlock_unlock(&m->tree_lock);
                        return conn_fail(c, false, 0, ENOENT, "no tenant %s", path);
                }
        }
        if (atomic_load(&t->draining)) {
                pthread_rwlock_unlock(&m->tree_lock);
                return conn_fail(c, false, 0, ENOENT,
                                 "tenant %s is draining: it is gone from the configuration files and admits no new "
                                 "clients", t->path);
        }
        if (t->nchildren > 0) {
                pthread_rwlock_unlock(&m->tree_lock);
                return conn_fail(c, false, 0, EISDIR, "tenant %s has children; clients attach to leaves", t->path);
        }
        r = auth_admit(&c->peer, t, &reason);
        if (r < 0) {
                pthread_rwlock_unlock(&m->tree_lock);
                if (r == -EACCES)
                        return conn_fail(c, false, 0, EACCES, "%s", reason);
                return conn_fail(c, false, 0, -r, "cannot check the client's credentials: %s", strerror(-r));
        }
        ts = tenant_state_of(t);
        r = tenant_state_prepare(m, ts);
        if (r < 0) {
                pthread_rwlock_unlock(&m->tree_lock);
                return conn_fail(c, false, 0, -r, "cannot set up tenant %s: %s", t->path, strerror(-r));
        }
        r = arena_owner_new(ts->arena, &c->owner);
        if (r < 0) {
                pthread_rwlock_unlock(&m->tree_lock);
                return conn_fail(c, false, 0, EUSERS, "too many clients in tenant %s", t->path);
        }
        /* Counted under the tree lock: the tenant cannot be removed (nor get
         * children) while it has clients. */
        atomic_fetch_add(&t->nclients, 1);
        atomic_fetch_add(&m->nclients, 1);
        c->attached = true;
        c->tenant = t;
        c->ts = ts;
        c->arena = ts->arena;
        batch = conn_charge_batch(m, t, 0);
        unlimited = tenant_is_unlimited(t);
        batch_max = unlimited ? conn_unlimited_batch(conn_base_batch(m, t)) : batch;
        pthread_rwlock_unlock(&m->tree_lock);

        /* Its identity, kept in the owner table; after a daemon restart the
         * client brings it back with the pages it holds. */
        c->token = restart_client_attach(m, c->arena, c->owner, hello->has_client_token ? hello->client_token : 0);
        if (hello->has_client_token || hello->n_held > 0) {
                uint64_t pages = 0;

                if (!conn_claim(c, hello->held, hello->n_held, hello->has_held_more && hello->held_more, &pages))
                        return;
                log_info("client %" PRIu64 " (%s, pid %d) is back after a restart and re-claimed %" PRIu64
                         " pages of tenant %s",
                         c->client_id, c->name, (int) c->peer.pid, pages, t->path);
        }

        r = session_stats_region_new(m->stats_slots, &stats_fd, &c->stats, &c->stats_bytes);
        if (r < 0)
                return conn_fail(c, false, 0, -r, "cannot create the stats region: %s", strerror(-r));

        pthread_mutex_lock(&m->stats_lock);
        if (!ts->daemon_src)
                r = rstat_source_attach_region(&t->rstat, mb_stats_region_of_slot(ts->daemon_slots, 0),
                                               ts->ndaemon_slots, &ts->daemon_src);
        if (r >= 0)
                r = rstat_source_attach_region(&t->rstat, c->stats, m->stats_slots, &c->stats_src);
        if (r >= 0 && !ts->active) {
                ts->active = true;
                ts->active_prev = NULL;
                ts->active_next = m->active;
                if (m->active)
                        m->active->active_prev = ts;
                m->active = ts;
        }
        pthread_mutex_unlock(&m->stats_lock);
        if (r < 0)
                return conn_fail(c, false, 0, -r, "cannot attach the stats region: %s", strerror(-r));

        /* The reclaimer's handle: from now on Reclaim/Drain may reach it. */
        r = reclaim_client_attach(m, c->w, c, t, c->client_id, c->name, c->peer.pid, c->peer.pidfd, &c->rc);
        if (r < 0)
                return conn_fail(c, false, 0, -r, "cannot register the client for reclaim: %s", strerror(-r));
        reclaim_client_set_held(c->rc, c->held); /* pages re-claimed after a restart */

        welcome.version = WIRE_PROTOCOL_VERSION;
        welcome.tenant = t->path;
        welcome.page_size = m->page_size;
        welcome.charge_batch = batch;
        /* A client back after a restart keeps the batch its stocks were
         * made for and ignores this one: tell it again with the first
         * Grant. */
        c->told_batch = hello->has_client_token ? 0 : batch;
        welcome.arena_pages = c->arena->npages;
        welcome.stats_slots = m->stats_slots;
        welcome.client_id = c->client_id;
        welcome.has_unlimited = true;
        welcome.unlimited = unlimited;
        /* Room for the seed-003 batch when the tenant has nothing limited,
         * even if the capacity withholds it now (conn_charge_batch()). */
        welcome.has_charge_batch_max = true;
        welcome.charge_batch_max = batch_max;
        welcome.has_client_token = true;
        welcome.client_token = c->token;
        msg.body_case = MB__MSG__BODY_WELCOME;
        msg.welcome = &welcome;

        r = conn_send_welcome(c, &msg, c->arena->fd, stats_fd);
        if (r < 0) {
                log_notice("client %" PRIu64 " (%s, pid %d): cannot send the Welcome: %s", c->client_id, c->name,
                           (int) c->peer.pid, strerror(-r));
                c->state = CONN_CLOSING;
                return;
        }

        c->state = CONN_READY;
        evtimer_del(c->deadline); /* the pidfd stays: the session ends with its process */
        session_note_uid(ts, c->peer.uid);
        log_info("client %" PRIu64 " (%s, pid %d, uid %u) attached to tenant %s", c->client_id, c->name,
                 (int) c->peer.pid, (unsigned) c->peer.uid, t->path);
}

/* ---- Charge ---- */

static void conn_charge_start(struct conn *c, uint32_t seq, uint32_t n, uint32_t need, uint32_t flags);

/* Grant @n charged pages: pick them in the arena, record them, reply. */
static void conn_grant(struct conn *c, uint32_t seq, uint32_t n, uint64_t throttle_usec) {
        struct tenant *t = c->tenant;
        struct worker *w = c->w;
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Grant grant = MB__GRANT__INIT;
        unsigned batch;
        int nextents, r;

        nextents = arena_alloc(c->arena, c->owner, n, w->extents, MB_FRAME_MAX_EXTENTS);
        if (nextents < 0) {
                page_counter_uncharge(&t->memory, n);
                log_warning("tenant %s: its arena cannot supply %u more pages (%" PRIu64 " of %" PRIu64 " in use)",
                            t->path, n, arena_used(c->arena), c->arena->npages);
                conn_send_error(c, true, seq, ENOMEM, "the arena of the tenant is full");
                return;
        }
        /* Zero pages only, and the tmpfs size grown to cover them. */
        r = arena_grant_prepare(c->arena, w->extents, (size_t) nextents);
        if (r < 0) {
                (void) arena_release(c->arena, c->owner, w->extents, (size_t) nextents);
                page_counter_uncharge(&t->memory, n);
                log_warning_errno(r, "tenant %s: cannot grow its arena for %u more pages: %m", t->path, n);
                conn_send_error(c, true, seq, ENOMEM, "the arena of the tenant cannot grow");
                return;
        }
        c->held += n;
        reclaim_client_set_held(c->rc, c->held);

        for (int i = 0; i < nextents; i++) {
                mb__extent__init(&w->pb_extents[i]);
                w->pb_extents[i].start = w->extents[i].start;
                w->pb_extents[i].count = w->extents[i].count;
                w->pb_extent_ptrs[i] = &w->pb_extents[i];
        }
        grant.seq = seq;
        grant.n_extents = (size_t) nextents;
        grant.extents = w->pb_extent_ptrs;
        grant.has_throttle_usec = throttle_usec > 0;
        grant.throttle_usec = throttle_usec;
        batch = conn_charge_batch(c->m, t, c->told_batch);
        if (batch != c->told_batch) {
                grant.has_charge_batch = true;
                grant.charge_batch = batch;
                c->told_batch = batch;
        }
        msg.body_case = MB__MSG__BODY_GRANT;
        msg.grant = &grant;
        if (conn_send(c, &msg) < 0)
                conn_fail(c, true, seq, ENOMEM, "cannot queue the Grant");
}

static void conn_park(struct conn *c, uint32_t seq, uint32_t n, bool charged) {
        c->charge_parked = true;
        c->parked_charged = charged;
        c->parked_seq = seq;
        c->parked_pages = n;
        c->parked_throttle_usec = 0;
}

/* The parked charge is done: run the Charges that queued up behind it. */
static void conn_charge_next(struct conn *c) {
        c->charge_parked = false;
        c->parked_charged = false;
        while (!c->charge_parked && c->nqueued > 0 && c->state == CONN_READY) {
                struct conn_queued_charge q = c->queued[c->queued_head];

                c->queued_head = (c->queued_head + 1) % c->queued_alloc;
                c->nqueued--;
                conn_charge_start(c, q.seq, q.pages, q.need, q.flags);
        }
        /* Last: this may end the connection (and free @c). */
        if (c->reading_paused && c->nqueued < CONN_QUEUED_CHARGES_MAX && c->state == CONN_READY) {
                c->reading_paused = false;
                bufferevent_enable(c->bev, EV_READ);
                conn_process_input(c);
                (void) conn_maybe_finish(c);
        }
}

/* Count the events the charge decision returned (memcg_memory_event()). */
static void conn_charge_events(struct conn *c, const struct tenant_charge *res) {
        for (size_t i = 0; i < res->nevents; i++)
                conn_memory_event(c, res->events[i].tenant, res->events[i].event);
}

/* The pages are charged.  mem_cgroup_handle_over_high(): when the charge
 * left the tenant or an ancestor above its high (@res->over_high), hold the
 * Grant while the reclaimer counts `high`, takes the overage back and
 * computes the throttle. */
static void conn_charge_charged(struct conn *c, uint32_t seq, uint32_t n, const struct tenant_charge *res) {
        conn_charge_events(c, res);
        if (res->over_high) {
                conn_park(c, seq, n, true);
                reclaim_charge_over_high(c->rc, seq, n);
                return;
        }
        conn_grant(c, seq, n, 0);
}

static void conn_charge_start(struct conn *c, uint32_t seq, uint32_t n, uint32_t need, uint32_t flags) {
        struct tenant_charge res;

        conn_daemon_stat(c, MB_STAT_CHARGE_REQUESTS, 1);
        if (!tenant_try_charge(c->tenant, n, need, 0, &res)) {
                /* `max` counted; the reclaimer drains the stocks of the
                 * failing subtree, reclaims there and retries
                 * (tenant_charge_next()); the reply comes from
                 * conn_charge_resume().  Still @need pages: the batch fell
                 * back first. */
                n = MB_MIN(n, need);
                conn_charge_events(c, &res);
                conn_park(c, seq, n, false);
                reclaim_charge_failed(c->rc, seq, n, flags);
                return;
        }
        conn_charge_charged(c, seq, (uint32_t) res.charged, &res);
}

static void conn_charge(struct conn *c, const Mb__Charge *charge) {
        uint32_t n = charge->pages, need = charge->has_need ? charge->need : n;
        uint32_t flags = charge->has_flags ? charge->flags : 0;

        if (n < 1 || n > MB_CHARGE_MAX_PAGES)
                return conn_fail(c, true, charge->seq, EINVAL, "charge of %u pages is outside 1..%u", n,
                                 MB_CHARGE_MAX_PAGES);
        if (need < 1 || need > n)
                return conn_fail(c, true, charge->seq, EINVAL, "charge needing %u pages is outside 1..%u", need,
                                 n);
        if (flags & ~WIRE_CHARGE_FLAGS_KNOWN)
                return conn_fail(c, true, charge->seq, EINVAL, "charge with unknown flags 0x%x", flags);

        if (c->charge_parked) {
                /* Replies keep their order: wait behind the parked one. */
                if (c->nqueued == c->queued_alloc) {
                        size_t a = MB_MAX(c->queued_alloc * 2, (size_t) 4);
                        struct conn_queued_charge *q = malloc(a * sizeof(*q));

                        if (!q)
                                return conn_fail(c, true, charge->seq, ENOMEM, "out of memory");
                        for (size_t i = 0; i < c->nqueued; i++)
                                q[i] = c->queued[(c->queued_head + i) % c->queued_alloc];
                        free(c->queued);
                        c->queued = q;
                        c->queued_alloc = a;
                        c->queued_head = 0;
                }
                c->queued[(c->queued_head + c->nqueued) % c->queued_alloc] =
                        (struct conn_queued_charge) { .seq = charge->seq, .pages = n, .need = need, .flags = flags };
                c->nqueued++;
                return;
        }
        conn_charge_start(c, charge->seq, n, need, flags);
}

/* ---- the reclaimer's side (reclaim.h) ---- */

void conn_charge_resume(struct conn *c, uint32_t seq, uint32_t pages, int error, const char *reason) {
        struct tenant_charge res;

        if (!c->charge_parked || c->parked_charged || c->parked_seq != seq || c->parked_pages != pages) {
                log_error("client %" PRIu64 ": the reclaimer completed charge %u, which is not waiting", c->client_id,
                          seq);
                if (error == 0)
                        page_counter_uncharge(&c->tenant->memory, pages);
                return;
        }
        if (c->state != CONN_READY) {
                if (error == 0)
                        page_counter_uncharge(&c->tenant->memory, pages);
                c->charge_parked = false;
                return;
        }
        if (error != 0) {
                log_debug("client %" PRIu64 ": %s", c->client_id, reason ? reason : strerror(error));
                conn_send_error(c, true, seq, error, reason ? reason : strerror(error));
                conn_charge_next(c);
                return;
        }
        c->charge_parked = false;
        /* The reclaimer charged; the high half of the decision is ours. */
        res = (struct tenant_charge) {};
        tenant_charge_check_high(c->tenant, &res);
        conn_charge_charged(c, seq, pages, &res);
        if (!c->charge_parked)
                conn_charge_next(c);
}

static void conn_throttle_cb(evutil_socket_t fd, short what, void *userdata) {
        struct conn *c = userdata;
        uint32_t seq = c->parked_seq, n = c->parked_pages;
        uint64_t throttle = c->parked_throttle_usec;

        c->charge_parked = false;
        c->parked_charged = false;
        if (c->state != CONN_READY) {
                page_counter_uncharge(&c->tenant->memory, n);
                return;
        }
        conn_grant(c, seq, n, throttle);
        conn_charge_next(c);
}

void conn_charge_grant_later(struct conn *c, uint32_t seq, uint64_t delay_usec) {
        struct timeval tv = { .tv_sec = (time_t) (delay_usec / 1000000), .tv_usec = (suseconds_t) (delay_usec % 1000000) };

        if (!c->charge_parked || !c->parked_charged || c->parked_seq != seq) {
                log_error("client %" PRIu64 ": the reclaimer released charge %u, which is not waiting", c->client_id,
                          seq);
                return;
        }
        c->parked_throttle_usec = delay_usec;
        if (delay_usec == 0) {
                conn_throttle_cb(-1, 0, c);
                return;
        }
        /* mem_cgroup_handle_over_high(): the penalty, slept by the
         * charging client only (its Grant waits; nobody else does). */
        conn_daemon_stat(c, MB_STAT_THROTTLE_USEC, (int64_t) delay_usec);
        if (!c->throttle_timer)
                c->throttle_timer = evtimer_new(c->w->base, conn_throttle_cb, c);
        if (!c->throttle_timer || evtimer_add(c->throttle_timer, &tv) < 0)
                conn_throttle_cb(-1, 0, c);
}

void conn_reclaim_request(struct conn *c, uint32_t seq, uint32_t pages) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Reclaim rq = MB__RECLAIM__INIT;

        if (c->state != CONN_READY)
                return;
        rq.seq = seq;
        rq.pages = pages;
        msg.body_case = MB__MSG__BODY_RECLAIM;
        msg.reclaim = &rq;
        /* pgscan: pages asked for. */
        conn_daemon_stat(c, MB_STAT_PGSCAN, pages);
        if (conn_send(c, &msg) < 0)
                conn_fail(c, false, 0, ENOMEM, "cannot queue a Reclaim");
}

void conn_drain_request(struct conn *c, uint32_t seq) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Drain d = MB__DRAIN__INIT;

        if (c->state != CONN_READY)
                return;
        d.seq = seq;
        msg.body_case = MB__MSG__BODY_DRAIN;
        msg.drain = &d;
        if (conn_send(c, &msg) < 0)
                conn_fail(c, false, 0, ENOMEM, "cannot queue a Drain");
}

void conn_send_event(struct conn *c, const char *event, uint64_t count, const char *tenant) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Event e = MB__EVENT__INIT;

        /* Events are advisory: a client that does not read gets none. */
        if (c->state != CONN_READY ||
            evbuffer_get_length(bufferevent_get_output(c->bev)) > RECLAIM_EVENT_OUTPUT_MAX_BYTES)
                return;
        e.event = (char *) event;
        e.count = count;
        e.tenant = (char *) tenant;
        msg.body_case = MB__MSG__BODY_EVENT;
        msg.event = &e;
        (void) conn_send(c, &msg);
}

/* OOMPolicy=kill: the process that opened the session, through the pidfd
 * the reclaimer's handle keeps, never a pid another process may have now. */
static int conn_rc_kill(struct reclaim_client *rc) {
        return conn_kill_pidfd(rc->pidfd, SIGKILL);
}

/* How the reclaimer and the event relay reach the connections. */
const struct reclaim_client_ops conn_reclaim_client_ops = {
        .reclaim_request = conn_reclaim_request,
        .drain_request = conn_drain_request,
        .charge_resume = conn_charge_resume,
        .charge_grant_later = conn_charge_grant_later,
        .send_event = conn_send_event,
        .kill = conn_rc_kill,
};

/* ---- Uncharge ---- */

static int extent_cmp(const void *a, const void *b) {
        const struct arena_extent *x = a, *y = b;

        return x->start < y->start ? -1 : x->start > y->start;
}

static bool extents_sorted(const struct arena_extent *e, size_t n) {
        for (size_t i = 1; i < n; i++)
                if (e[i].start < e[i - 1].start)
                        return false;
        return true;
}

static void conn_uncharge(struct conn *c, const Mb__Uncharge *u) {
        struct worker *w = c->w;
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Ack ack = MB__ACK__INIT;
        uint64_t bad = 0, released = 0;

        if (u->n_extents > WORKER_MAX_UNCHARGE_EXTENTS)
                return conn_fail(c, true, u->seq, EINVAL, "too many extents");
        for (size_t i = 0; i < u->n_extents; i++) {
                w->extents[i].start = u->extents[i]->start;
                w->extents[i].count = u->extents[i]->count;
        }

        /* Check every page before changing anything. */
        if (!arena_check_owned(c->arena, c->owner, w->extents, u->n_extents, &bad))
                return conn_fail(c, true, u->seq, EINVAL, "page %" PRIu64 " is not held by this client", bad);

        /* One hole punch per run of pages: put the extents in order first
         * (libmembroker sends them sorted and coalesced already). */
        if (!extents_sorted(w->extents, u->n_extents))
                qsort(w->extents, u->n_extents, sizeof(*w->extents), extent_cmp);

        conn_daemon_stat(c, MB_STAT_UNCHARGE_REQUESTS, 1);
        if (u->n_extents > 0) {
                released = arena_release(c->arena, c->owner, w->extents, u->n_extents);
                c->held -= released;
                reclaim_client_set_held(c->rc, c->held);
                page_counter_uncharge(&c->tenant->memory, released);
        }

        /* The answer to a Reclaim (pgsteal: pages got back) or a Drain. */
        if (u->has_reply_to && u->reason != MB__UNCHARGE_REASON__UNCHARGE_FREE) {
                if (u->reason == MB__UNCHARGE_REASON__UNCHARGE_RECLAIM)
                        conn_daemon_stat(c, MB_STAT_PGSTEAL, (int64_t) released);
                reclaim_answered(c->rc, u->reply_to, released);
        }

        ack.seq = u->seq;
        ack.pages = released;
        msg.body_case = MB__MSG__BODY_ACK;
        msg.ack = &ack;
        if (conn_send(c, &msg) < 0)
                conn_fail(c, true, u->seq, ENOMEM, "cannot queue the Ack");
}

/* ---- dispatch and framing ---- */

static void conn_dispatch(struct conn *c, const Mb__Msg *msg) {
        switch (c->state) {
        case CONN_HELLO:
                if (msg->body_case != MB__MSG__BODY_HELLO)
                        return conn_fail(c, false, 0, EPROTO, "expected Hello, got %s", wire_msg_name(msg));
                return conn_hello(c, msg->hello);

        case CONN_READY:
                switch (msg->body_case) {
                case MB__MSG__BODY_CHARGE:
                        return conn_charge(c, msg->charge);
                case MB__MSG__BODY_UNCHARGE:
                        return conn_uncharge(c, msg->uncharge);
                case MB__MSG__BODY_CLAIM:
                        return conn_claim_more(c, msg->claim);
                case MB__MSG__BODY_HELLO:
                        return conn_fail(c, false, 0, EPROTO, "second Hello");
                default:
                        return conn_fail(c, false, 0, EPROTO, "unexpected %s from a client", wire_msg_name(msg));
                }

        case CONN_CLOSING:
                return;
        }
}

/* Parse and handle every complete frame in the input buffer: copyout the
 * header, check the cap, wait for the whole frame, pullup, unpack, drain
 * (style.md §8). */
static void conn_process_input(struct conn *c) {
        struct evbuffer *in = bufferevent_get_input(c->bev);
        struct evbuffer *out = bufferevent_get_output(c->bev);
        bool dispatched = false;

        while (c->state != CONN_CLOSING) {
                uint8_t hdr[WIRE_HEADER_BYTES];
                size_t avail = evbuffer_get_length(in);
                uint32_t payload;
                size_t consumed;
                Mb__Msg *msg;
                uint8_t *buf;
                int r;

                if (avail < WIRE_HEADER_BYTES)
                        break;
                if (evbuffer_get_length(out) > CONN_OUTPUT_HIGH_BYTES || c->nqueued >= CONN_QUEUED_CHARGES_MAX) {
                        /* The client does not read its replies: wait until
                         * they drained (conn_write_cb resumes). */
                        bufferevent_disable(c->bev, EV_READ);
                        c->reading_paused = true;
                        break;
                }
                evbuffer_copyout(in, hdr, sizeof(hdr));
                r = wire_frame_length(hdr, sizeof(hdr), &payload);
                if (r == -EMSGSIZE) {
                        uint32_t be;
                        memcpy(&be, hdr, sizeof(be));
                        return conn_fail(c, false, 0, EMSGSIZE, "frame of %u bytes exceeds the limit of %u bytes",
                                         ntohl(be), WIRE_MAX_FRAME_BYTES);
                }
                if (r < 0)
                        return conn_fail(c, false, 0, EPROTO, "empty frame");
                if (avail < WIRE_HEADER_BYTES + payload)
                        break;

                buf = evbuffer_pullup(in, (ssize_t) (WIRE_HEADER_BYTES + payload));
                if (!buf)
                        return conn_fail(c, false, 0, ENOMEM, "out of memory");
                r = wire_frame_parse(buf, WIRE_HEADER_BYTES + payload, &consumed, &msg);
                evbuffer_drain(in, WIRE_HEADER_BYTES + payload);
                if (r < 0)
                        return conn_fail(c, false, 0, EPROTO, "undecodable frame of %u bytes", payload);
                conn_dispatch(c, msg);
                mb__msg__free_unpacked(msg, NULL);
                dispatched = true;
        }
        /* FrameTimeoutSec= from a frame's first byte to its last, whatever
         * trickles in between (the Hello's deadline runs from the connect). */
        if (c->state != CONN_READY)
                return;
        if (evbuffer_get_length(in) == 0 || c->reading_paused)
                evtimer_del(c->deadline);
        else if (dispatched || !evtimer_pending(c->deadline, NULL))
                evtimer_add(c->deadline, &(struct timeval) { .tv_sec = guard_frame_timeout_sec(c->m->guard) });
}

/* Free @c when it is closing and its output has left. */
static bool conn_maybe_finish(struct conn *c) {
        if (c->state != CONN_CLOSING)
                return false;
        if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
                conn_free(c);
                return true;
        }
        bufferevent_enable(c->bev, EV_WRITE);
        return false;
}

static void conn_read_cb(struct bufferevent *bev, void *userdata) {
        struct conn *c = userdata;

        conn_process_input(c);
        (void) conn_maybe_finish(c);
}

static void conn_write_cb(struct bufferevent *bev, void *userdata) {
        struct conn *c = userdata;

        if (conn_maybe_finish(c))
                return;
        if (c->reading_paused && c->nqueued < CONN_QUEUED_CHARGES_MAX) {
                c->reading_paused = false;
                bufferevent_enable(c->bev, EV_READ);
                conn_process_input(c);
                (void) conn_maybe_finish(c);
        }
}

static void conn_event_cb(struct bufferevent *bev, short what, void *userdata) {
        struct conn *c = userdata;

        if ((what & BEV_EVENT_EOF) && c->state != CONN_CLOSING &&
            evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
                /* The peer stopped writing in the middle of a frame. */
                conn_fail(c, false, 0, EPROTO, "truncated frame at end of input (%zu bytes)",
                          evbuffer_get_length(bufferevent_get_input(bev)));
                (void) conn_maybe_finish(c);
                return;
        }
        /* EOF, error, or a closing peer that does not read: done. */
        conn_free(c);
}

/* FrameTimeoutSec= passed without a Hello, or within a frame. */
static void conn_deadline_cb(evutil_socket_t fd, short what, void *userdata) {
        struct conn *c = userdata;
        bool hello = c->state == CONN_HELLO;
        char reason[CONN_REASON_MAX_BYTES];

        snprintf(reason, sizeof(reason), hello ? "no Hello within %u s" : "a frame was not finished within %u s",
                 guard_frame_timeout_sec(c->m->guard));
        guard_log(c->m->guard, hello ? GUARD_HELLO_TIMEOUT : GUARD_FRAME_TIMEOUT,
                  "client %" PRIu64 " (%s, pid %d, uid %u, tenant %s): %s (%zu bytes pending); closing",
                  c->client_id, c->name, (int) c->peer.pid, (unsigned) c->peer.uid, conn_tenant_path(c), reason,
                  evbuffer_get_length(bufferevent_get_input(c->bev)));
        conn_close_error(c, false, 0, ETIMEDOUT, reason);
        (void) conn_maybe_finish(c);
}

/* The process that opened the connection exited (pidfd_poll()): the session
 * ends as at a disconnect, even while another process holds the socket. */
static void conn_peer_exit_cb(evutil_socket_t fd, short what, void *userdata) {
        struct conn *c = userdata;
        struct pollfd p = { .fd = c->fd, .events = POLLRDHUP };

        if (c->state != CONN_CLOSING && (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLRDHUP | POLLHUP)))) {
                log_notice("client %" PRIu64 " (%s, pid %d, uid %u, tenant %s): the process that opened the "
                           "connection exited while another holds its socket; ending the session",
                           c->client_id, c->name, (int) c->peer.pid, (unsigned) c->peer.uid, conn_tenant_path(c));
                conn_send_error(c, false, 0, ESRCH, "the process that opened this connection has exited");
        }
        conn_free(c);
}

int conn_kill_pidfd(int pidfd, int sig) {
        return guard_pidfd_kill(pidfd, sig);
}

int conn_kill(struct conn *c, int sig) {
        return conn_kill_pidfd(c->peer.pidfd, sig);
}

/* ---- life cycle ---- */

int conn_new(struct worker *w, int fd) {
        struct manager *m = w->m;
        struct timeval tv = { .tv_sec = guard_frame_timeout_sec(m->guard) };
        unsigned max = 0;
        struct conn *c;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c) {
                close(fd);
                return -ENOMEM;
        }
        c->w = w;
        c->m = m;
        c->fd = fd;
        c->peer.pidfd = -1;
        c->state = CONN_HELLO;
        c->client_id = atomic_fetch_add(&m->next_client_id, 1);
        snprintf(c->name, sizeof(c->name), "unnamed");

        /* Who connected (the process as a pidfd), counted per uid. */
        r = auth_peer_from_socket(fd, &c->peer);
        if (r >= 0)
                r = guard_user_get(m->guard, c->peer.uid, &max);
        if (r < 0) {
                guard_refuse_peer(m->guard, fd, r, c->peer.pid, c->peer.uid, max);
                auth_peer_done(&c->peer);
                free(c);
                return r;
        }
        c->user_counted = true;

        MB_LIST_PREPEND(w->conns, c);
        w->nconns++;
        c->bev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!c->bev)
                close(fd);
        c->deadline = evtimer_new(w->base, conn_deadline_cb, c);
        if (c->peer.pidfd >= 0)
                c->peer_exit = event_new(w->base, c->peer.pidfd, EV_READ, conn_peer_exit_cb, c);
        if (!c->bev || !c->deadline || (c->peer.pidfd >= 0 && !c->peer_exit) || evtimer_add(c->deadline, &tv) < 0 ||
            (c->peer_exit && event_add(c->peer_exit, NULL) < 0)) {
                conn_free(c);
                return -ENOMEM;
        }
        bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
        log_debug("client %" PRIu64 " connected (pid %d, uid %u, gid %u)", c->client_id, (int) c->peer.pid,
                  (unsigned) c->peer.uid, (unsigned) c->peer.gid);
        return 0;
}

void conn_free(struct conn *c) {
        struct manager *m;
        struct worker *w;

        if (!c)
                return;
        m = c->m;
        w = c->w;

        if (c->attached) {
                struct tenant *t = c->tenant;
                uint64_t released = 0;

                /* A parked charge that was charged already (over high). */
                if (c->charge_parked && c->parked_charged)
                        page_counter_uncharge(&t->memory, c->parked_pages);
                c->charge_parked = false;

                /* Everything the client held goes back at once: hole-punched,
                 * freed and uncharged -- unless the daemon stops with its
                 * memory in the fd store: then the pages wait for the next
                 * daemon and the client (restart.h). */
                if (restart_preserving(m)) {
                        released = 0;
                } else if (c->held > 0) {
                        released = arena_release_owner(c->arena, c->owner, c->held);
                        page_counter_uncharge(&t->memory, released);
                        if (released != c->held)
                                log_error("client %" PRIu64 " of tenant %s held %" PRIu64
                                          " pages but %" PRIu64 " were found",
                                          c->client_id, t->path, c->held, released);
                }
                if (!restart_preserving(m)) {
                        restart_client_detach(m, c->arena, c->owner);
                        arena_owner_free(c->arena, c->owner);
                }
                /* The reclaimer learns it is gone (after its pages are). */
                reclaim_client_detach(TAKE_PTR(c->rc));

                if (c->stats_src) {
                        pthread_mutex_lock(&m->stats_lock);
                        rstat_source_detach(&m->tree->rstat, &t->rstat, c->stats_src, true);
                        pthread_mutex_unlock(&m->stats_lock);
                }
                log_info("client %" PRIu64 " (%s) detached from tenant %s, %" PRIu64 " pages returned", c->client_id,
                         c->name, t->path, released);
                /* Last: from here on the tenant may be removed. */
                manager_client_detached(m, t);
        }
        if (c->throttle_timer)
                event_free(c->throttle_timer);
        free(c->queued);
        if (c->stats)
                munmap(c->stats, c->stats_bytes);
        if (c->peer_exit)
                event_free(c->peer_exit); /* before its pidfd is closed */
        if (c->deadline)
                event_free(c->deadline);
        if (c->user_counted)
                guard_user_put(m->guard, c->peer.uid);
        auth_peer_done(&c->peer);
        if (c->bev)
                bufferevent_free(c->bev);

        MB_LIST_REMOVE(w->conns, c);
        w->nconns--;
        free(c);
}
