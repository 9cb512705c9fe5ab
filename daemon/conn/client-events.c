/* SPDX-License-Identifier: MIT */
/*
 * client-events.c - memory events told to the clients (see
 * client-events.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "client-events.h"
#include "log.h"
#include "macros.h"
#include "mailbox.h"
#include "reclaim.h"
#include "tenant_state.h"
#include "worker.h"

struct client_events {
        struct broker *b;
        const struct reclaim_client_ops *ops;
        struct mailbox **boxes; /* one per worker, by worker index */
        unsigned nboxes;
        bool shutting_down;
};

/* One Event frame for one client; the message owns its strings and a
 * reference to the client. */
struct event_msg {
        struct reclaim_client *rc;
        char *event;
        char *tenant;
        uint64_t count;
};

static void event_msg_dispose(void *userdata, void *p) {
        struct event_msg *msg = p;

        reclaim_client_unref(msg->rc);
        free(msg->event);
        free(msg->tenant);
}

/* On the client's worker thread, which owns rc->conn. */
static void event_msg_handle(void *userdata, void *p) {
        const struct client_events *ce = userdata;
        struct event_msg *msg = p;

        if (msg->rc->conn)
                ce->ops->send_event(msg->rc->conn, msg->event, msg->count, msg->tenant);
        event_msg_dispose(NULL, msg);
}

struct event_walk {
        struct client_events *ce;
        const char *event;
        uint64_t count;
        const char *path;
};

static int event_walk_cb(struct tenant *t, void *userdata) {
        struct event_walk *ew = userdata;
        struct tenant_state *ts = tenant_state_of(t);

        if (!ts || t->nchildren > 0 || atomic_load(&t->nclients) == 0)
                return 0;
        pthread_mutex_lock(&ts->lock);
        for (struct reclaim_client *rc = ts->clients; rc; rc = rc->next) {
                struct event_msg msg = { .event = strdup(ew->event), .tenant = strdup(ew->path), .count = ew->count };
                unsigned i = rc->worker;

                if (!msg.event || !msg.tenant) {
                        event_msg_dispose(NULL, &msg);
                        break;
                }
                if (i >= ew->ce->nboxes) {
                        event_msg_dispose(NULL, &msg);
                        continue;
                }
                msg.rc = reclaim_client_ref(rc);
                if (mailbox_post(ew->ce->boxes[i], &msg) == -ENOMEM)
                        log_error("out of memory, an %s event is not told to client %" PRIu64, ew->event,
                                  rc->client_id);
        }
        pthread_mutex_unlock(&ts->lock);
        return 0;
}

void client_events_deliver(struct client_events *ce, struct tenant *t, enum mb_event event, uint64_t count) {
        struct event_walk ew = { .ce = ce, .event = mb_event_to_string(event), .count = count, .path = t->path };

        if (ce)
                broker_assert_main_thread(ce->b);
        if (!ce || ce->shutting_down || !ew.event)
                return;
        (void) tenant_walk(t, event_walk_cb, &ew);
}

int client_events_new(struct broker *b, const struct reclaim_client_ops *ops, struct client_events **ret) {
        struct client_events *ce;
        int r;

        broker_assert_main_thread(b);
        ce = calloc(1, sizeof(*ce));
        if (!ce)
                return -ENOMEM;
        ce->b = b;
        ce->ops = ops;
        ce->boxes = calloc(MB_MAX(b->nworkers, 1u), sizeof(struct mailbox *));
        if (!ce->boxes) {
                free(ce);
                return -ENOMEM;
        }
        ce->nboxes = b->nworkers;
        for (unsigned i = 0; i < b->nworkers; i++) {
                r = mailbox_new(b->workers[i]->base, sizeof(struct event_msg), event_msg_handle, event_msg_dispose,
                                ce, &ce->boxes[i]);
                if (r < 0) {
                        client_events_free(ce);
                        return r;
                }
        }
        *ret = ce;
        return 0;
}

void client_events_shutdown(struct client_events *ce) {
        if (!ce || ce->shutting_down)
                return;
        ce->shutting_down = true;
        for (unsigned i = 0; i < ce->nboxes; i++)
                mailbox_close(ce->boxes[i]);
}

void client_events_free(struct client_events *ce) {
        if (!ce)
                return;
        client_events_shutdown(ce);
        for (unsigned i = 0; i < ce->nboxes; i++)
                mailbox_free(ce->boxes[i]);
        free(ce->boxes);
        free(ce);
}
