/* SPDX-License-Identifier: MIT */
/*
 * conn.c - a client connection's transport: sending, framing and dispatch,
 * deadlines, the peer's exit, life cycle (see conn.h, conn-internal.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
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

#include "conn-internal.h"
#include "guard.h"
#include "log.h"
#include "macros.h"
#include "reclaim.h"
#include "worker.h"

static void conn_read_cb(struct bufferevent *bev, void *userdata);
static void conn_write_cb(struct bufferevent *bev, void *userdata);
static void conn_event_cb(struct bufferevent *bev, short what, void *userdata);

/* The batch policy is the core's (tenant_effective_charge_batch()): while a
 * tenant and its ancestors have nothing limited, no charge of it can meet a
 * limit, so its clients charge a larger batch per trip, the round trip
 * being the whole cost of a charge here; when a limit appears the next
 * Grant tells the client the normal batch (Grant.charge_batch).  A tenant
 * with clients (and its ancestors) cannot be removed, so no lock. */
unsigned conn_charge_batch(const struct broker *b, const struct tenant *t, unsigned current) {
        return tenant_effective_charge_batch(t, atomic_load(&b->charge_batch), current);
}

/* ---- sending ---- */

/* Pack @msg into the worker's frame buffer; returns the frame length or a
 * negative errno. */
ssize_t conn_pack(struct conn *c, const Mb__Msg *msg) {
        size_t n = mb__msg__get_packed_size(msg);
        uint32_t be;

        if (n == 0 || n > WIRE_MAX_FRAME_BYTES)
                return -EMSGSIZE;
        be = htonl((uint32_t) n);
        memcpy(c->w->frame, &be, sizeof(be));
        mb__msg__pack(msg, c->w->frame + WIRE_HEADER_BYTES);
        return (ssize_t) (WIRE_HEADER_BYTES + n);
}

int conn_send(struct conn *c, const Mb__Msg *msg) {
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

void conn_send_error(struct conn *c, bool has_seq, uint32_t seq, int code, const char *reason) {
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

const char *conn_tenant_path(const struct conn *c) {
        return c->tenant ? c->tenant->path : "-";
}

/* Send Error{code, reason}, stop reading and close once the Error has left
 * (or after a timeout). */
static void conn_close_error(struct conn *c, bool has_seq, uint32_t seq, int code, const char *reason) {
        struct timeval tv = { .tv_sec = CONN_CLOSE_TIMEOUT_SEC };

        conn_send_error(c, has_seq, seq, code, reason);
        c->state = CONN_CLOSING;
        evtimer_del(c->guard.deadline);
        bufferevent_disable(c->bev, EV_READ);
        bufferevent_set_timeouts(c->bev, NULL, &tv);
}

void conn_fail(struct conn *c, bool has_seq, uint32_t seq, int code, const char *fmt, ...) {
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

/* ---- statistics ---- */

void conn_daemon_stat(struct conn *c, enum mb_stat_item item, int64_t delta) {
        struct tenant_state *ts = c->ts;

        /* One slot per worker: this thread is its only writer.  The slots
         * are a region of their own whose writers maintain the dirty word
         * (tenant_state_prepare()). */
        mb_stat_slot_add(&ts->daemon_slots[c->w->index], item, delta);
        mb_stats_region_mark_dirty(mb_stats_region_of_slot(ts->daemon_slots, 0));
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
                case MB__MSG__BODY_PRESSURE_TRIGGER:
                        return conn_pressure_trigger(c, msg->pressure_trigger);
                case MB__MSG__BODY_HELLO:
                        return conn_fail(c, false, 0, EPROTO, "second Hello");
                default:
                        return conn_fail(c, false, 0, EPROTO, "unexpected %s from a client", wire_msg_name(msg));
                }

        case CONN_CLOSING:
                return;
        }
}

/* Over the bound on unread replies (guard.h): the session's own, or its
 * share while all sessions' together are over theirs. */
static bool conn_output_over(const struct conn *c) {
        size_t n = evbuffer_get_length(bufferevent_get_output(c->bev));

        return n > GUARD_OUTPUT_SESSION_BYTES ||
               (n > GUARD_OUTPUT_SHARE_BYTES && guard_output_bytes(c->b->guard) > GUARD_OUTPUT_TOTAL_BYTES);
}

/* Every change of the output buffer: the total of all sessions, and this
 * one's peak (for guard_output_freed()). */
static void conn_output_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *userdata) {
        struct conn *c = userdata;
        size_t len = info->orig_size + info->n_added - info->n_deleted;

        guard_output_add(c->b->guard, (int64_t) info->n_added - (int64_t) info->n_deleted);
        if (len > c->guard.output_peak)
                c->guard.output_peak = len;
}

/* The replies stayed unread over the bound for GUARD_OUTPUT_STALL_SEC: the
 * session ends, its pages go back (as dbus-daemon drops a connection over
 * max_outgoing_bytes).  An Error would wait behind what it does not read:
 * the log says why. */
static void conn_stall_cb(evutil_socket_t fd, short what, void *userdata) {
        struct conn *c = userdata;
        size_t n = evbuffer_get_length(bufferevent_get_output(c->bev));

        if (!conn_output_over(c)) {
                /* Drained below the bound (it reads, slowly): wait on. */
                if (c->reading_paused && n > 0)
                        evtimer_add(c->guard.stall_timer, &(struct timeval) { .tv_sec = GUARD_OUTPUT_STALL_SEC });
                return;
        }
        guard_log(c->b->guard, GUARD_OUTPUT_STALL,
                  "client %" PRIu64 " (%s, pid %d, uid %u, tenant %s) left %zu bytes of replies unread for %u s "
                  "(bound %u bytes, %" PRIu64 " bytes for all clients); closing, its %" PRIu64 " pages returned",
                  c->client_id, c->name, (int) c->peer.pid, (unsigned) c->peer.uid, conn_tenant_path(c), n,
                  GUARD_OUTPUT_STALL_SEC, GUARD_OUTPUT_SESSION_BYTES, guard_output_bytes(c->b->guard), c->held);
        conn_free(c);
}

/* Parse and handle every complete frame in the input buffer: copyout the
 * header, check the cap, wait for the whole frame, pullup, unpack, drain
 * (the incremental parse of an evbuffer). */
void conn_process_input(struct conn *c) {
        struct evbuffer *in = bufferevent_get_input(c->bev);
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
                if (conn_output_over(c) || c->charge.nqueued >= CONN_QUEUED_CHARGES_MAX) {
                        /* The client does not read its replies, or waits
                         * for reclaim: wait until they drained
                         * (conn_write_cb resumes); unread replies that stay
                         * over the bound end the session (conn_stall_cb). */
                        bufferevent_disable(c->bev, EV_READ);
                        c->reading_paused = true;
                        if (conn_output_over(c) && !evtimer_pending(c->guard.stall_timer, NULL))
                                evtimer_add(c->guard.stall_timer, &(struct timeval) { .tv_sec = GUARD_OUTPUT_STALL_SEC });
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
                if (r == -ERANGE)
                        return conn_fail(c, false, 0, EINVAL,
                                         "frame of %u bytes holds a value too large for its 32-bit field", payload);
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
                evtimer_del(c->guard.deadline);
        else if (dispatched || !evtimer_pending(c->guard.deadline, NULL))
                evtimer_add(c->guard.deadline, &(struct timeval) { .tv_sec = guard_frame_timeout_sec(c->b->guard) });
}

bool conn_maybe_finish(struct conn *c) {
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
        if (c->reading_paused && c->charge.nqueued < CONN_QUEUED_CHARGES_MAX) {
                evtimer_del(c->guard.stall_timer);
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
        if ((what & BEV_EVENT_ERROR) && c->state != CONN_CLOSING)
                log_info("client %" PRIu64 " (%s, pid %d, tenant %s): connection error: %s", c->client_id, c->name,
                         (int) c->peer.pid, conn_tenant_path(c), strerror(EVUTIL_SOCKET_ERROR()));
        conn_free(c);
}

/* FrameTimeoutSec= passed without a Hello, or within a frame. */
static void conn_deadline_cb(evutil_socket_t fd, short what, void *userdata) {
        struct conn *c = userdata;
        bool hello = c->state == CONN_HELLO;
        char reason[CONN_REASON_MAX_BYTES];

        snprintf(reason, sizeof(reason), hello ? "no Hello within %u s" : "a frame was not finished within %u s",
                 guard_frame_timeout_sec(c->b->guard));
        guard_log(c->b->guard, hello ? GUARD_HELLO_TIMEOUT : GUARD_FRAME_TIMEOUT,
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

void conn_free_all(struct worker *w) {
        while (w->conns)
                conn_free(w->conns);
}

const struct worker_ops conn_worker_ops = {
        .accept = conn_new,
        .disconnect_all = conn_free_all,
};

int conn_new(struct worker *w, int fd, uid_t uid) {
        struct broker *b = w->b;
        struct timeval tv = { .tv_sec = guard_frame_timeout_sec(b->guard) };
        unsigned max = 0;
        struct conn *c;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c) {
                close(fd);
                guard_release(b->guard, uid, true);
                return -ENOMEM;
        }
        c->w = w;
        c->b = b;
        c->fd = fd;
        c->peer.pidfd = -1;
        c->state = CONN_HELLO;
        c->client_id = atomic_fetch_add(&b->next_client_id, 1);
        snprintf(c->name, sizeof(c->name), "unnamed");

        /* Who connected (the process as a pidfd); counted for its uid
         * since the accept (guard_admit()). */
        r = auth_peer_from_socket(fd, &c->peer);
        if (r < 0) {
                guard_refuse_peer(b->guard, fd, r, c->peer.pid, uid, max);
                guard_release(b->guard, uid, true);
                auth_peer_done(&c->peer);
                free(c);
                return r;
        }
        c->guard.admitted_uid = uid;
        c->guard.user_counted = true;
        c->guard.incomplete = true;

        MB_LIST_PREPEND(w->conns, c);
        w->nconns++;
        c->bev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!c->bev)
                close(fd);
        c->guard.deadline = evtimer_new(w->base, conn_deadline_cb, c);
        c->guard.stall_timer = evtimer_new(w->base, conn_stall_cb, c);
        if (c->peer.pidfd >= 0)
                c->guard.peer_exit = event_new(w->base, c->peer.pidfd, EV_READ, conn_peer_exit_cb, c);
        if (!c->bev || !c->guard.deadline || !c->guard.stall_timer || (c->peer.pidfd >= 0 && !c->guard.peer_exit) ||
            evtimer_add(c->guard.deadline, &tv) < 0 || (c->guard.peer_exit && event_add(c->guard.peer_exit, NULL) < 0) ||
            !evbuffer_add_cb(bufferevent_get_output(c->bev), conn_output_cb, c)) {
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
        struct broker *b;
        struct worker *w;
        size_t peak;

        if (!c)
                return;
        b = c->b;
        w = c->w;

        if (c->attached) {
                struct tenant *t = c->tenant;
                uint64_t released = 0, left = 0;

                /* Pages it returned are punched before its arena may go. */
                worker_flush_punch(w);

                /* A parked charge that was charged already (over high). */
                if (c->charge.parked && c->charge.parked_charged)
                        page_counter_uncharge(&t->memory, c->charge.parked_pages);
                c->charge.parked = false;

                /* Its own mappings went with it (or will, with its process). */
                if (c->outside > 0) {
                        conn_daemon_stat(c, MB_STAT_ANON_MMAP, -(int64_t) c->outside);
                        page_counter_uncharge(&t->memory, c->outside);
                        c->outside = 0;
                }

                /* Everything the client held goes back at once: hole-punched,
                 * freed and uncharged -- unless the daemon stops with its
                 * memory in the fd store: then the pages wait for the next
                 * daemon and the client (restart.h).  A daemon that stops
                 * without it ends the session but punches nothing: the
                 * client may still be reading what it wrote, and zeros
                 * under its feet would be worse than the end of its
                 * accounting (a daemon killed outright punches nothing
                 * either).  The memory goes when the last mapping does. */
                if (b->ops->preserving(b)) {
                        released = 0;
                } else if (c->held > 0 && atomic_load(&b->stopping)) {
                        page_counter_uncharge(&t->memory, c->held);
                        left = c->held;
                } else if (c->held > 0) {
                        released = arena_release_owner(c->arena, c->owner, c->held);
                        page_counter_uncharge(&t->memory, released);
                        if (released != c->held)
                                log_error("client %" PRIu64 " of tenant %s held %" PRIu64
                                          " pages but %" PRIu64 " were found",
                                          c->client_id, t->path, c->held, released);
                }
                if (!b->ops->preserving(b)) {
                        b->ops->client_detach(b, c->arena, c->owner);
                        arena_owner_free(c->arena, c->owner);
                }
                /* The reclaimer learns it is gone (after its pages are). */
                reclaim_client_detach(TAKE_PTR(c->rc));

                if (c->stats_src) {
                        MB_LOCK_GUARD(&b->stats_lock);
                        rstat_source_detach(&b->tree->rstat, &t->rstat, c->stats_src, true);
                }
                if (c->psi.member)
                        tenant_pressure_change(t, -1, c->psi.stalled ? -1 : 0);
                atomic_fetch_add(&b->ndetached, 1);
                if (left > 0)
                        log_info("client %" PRIu64 " (%s) detached from tenant %s: the daemon stops, %" PRIu64
                                 " pages left to its mapping",
                                 c->client_id, c->name, t->path, left);
                else
                        log_info("client %" PRIu64 " (%s) detached from tenant %s, %" PRIu64 " pages returned",
                                 c->client_id, c->name, t->path, released);
                /* Last: from here on the tenant may be removed. */
                b->ops->client_detached(b, t);
        }
        if (c->charge.throttle_timer)
                event_free(c->charge.throttle_timer);
        conn_pressure_free(c);
        free(c->charge.queued);
        if (c->stats)
                munmap(c->stats, c->stats_bytes);
        if (c->guard.peer_exit)
                event_free(c->guard.peer_exit); /* before its pidfd is closed */
        if (c->guard.deadline)
                event_free(c->guard.deadline);
        if (c->guard.stall_timer)
                event_free(c->guard.stall_timer);
        if (c->guard.user_counted)
                guard_release(b->guard, c->guard.admitted_uid, c->guard.incomplete);
        auth_peer_done(&c->peer);
        if (c->bev) {
                struct evbuffer *out = bufferevent_get_output(c->bev);

                /* What it never read leaves the total with it. */
                if (evbuffer_remove_cb(out, conn_output_cb, c) == 0)
                        guard_output_add(b->guard, -(int64_t) evbuffer_get_length(out));
                bufferevent_free(c->bev);
        }

        MB_LIST_REMOVE(w->conns, c);
        w->nconns--;
        peak = c->guard.output_peak;
        free(c);
        guard_output_freed(b->guard, peak);
}
