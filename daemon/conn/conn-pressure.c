/* SPDX-License-Identifier: MIT */
/*
 * conn-pressure.c - a client's PSI triggers on its own tenant (see
 * conn-internal.h): PressureTrigger adds or removes one, PressureEvent
 * tells the client that one fired.
 *
 * As the kernel's psi_trigger written to a cgroup's memory.pressure: the
 * trigger belongs to the connection and goes with it.  The connection's
 * worker samples the tenant's totals (psi_group_totals(), the group's own
 * lock) with one timer per connection, every tenth of the shortest window
 * (the kernel's polling period, rtpoll_min_period), and
 * psi_trigger_update() decides.  The tenant outlives the connection (a
 * tenant with clients is not removed), so no lookup is needed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "conn-internal.h"
#include "log.h"
#include "macros.h"
#include "psi.h"
#include "reclaim.h"
#include "worker.h"

/* Per connection, as the kernel bounds nothing but memory: enough for a
 * few thresholds on each of some and full. */
#define CONN_PRESSURE_TRIGGERS_MAX 16u
#define CONN_PRESSURE_POLL_DIVISOR 10u

struct conn_pressure_trigger {
        uint32_t id;
        struct psi_trigger tr;
};

static void conn_pressure_send_event(struct conn *c, uint32_t id) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__PressureEvent ev = MB__PRESSURE_EVENT__INIT;

        /* Like Event: a client that does not read gets none. */
        if (c->state != CONN_READY ||
            evbuffer_get_length(bufferevent_get_output(c->bev)) > RECLAIM_EVENT_OUTPUT_MAX_BYTES)
                return;
        ev.id = id;
        msg.body_case = MB__MSG__BODY_PRESSURE_EVENT;
        msg.pressure_event = &ev;
        (void) conn_send(c, &msg);
}

static void conn_pressure_tick(evutil_socket_t fd, short what, void *userdata) {
        struct conn *c = userdata;
        uint64_t now = psi_now_usec(), totals[_PSI_KIND_NR];

        (void) fd;
        (void) what;
        if (c->state != CONN_READY || c->psi.ntriggers == 0)
                return;
        psi_group_totals(&c->tenant->psi, now, totals);
        for (size_t i = 0; i < c->psi.ntriggers; i++) {
                struct conn_pressure_trigger *t = &c->psi.triggers[i];

                if (psi_trigger_update(&t->tr, totals[t->tr.kind], now))
                        conn_pressure_send_event(c, t->id);
        }
}

/* (Re)arm the timer at a tenth of the shortest window, or stop it. */
static int conn_pressure_arm(struct conn *c) {
        uint64_t period = UINT64_MAX;
        struct timeval tv;

        if (c->psi.ntriggers == 0) {
                if (c->psi.timer)
                        event_del(c->psi.timer);
                return 0;
        }
        for (size_t i = 0; i < c->psi.ntriggers; i++)
                period = MB_MIN(period, c->psi.triggers[i].tr.window_usec / CONN_PRESSURE_POLL_DIVISOR);
        if (!c->psi.timer) {
                c->psi.timer = event_new(c->w->base, -1, EV_PERSIST, conn_pressure_tick, c);
                if (!c->psi.timer)
                        return -ENOMEM;
        }
        tv = (struct timeval) { .tv_sec = (time_t) (period / 1000000u), .tv_usec = (suseconds_t) (period % 1000000u) };
        return event_add(c->psi.timer, &tv) < 0 ? -EIO : 0;
}

static struct conn_pressure_trigger *conn_pressure_find(struct conn *c, uint32_t id) {
        for (size_t i = 0; i < c->psi.ntriggers; i++)
                if (c->psi.triggers[i].id == id)
                        return &c->psi.triggers[i];
        return NULL;
}

static void conn_pressure_ack(struct conn *c, uint32_t seq) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Ack ack = MB__ACK__INIT;

        ack.seq = seq;
        ack.pages = 0;
        msg.body_case = MB__MSG__BODY_ACK;
        msg.ack = &ack;
        if (conn_send(c, &msg) < 0)
                conn_fail(c, true, seq, ENOMEM, "cannot queue the Ack");
}

static void conn_pressure_add(struct conn *c, const Mb__PressureTrigger *pt) {
        uint64_t threshold, window, now = psi_now_usec(), totals[_PSI_KIND_NR];
        struct conn_pressure_trigger *t;
        enum psi_kind kind;

        if (psi_trigger_parse(pt->trigger, &kind, &threshold, &window) < 0)
                return conn_send_error(c, true, pt->seq, EINVAL,
                                       "a pressure trigger is \"some|full THRESHOLD_USEC WINDOW_USEC\" with a "
                                       "window of 500000..10000000 and 0 < threshold <= window");
        if (conn_pressure_find(c, pt->id))
                return conn_send_error(c, true, pt->seq, EINVAL, "pressure trigger id in use");
        if (c->psi.ntriggers >= CONN_PRESSURE_TRIGGERS_MAX)
                return conn_send_error(c, true, pt->seq, EINVAL, "too many pressure triggers");
        t = realloc(c->psi.triggers, (c->psi.ntriggers + 1) * sizeof(*t));
        if (!t)
                return conn_fail(c, true, pt->seq, ENOMEM, "out of memory");
        c->psi.triggers = t;
        t = &c->psi.triggers[c->psi.ntriggers++];
        t->id = pt->id;
        psi_group_totals(&c->tenant->psi, now, totals);
        psi_trigger_init(&t->tr, kind, threshold, window, totals[kind], now);
        if (conn_pressure_arm(c) < 0) {
                c->psi.ntriggers--;
                return conn_fail(c, true, pt->seq, ENOMEM, "cannot arm the pressure trigger");
        }
        log_debug("client %" PRIu64 ": pressure trigger %u on %s: \"%s\"", c->client_id, pt->id, c->tenant->path,
                  pt->trigger);
        conn_pressure_ack(c, pt->seq);
}

static void conn_pressure_remove(struct conn *c, const Mb__PressureTrigger *pt) {
        struct conn_pressure_trigger *t = conn_pressure_find(c, pt->id);

        if (!t)
                return conn_send_error(c, true, pt->seq, EINVAL, "no such pressure trigger");
        *t = c->psi.triggers[--c->psi.ntriggers];
        (void) conn_pressure_arm(c);
        conn_pressure_ack(c, pt->seq);
}

void conn_pressure_trigger(struct conn *c, const Mb__PressureTrigger *pt) {
        if (pt->trigger)
                conn_pressure_add(c, pt);
        else
                conn_pressure_remove(c, pt);
}

void conn_pressure_free(struct conn *c) {
        if (c->psi.timer)
                event_free(c->psi.timer);
        c->psi.timer = NULL;
        free(c->psi.triggers);
        c->psi.triggers = NULL;
        c->psi.ntriggers = 0;
}
