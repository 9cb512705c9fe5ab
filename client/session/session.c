/* SPDX-License-Identifier: MIT */
/*
 * session.c - the request engine of a client: who reads the socket, the
 * threads waiting for replies, the calls to the daemon (Charge, Uncharge)
 * and the daemon's own messages (Reclaim and Drain, queued for reclaim.c;
 * Events, delivered to the application's callback).
 *
 * Every request/reply exchange of the application runs under conn_lock
 * (client.h), one at a time; replies are matched by `seq`.  Daemon-initiated
 * messages are read and handled by the library's own thread while the
 * application is busy, or with MB_CONNECT_NO_THREAD by mb_process() and by
 * threads waiting for a reply.  Event callbacks are called with no library
 * lock held, so that a callback may call back into the library.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

#include "core/client.h"
#include "session/reconnect.h"
#include "macros.h"
#include "session/session.h"
#include "wire.h"

/*
 * Who reads the socket.  Exactly one thread at a time is "the reader"
 * (c->reading, under io_lock): it reads frames without holding any lock and
 * hands each to whom it concerns (session_dispatch_locked()): a reply to the
 * thread waiting for that seq (struct waiter, woken through io_cond), a
 * Reclaim or Drain to the request queue, an Event to the event queue.  By
 * default the library's thread is the reader whenever nobody else is; a
 * thread waiting for its reply becomes the reader itself when nobody reads
 * (the library's thread may be busy in a shrinker, or absent with
 * MB_CONNECT_NO_THREAD) and gives the role up as soon as its reply is in.
 */

/* A thread waiting for the reply to its request (session_call()). */
struct waiter {
        uint32_t seq;
        bool done;
        Mb__Msg *reply;
        struct waiter *next;
};

int session_lost(mb_client *c) {
        if (c->forked) {
                mb_set_error("this membroker connection belongs to the parent process; "
                             "a child of fork() must connect anew");
                return -ECHILD;
        }
        MB_LOCK_GUARD(&c->session.io_lock);
        mb_set_error("the connection to membrokerd is lost: %s",
                     c->session.broken_reason ? c->session.broken_reason : "unknown reason");
        return c->session.broken ? c->session.broken : -ECONNRESET;
}

int session_break_locked(mb_client *c, int err, const char *reason) {
        mb_assert_mutex_held(&c->session.io_lock);
        if (c->session.broken == 0) {
                free(c->session.broken_reason);
                c->session.broken_reason = strdup(reason && *reason ? reason : "unknown reason");
                __atomic_store_n(&c->session.broken, err, __ATOMIC_RELEASE);
                c->session.hooks->broken_locked(c);
                c->session.nrequests = 0;
                if (c->session.notify_fd >= 0)
                        (void) eventfd_write(c->session.notify_fd, 1);
                pthread_cond_broadcast(&c->session.io_cond);
        }
        return err;
}

int session_break(mb_client *c, int err) {
        MB_LOCK_GUARD(&c->session.io_lock);
        return session_break_locked(c, err, mb_last_error());
}

static int session_protocol_error(mb_client *c, const char *what) {
        mb_set_error("protocol error: %s", what);
        return session_break(c, -EPROTO);
}

/* An Event for the application's callback (none registered: dropped). */
static void session_queue_event(mb_client *c, const char *name, uint64_t count) {
        struct pending_event *ev;
        char *copy = strdup(name);

        if (!copy)
                return;
        MB_LOCK_GUARD(&c->ev.lock);
        if (!c->ev.fn) {
                free(copy);
                return;
        }
        ev = realloc(c->ev.queue, (c->ev.n + 1) * sizeof(*ev));
        if (!ev) {
                free(copy);
                return;
        }
        c->ev.queue = ev;
        c->ev.queue[c->ev.n++] = (struct pending_event) { .name = copy, .count = count };
        __atomic_store_n(&c->ev.pending, 1, __ATOMIC_RELEASE);
}

void session_dispatch_events(mb_client *c) {
        struct pending_event *evs;
        size_t n;
        mb_event_fn fn;
        void *userdata;

        if (!__atomic_load_n(&c->ev.pending, __ATOMIC_ACQUIRE))
                return;
        session_assert_unlocked(c);
        pthread_mutex_lock(&c->ev.lock);
        evs = TAKE_PTR(c->ev.queue);
        n = c->ev.n;
        c->ev.n = 0;
        __atomic_store_n(&c->ev.pending, 0, __ATOMIC_RELAXED);
        fn = c->ev.fn;
        userdata = c->ev.userdata;
        pthread_mutex_unlock(&c->ev.lock);

        for (size_t i = 0; i < n; i++) {
                if (fn)
                        fn(c, evs[i].name, evs[i].count, userdata);
                free(evs[i].name);
        }
        free(evs);
}

static int session_cmp_ptr(const void *a, const void *b) {
        uintptr_t x = (uintptr_t) *(void *const *) a, y = (uintptr_t) *(void *const *) b;

        return x < y ? -1 : x > y;
}

uint32_t session_next_seq(mb_client *c) {
        return __atomic_add_fetch(&c->session.next_seq, 1, __ATOMIC_RELAXED);
}

/*
 * Send one frame; frames of several threads never interleave.  The pages of
 * an Uncharge stop being ours to re-claim after a daemon restart as it goes
 * out (under send_lock, which a reconnection holds: reconnect.h).
 */
static int session_send(mb_client *c, const Mb__Msg *msg) {
        MB_LOCK_GUARD(&c->session.send_lock);

        if (msg->body_case == MB__MSG__BODY_UNCHARGE && c->restart.held.bits) {
                MB_LOCK_GUARD(&c->restart.held_lock);

                for (size_t i = 0; i < msg->uncharge->n_extents; i++)
                        reconnect_held_clear(&c->restart.held, msg->uncharge->extents[i]->start,
                                             msg->uncharge->extents[i]->count);
        }
        return wire_conn_send(c->session.conn, msg);
}

/* The end of the connection without an Error: the daemon went away (a
 * restart).  Can this session be carried over? */
bool session_can_reconnect(const mb_client *c, int err) {
        return err == -ECONNRESET && c->restart.token != 0 && !c->forked && session_broken(c) == 0 && c->restart.held.bits &&
               !c->session.closing;
}

/* An Ack for an Uncharge lost with the previous daemon: its pages are not
 * re-claimed, so the next daemon returns them anyway. */
static int session_lost_ack(uint32_t seq, Mb__Msg **ret) {
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
static int session_read_failed(mb_client *c, int r) {
        if (!session_can_reconnect(c, r))
                return r;
        return c->session.hooks->reconnect(c);
}

static int session_call(mb_client *c, const Mb__Msg *req, uint32_t seq, Mb__Msg **ret);

/* session_call(), and a protocol error (@what) unless the reply is a
 * @body message. */
static int session_call_expect(mb_client *c, const Mb__Msg *req, uint32_t seq, Mb__Msg__BodyCase body,
                               const char *what, Mb__Msg **ret) {
        Mb__Msg *reply = NULL;
        int r;

        r = session_call(c, req, seq, &reply);
        if (r < 0)
                return r;
        if (reply->body_case != body) {
                mb__msg__free_unpacked(reply, NULL);
                return session_protocol_error(c, what);
        }
        *ret = reply;
        return 0;
}

static int session_uncharge_frames(mb_client *c, void **pages, size_t n, Mb__UnchargeReason reason, bool wait,
                                   bool has_reply_to, uint32_t reply_to, bool nothing_left) {
        _cleanup_(freep) Mb__Extent *ext = NULL;
        _cleanup_(freep) Mb__Extent **extp = NULL;
        size_t i = 0;
        int r;

        if (wait)
                mb_assert_mutex_held(&c->session.conn_lock);
        if (n == 0 && !has_reply_to)
                return 0;
        ext = calloc(MB_FRAME_MAX_EXTENTS, sizeof(*ext));
        extp = calloc(MB_FRAME_MAX_EXTENTS, sizeof(*extp));
        if (!ext || !extp)
                return -ENOMEM;
        if (n > 0)
                qsort(pages, n, sizeof(void *), session_cmp_ptr);

        do {
                Mb__Uncharge un = MB__UNCHARGE__INIT;
                Mb__Msg msg = MB__MSG__INIT;
                size_t next = 0;
                uint64_t npages = 0;
                Mb__Msg *reply = NULL;

                while (i < n && next < MB_FRAME_MAX_EXTENTS) {
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

                un.seq = session_next_seq(c);
                un.n_extents = next;
                un.extents = extp;
                un.has_reason = true;
                un.reason = reason;
                if (has_reply_to && i == n) {
                        un.has_reply_to = true;
                        un.reply_to = reply_to;
                        un.has_nothing_left = nothing_left;
                        un.nothing_left = nothing_left;
                }
                msg.body_case = MB__MSG__BODY_UNCHARGE;
                msg.uncharge = &un;

                if (!wait) {
                        r = session_send(c, &msg);
                        /* Lost with a daemon that restarted: these pages are
                         * not re-claimed, so it returns them anyway. */
                        if (r < 0 && !session_can_reconnect(c, r))
                                return session_break(c, r);
                        continue;
                }
                r = session_call_expect(c, &msg, un.seq, MB__MSG__BODY_ACK, "an Uncharge was not answered with an Ack",
                                        &reply);
                if (r < 0)
                        return r;
                mb__msg__free_unpacked(reply, NULL);
        } while (i < n);
        return 0;
}

int session_uncharge(mb_client *c, void **pages, size_t n, Mb__UnchargeReason reason, bool wait, bool has_reply_to,
                     uint32_t reply_to) {
        return session_uncharge_frames(c, pages, n, reason, wait, has_reply_to, reply_to, false);
}

int session_answer(mb_client *c, void **pages, size_t n, Mb__UnchargeReason reason, uint32_t reply_to,
                   bool nothing_left) {
        return session_uncharge_frames(c, pages, n, reason, false, true, reply_to, nothing_left);
}

static bool session_reply_seq(const Mb__Msg *m, uint32_t *ret) {
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

static void session_queue_request(mb_client *c, uint32_t seq, uint64_t pages) {
        if (c->session.nrequests == c->session.requests_alloc) {
                size_t a = MB_MAX(c->session.requests_alloc * 2, (size_t) 4);
                struct daemon_request *v = realloc(c->session.requests, a * sizeof(*v));

                if (!v) {
                        /* Unanswered, the daemon skips us after its timeout. */
                        return;
                }
                c->session.requests = v;
                c->session.requests_alloc = a;
        }
        c->session.requests[c->session.nrequests++] = (struct daemon_request) { .seq = seq, .pages = pages };
}

/* Hand one frame from the daemon to whom it concerns.  io_lock held; takes
 * @m. */
static void session_dispatch_locked(mb_client *c, Mb__Msg *m) {
        uint32_t seq;

        mb_assert_mutex_held(&c->session.io_lock);
        switch (m->body_case) {
        case MB__MSG__BODY_GRANT:
        case MB__MSG__BODY_ACK:
        case MB__MSG__BODY_ERROR:
                if (session_reply_seq(m, &seq))
                        for (struct waiter *w = c->session.waiters; w; w = w->next)
                                if (!w->done && w->seq == seq) {
                                        if (m->body_case == MB__MSG__BODY_GRANT && c->restart.held.bits) {
                                                /* Ours to re-claim after a restart from the
                                                 * moment they arrive (reconnect.h). */
                                                MB_LOCK_GUARD(&c->restart.held_lock);

                                                for (size_t i = 0; i < m->grant->n_extents; i++)
                                                        reconnect_held_set(&c->restart.held, m->grant->extents[i]->start,
                                                                           m->grant->extents[i]->count);
                                        }
                                        w->reply = m;
                                        w->done = true;
                                        pthread_cond_broadcast(&c->session.io_cond);
                                        return;
                                }
                if (m->body_case == MB__MSG__BODY_ACK)
                        break; /* of an Uncharge nobody waits for */
                if (m->body_case == MB__MSG__BODY_ERROR)
                        /* Not the reply to a request anybody waits for:
                         * fatal, the daemon closes the connection after it. */
                        session_break_locked(c, m->error->code > 0 ? -m->error->code : -EPROTO, m->error->reason);
                else
                        session_break_locked(c, -EPROTO, "protocol error: a Grant for no request");
                break;
        case MB__MSG__BODY_RECLAIM:
                session_queue_request(c, m->reclaim->seq, m->reclaim->pages);
                pthread_cond_broadcast(&c->session.io_cond);
                break;
        case MB__MSG__BODY_DRAIN:
                session_queue_request(c, m->drain->seq, UINT64_MAX);
                pthread_cond_broadcast(&c->session.io_cond);
                break;
        case MB__MSG__BODY_EVENT:
                session_queue_event(c, m->event->event, m->event->count);
                pthread_cond_broadcast(&c->session.io_cond);
                break;
        case MB__MSG__BODY_PRESSURE_EVENT:
                /* The kernel's trigger fd polls readable: ours is an
                 * eventfd, made readable here. */
                for (struct client_pressure_trigger *t = c->session.pressure_triggers; t; t = t->next)
                        if (t->id == m->pressure_event->id && t->fd >= 0)
                                (void) eventfd_write(t->fd, 1);
                break;
        default: {
                char what[128];

                snprintf(what, sizeof(what), "protocol error: unexpected %s message from membrokerd",
                         wire_msg_name(m));
                session_break_locked(c, -EPROTO, what);
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
static int session_read(mb_client *c, bool block, bool wake, const struct waiter *until) {
        int n = 0;

        mb_assert_mutex_not_held(&c->session.io_lock);
        mb_assert_debug(c->session.reading);
        for (;;) {
                Mb__Msg *m;
                bool done;
                int r;

                r = wire_conn_recv(c->session.conn, false, &m);
                if (r == -EAGAIN) {
                        struct pollfd p[2] = {
                                { .fd = c->session.conn->fd, .events = POLLIN },
                                { .fd = wake ? c->session.wake_fd : -1, .events = POLLIN },
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

                                (void) eventfd_read(c->session.wake_fd, &v);
                                return n;
                        }
                        continue;
                }
                if (r < 0)
                        return r;
                if (c->session.conn->nfds > 0)
                        wire_conn_close_fds(c->session.conn); /* only the Welcome carries descriptors */

                pthread_mutex_lock(&c->session.io_lock);
                session_dispatch_locked(c, m);
                done = until && until->done;
                pthread_mutex_unlock(&c->session.io_lock);
                n++;
                if (done)
                        return n;
        }
}

/* The reader is done (io_lock held): let the next one in, and with
 * MB_CONNECT_NO_THREAD make mb_get_fd() readable while a whole frame or a
 * request waits, since the socket alone would not say so. */
static void session_reader_done_locked(mb_client *c) {
        mb_assert_mutex_held(&c->session.io_lock);
        mb_assert_debug(c->session.reading);
        if (!c->session.thread_started && c->session.notify_fd >= 0 && (wire_conn_has_frame(c->session.conn) || c->session.nrequests > 0))
                (void) eventfd_write(c->session.notify_fd, 1);
        c->session.reading = false;
        pthread_cond_broadcast(&c->session.io_cond);
}

/*
 * A turn as the reader (io_lock held, nobody reading; held again on
 * return): wait for frames and dispatch them (until @until is done, or
 * with @wake until c->wake_fd says so), carry the session over to a
 * restarted daemon or end it when the connection fails, and let the next
 * reader in.
 */
static void session_read_turn_locked(mb_client *c, bool wake, const struct waiter *until) {
        int r;

        mb_assert_mutex_held(&c->session.io_lock);
        mb_assert_debug(!c->session.reading);
        c->session.reading = true;
        pthread_mutex_unlock(&c->session.io_lock);
        r = session_read(c, true, wake, until);
        if (r < 0)
                r = session_read_failed(c, r);
        pthread_mutex_lock(&c->session.io_lock);
        if (r < 0)
                session_break_locked(c, r, mb_last_error());
        session_reader_done_locked(c);
}

static void session_waiter_unlink_locked(mb_client *c, struct waiter *w) {
        mb_assert_mutex_held(&c->session.io_lock);
        for (struct waiter **p = &c->session.waiters; *p; p = &(*p)->next)
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
static int session_call(mb_client *c, const Mb__Msg *req, uint32_t seq, Mb__Msg **ret) {
        struct waiter w = { .seq = seq };
        /* The thread that answers the daemon's requests is this one. */
        bool self_answers = c->session.thread_started && mb_library_thread && pthread_equal(pthread_self(), c->session.thread);
        uint64_t gen;
        Mb__Msg *m;
        int r;

        mb_assert_mutex_held(&c->session.conn_lock);
        pthread_mutex_lock(&c->session.io_lock);
        if (c->session.broken) {
                pthread_mutex_unlock(&c->session.io_lock);
                return session_lost(c);
        }
        /* Registered before sending: the reply cannot come too early. */
        w.next = c->session.waiters;
        c->session.waiters = &w;
resend:
        gen = c->session.conn_gen;
        pthread_mutex_unlock(&c->session.io_lock);

        r = session_send(c, req);

        pthread_mutex_lock(&c->session.io_lock);
        if (r < 0 && !session_can_reconnect(c, r)) {
                char reason[MB_ERROR_MESSAGE_BYTES];
                struct timespec deadline;

                session_waiter_unlink_locked(c, &w);
                snprintf(reason, sizeof(reason), "%s", mb_last_error());
                /* The daemon may have said why before it closed. */
                if (!c->session.reading) {
                        c->session.reading = true;
                        pthread_mutex_unlock(&c->session.io_lock);
                        (void) session_read(c, false, false, NULL);
                        pthread_mutex_lock(&c->session.io_lock);
                        session_reader_done_locked(c);
                } else {
                        clock_gettime(CLOCK_MONOTONIC, &deadline);
                        deadline.tv_sec += 1;
                        while (!c->session.broken && pthread_cond_timedwait(&c->session.io_cond, &c->session.io_lock, &deadline) == 0)
                                ;
                }
                session_break_locked(c, r, reason);
                mb_set_error("%s", c->session.broken_reason);
                r = c->session.broken;
                pthread_mutex_unlock(&c->session.io_lock);
                return r;
        }
        /* A failed send on a connection that can be carried over: the
         * reader finds its end, reconnects, and conn_gen moves on. */

        while (!w.done && !c->session.broken) {
                if (c->session.conn_gen != gen) {
                        /* Lost with the daemon that went away. */
                        if (req->body_case == MB__MSG__BODY_UNCHARGE) {
                                session_waiter_unlink_locked(c, &w);
                                pthread_mutex_unlock(&c->session.io_lock);
                                return session_lost_ack(seq, ret);
                        }
                        goto resend;
                }
                if (self_answers && c->session.nrequests > 0) {
                        /* The library's thread waits for its own call (a
                         * charge ahead that met the limit after all, or a
                         * callback's): the daemon's Drain or Reclaim for
                         * that charge is ours to answer, here, as
                         * try_charge_memcg() drains the local stock and
                         * reclaims in the charging task's own context.
                         * Left for the thread, it would wait out
                         * ReclaimTimeoutMSec= for itself. */
                        pthread_mutex_unlock(&c->session.io_lock);
                        c->session.hooks->run_requests(c);
                        pthread_mutex_lock(&c->session.io_lock);
                        continue;
                }
                if (c->session.reading) {
                        pthread_cond_wait(&c->session.io_cond, &c->session.io_lock);
                        continue;
                }
                session_read_turn_locked(c, false, &w);
                if (!c->session.thread_started && c->session.nrequests > 0 && !w.done && !c->session.broken) {
                        /* Nobody else will answer: direct reclaim. */
                        pthread_mutex_unlock(&c->session.io_lock);
                        c->session.hooks->run_requests(c);
                        pthread_mutex_lock(&c->session.io_lock);
                }
        }
        session_waiter_unlink_locked(c, &w);
        if (!w.done) {
                /* The session broke while we waited: its reason is ours. */
                mb_set_error("%s", c->session.broken_reason ? c->session.broken_reason : "the connection to membrokerd is lost");
                r = c->session.broken;
                pthread_mutex_unlock(&c->session.io_lock);
                return r;
        }
        pthread_mutex_unlock(&c->session.io_lock);

        m = w.reply;
        if (m->body_case == MB__MSG__BODY_ERROR) {
                int code = m->error->code > 0 ? m->error->code : EPROTO;

                mb_set_error("%s", m->error->reason);
                mb__msg__free_unpacked(m, NULL);
                /* A refused trigger leaves the session as it was. */
                if (code == ENOMEM || (req->body_case == MB__MSG__BODY_PRESSURE_TRIGGER && code == EINVAL))
                        return -code;
                return session_break(c, -code);
        }
        *ret = m;
        return 0;
}

int session_pressure_trigger_locked(mb_client *c, uint32_t id, const char *trigger) {
        Mb__PressureTrigger pt = MB__PRESSURE_TRIGGER__INIT;
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Msg *reply = NULL;
        int r;

        pt.seq = session_next_seq(c);
        pt.id = id;
        pt.trigger = (char *) trigger;
        msg.body_case = MB__MSG__BODY_PRESSURE_TRIGGER;
        msg.pressure_trigger = &pt;
        r = session_call_expect(c, &msg, pt.seq, MB__MSG__BODY_ACK, "a PressureTrigger was not answered with an Ack",
                                &reply);
        if (r < 0)
                return r;
        mb__msg__free_unpacked(reply, NULL);
        return 0;
}

void session_pressure_resend_locked(mb_client *c) {
        mb_assert_mutex_held(&c->session.io_lock);
        for (struct client_pressure_trigger *t = c->session.pressure_triggers; t; t = t->next) {
                Mb__PressureTrigger pt = MB__PRESSURE_TRIGGER__INIT;
                Mb__Msg msg = MB__MSG__INIT;

                if (!t->active || !c->session.pressure_ok)
                        continue;
                pt.seq = session_next_seq(c);
                pt.id = t->id;
                pt.trigger = t->trigger;
                msg.body_case = MB__MSG__BODY_PRESSURE_TRIGGER;
                msg.pressure_trigger = &pt;
                (void) wire_conn_send(c->session.conn, &msg);
        }
}

int session_charge_locked(mb_client *c, uint32_t n, uint32_t need, void **out, size_t *ret_got, unsigned flags) {
        Mb__Charge ch = MB__CHARGE__INIT;
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Msg *reply = NULL;
        uint32_t batch;
        size_t got = 0;
        int r;

        ch.seq = session_next_seq(c);
        ch.pages = n;
        if (need < n) {
                ch.has_need = true;
                ch.need = need;
        }
        if (flags & MB_ALLOC_NORETRY) {
                ch.has_flags = true;
                ch.flags = WIRE_CHARGE_FLAG_NORETRY;
        }
        if (!(flags & SESSION_CHARGE_AHEAD)) {
                ch.has_waiting = true;
                ch.waiting = true;
        }
        msg.body_case = MB__MSG__BODY_CHARGE;
        msg.charge = &ch;

        r = session_call_expect(c, &msg, ch.seq, MB__MSG__BODY_GRANT, "a Charge was not answered with a Grant", &reply);
        if (r < 0)
                return r;
        for (size_t i = 0; i < reply->grant->n_extents; i++) {
                const Mb__Extent *e = reply->grant->extents[i];

                if (e->start >= c->arena_pages || e->count > c->arena_pages - e->start ||
                    e->count > n - got) {
                        mb__msg__free_unpacked(reply, NULL);
                        return session_protocol_error(c, "a Grant names pages outside the request or the arena");
                }
                for (uint32_t k = 0; k < e->count; k++)
                        out[got++] = c->base + ((e->start + k) << c->page_shift);
        }
        batch = reply->grant->has_charge_batch ? reply->grant->charge_batch : 0;
        __atomic_store_n(&c->refill.headroom,
                         reply->grant->has_headroom ? reply->grant->headroom : c->unlimited ? UINT64_MAX : 0,
                         __ATOMIC_RELAXED);
        mb__msg__free_unpacked(reply, NULL);
        if (got != n && got != need)
                return session_protocol_error(c, "a Grant carries fewer pages than charged");
        *ret_got = got;
        if (batch > 0)
                (void) c->session.hooks->batch_changed_locked(c, batch);
        return 0;
}

int session_charge_contig_locked(mb_client *c, uint32_t n, unsigned flags, void **ret) {
        Mb__Charge ch = MB__CHARGE__INIT;
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Msg *reply = NULL;
        const Mb__Extent *e;
        uint32_t batch;
        int r;

        ch.seq = session_next_seq(c);
        ch.pages = n;
        ch.has_contig_pages = true;
        ch.contig_pages = n;
        if (flags & MB_ALLOC_NORETRY) {
                ch.has_flags = true;
                ch.flags = WIRE_CHARGE_FLAG_NORETRY;
        }
        msg.body_case = MB__MSG__BODY_CHARGE;
        msg.charge = &ch;

        r = session_call_expect(c, &msg, ch.seq, MB__MSG__BODY_GRANT, "a Charge was not answered with a Grant", &reply);
        if (r < 0)
                return r;
        if (reply->grant->n_extents != 1) {
                mb__msg__free_unpacked(reply, NULL);
                return session_protocol_error(c, "a contiguous Grant carries more than one extent");
        }
        e = reply->grant->extents[0];
        if (e->start >= c->arena_pages || e->count != n || e->count > c->arena_pages - e->start) {
                mb__msg__free_unpacked(reply, NULL);
                return session_protocol_error(c, "a contiguous Grant names pages outside the request or the arena");
        }
        *ret = c->base + (e->start << c->page_shift);
        batch = reply->grant->has_charge_batch ? reply->grant->charge_batch : 0;
        __atomic_store_n(&c->refill.headroom,
                         reply->grant->has_headroom ? reply->grant->headroom : c->unlimited ? UINT64_MAX : 0,
                         __ATOMIC_RELAXED);
        mb__msg__free_unpacked(reply, NULL);
        if (batch > 0)
                (void) c->session.hooks->batch_changed_locked(c, batch);
        return 0;
}

int session_charge_outside_locked(mb_client *c, uint32_t n, unsigned flags) {
        Mb__Charge ch = MB__CHARGE__INIT;
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Msg *reply = NULL;
        uint32_t batch;
        int r;

        if (!c->session.outside_ok || n < 1 || n > MB_OUTSIDE_MAX_PAGES)
                return -EINVAL;
        ch.seq = session_next_seq(c);
        ch.pages = n;
        ch.has_flags = true;
        ch.flags = WIRE_CHARGE_FLAG_OUTSIDE | (flags & MB_ALLOC_NORETRY ? WIRE_CHARGE_FLAG_NORETRY : 0);
        ch.has_waiting = true;
        ch.waiting = true;
        msg.body_case = MB__MSG__BODY_CHARGE;
        msg.charge = &ch;
        r = session_call_expect(c, &msg, ch.seq, MB__MSG__BODY_GRANT, "a Charge was not answered with a Grant", &reply);
        if (r < 0)
                return r;
        if (reply->grant->n_extents != 0) {
                mb__msg__free_unpacked(reply, NULL);
                return session_protocol_error(c, "a Grant of pages outside the arena carries extents");
        }
        batch = reply->grant->has_charge_batch ? reply->grant->charge_batch : 0;
        __atomic_store_n(&c->refill.headroom,
                         reply->grant->has_headroom ? reply->grant->headroom : c->unlimited ? UINT64_MAX : 0,
                         __ATOMIC_RELAXED);
        mb__msg__free_unpacked(reply, NULL);
        if (batch > 0)
                (void) c->session.hooks->batch_changed_locked(c, batch);
        return 0;
}

int session_uncharge_outside(mb_client *c, uint64_t n) {
        Mb__Uncharge un = MB__UNCHARGE__INIT;
        Mb__Msg msg = MB__MSG__INIT;
        int r;

        if (n == 0)
                return 0;
        un.seq = session_next_seq(c);
        un.has_reason = true;
        un.reason = MB__UNCHARGE_REASON__UNCHARGE_FREE;
        un.has_outside_pages = true;
        un.outside_pages = n;
        msg.body_case = MB__MSG__BODY_UNCHARGE;
        msg.uncharge = &un;
        r = session_send(c, &msg);
        /* Lost with a daemon that restarted: the next one never had them. */
        if (r < 0 && !session_can_reconnect(c, r))
                return session_break(c, r);
        return 0;
}

int session_uncharge_extents(mb_client *c, const uint64_t *starts, const uint32_t *counts, size_t n) {
        Mb__Extent ext[SESSION_UNCHARGE_EXTENTS_MAX];
        Mb__Extent *extp[SESSION_UNCHARGE_EXTENTS_MAX];
        Mb__Uncharge un = MB__UNCHARGE__INIT;
        Mb__Msg msg = MB__MSG__INIT;
        int r;

        if (n == 0)
                return 0;
        if (n > SESSION_UNCHARGE_EXTENTS_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                mb__extent__init(&ext[i]);
                ext[i].start = starts[i];
                ext[i].count = counts[i];
                extp[i] = &ext[i];
        }
        un.seq = session_next_seq(c);
        un.n_extents = n;
        un.extents = extp;
        un.has_reason = true;
        un.reason = MB__UNCHARGE_REASON__UNCHARGE_FREE;
        msg.body_case = MB__MSG__BODY_UNCHARGE;
        msg.uncharge = &un;
        r = session_send(c, &msg);
        /* As session_uncharge() without waiting: lost with a daemon that
         * restarted, these pages are not re-claimed, so it returns them. */
        if (r < 0 && !session_can_reconnect(c, r))
                return session_break(c, r);
        return 0;
}

int session_uncharge_extent(mb_client *c, uint64_t start, uint32_t count) {
        return session_uncharge_extents(c, &start, &count, 1);
}

__thread bool mb_library_thread;

void *session_thread(void *userdata) {
        mb_library_thread = true;
        mb_client *c = userdata;

        pthread_mutex_lock(&c->session.io_lock);
        c->session.thread_running = true;
        pthread_cond_broadcast(&c->session.io_cond);
        while (!c->session.closing) {
                if (c->session.nrequests > 0 || __atomic_load_n(&c->ev.pending, __ATOMIC_ACQUIRE)) {
                        pthread_mutex_unlock(&c->session.io_lock);
                        c->session.hooks->run_requests(c);
                        session_dispatch_events(c);
                        pthread_mutex_lock(&c->session.io_lock);
                        continue;
                }
                if (__atomic_load_n(&c->refill.pending, __ATOMIC_ACQUIRE) && !c->session.broken) {
                        pthread_mutex_unlock(&c->session.io_lock);
                        c->session.hooks->refill(c);
                        pthread_mutex_lock(&c->session.io_lock);
                        continue;
                }
                if (c->session.reading || c->session.broken) {
                        pthread_cond_wait(&c->session.io_cond, &c->session.io_lock);
                        continue;
                }
                session_read_turn_locked(c, true, NULL);
        }
        pthread_mutex_unlock(&c->session.io_lock);
        return NULL;
}

/* ---- daemon messages on demand ---- */

int mb_get_fd(mb_client *c) {
        if (c->forked)
                return session_lost(c);
        return c->session.poll_fd;
}

int mb_process(mb_client *c) {
        eventfd_t v;
        int r = 0;

        if (c->forked)
                return session_lost(c);
        (void) eventfd_read(c->session.notify_fd, &v);
        pthread_mutex_lock(&c->session.io_lock);
        if (!c->session.broken && !c->session.reading) {
                c->session.reading = true;
                pthread_mutex_unlock(&c->session.io_lock);
                r = session_read(c, false, false, NULL);
                pthread_mutex_lock(&c->session.io_lock);
                if (r < 0)
                        session_break_locked(c, r, mb_last_error());
                session_reader_done_locked(c);
        }
        pthread_mutex_unlock(&c->session.io_lock);
        /* Another thread may be reading: then it handles what comes. */
        c->session.hooks->run_requests(c);
        session_dispatch_events(c);
        if (session_broken(c))
                return session_lost(c);
        return r;
}

int mb_set_event_callback(mb_client *c, mb_event_fn fn, void *userdata) {
        MB_LOCK_GUARD(&c->ev.lock);

        c->ev.fn = fn;
        c->ev.userdata = userdata;
        return 0;
}

void session_done(mb_client *c) {
        wire_conn_free(c->session.conn);
        c->session.conn = NULL;
        reconnect_held_done(&c->restart.held);
}
