/* SPDX-License-Identifier: MIT */
/*
 * mailbox.c - cross-thread queue + event + drain under a lock (see
 * mailbox.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "macros.h"
#include "mailbox.h"

#define MAILBOX_INITIAL_SLOTS 16u

struct mailbox {
        pthread_mutex_t lock;   /* protects msgs, n, alloc, closed and ev's activation */
        unsigned char *msgs;    /* n messages of msg_size bytes */
        size_t n, alloc;
        bool closed;
        struct event *ev;       /* in the receiver's base */
        size_t msg_size;
        mailbox_handler_t handle;
        mailbox_dispose_t dispose;
        void *userdata;
};

static void mailbox_dispose_all(struct mailbox *box, unsigned char *msgs, size_t n) {
        for (size_t i = 0; box->dispose && i < n; i++)
                box->dispose(box->userdata, msgs + i * box->msg_size);
        free(msgs);
}

/* The receiver's loop: take the whole queue, then handle without the lock. */
static void mailbox_cb(evutil_socket_t fd, short what, void *userdata) {
        struct mailbox *box = userdata;
        unsigned char *msgs;
        size_t n;

        pthread_mutex_lock(&box->lock);
        msgs = TAKE_PTR(box->msgs);
        n = box->n;
        box->n = box->alloc = 0;
        pthread_mutex_unlock(&box->lock);

        for (size_t i = 0; i < n; i++)
                box->handle(box->userdata, msgs + i * box->msg_size);
        free(msgs);
}

int mailbox_new(struct event_base *base, size_t msg_size, mailbox_handler_t handle, mailbox_dispose_t dispose,
                void *userdata, struct mailbox **ret) {
        struct mailbox *box;

        if (msg_size == 0 || !handle)
                return -EINVAL;
        box = calloc(1, sizeof(*box));
        if (!box)
                return -ENOMEM;
        if (pthread_mutex_init(&box->lock, NULL) != 0) {
                free(box);
                return -ENOMEM;
        }
        box->ev = event_new(base, -1, 0, mailbox_cb, box);
        if (!box->ev) {
                pthread_mutex_destroy(&box->lock);
                free(box);
                return -ENOMEM;
        }
        box->msg_size = msg_size;
        box->handle = handle;
        box->dispose = dispose;
        box->userdata = userdata;
        *ret = box;
        return 0;
}

int mailbox_post(struct mailbox *box, const void *msg) {
        int r = 0;

        pthread_mutex_lock(&box->lock);
        if (box->closed) {
                r = -ESHUTDOWN;
                goto drop;
        }
        if (box->n == box->alloc) {
                size_t a = MB_MAX(box->alloc * 2, (size_t) MAILBOX_INITIAL_SLOTS);
                unsigned char *p = realloc(box->msgs, a * box->msg_size);

                if (!p) {
                        r = -ENOMEM;
                        goto drop;
                }
                box->msgs = p;
                box->alloc = a;
        }
        memcpy(box->msgs + box->n++ * box->msg_size, msg, box->msg_size);
        /* Under the lock: mailbox_close() frees the event only after
         * taking it.  Activating an active event is a no-op, so a burst of
         * posts costs one wakeup. */
        event_active(box->ev, EV_READ, 0);
        pthread_mutex_unlock(&box->lock);
        return 0;

drop:
        pthread_mutex_unlock(&box->lock);
        if (box->dispose)
                box->dispose(box->userdata, (void *) msg);
        return r;
}

void mailbox_close(struct mailbox *box) {
        unsigned char *msgs;
        size_t n;

        if (!box)
                return;
        pthread_mutex_lock(&box->lock);
        box->closed = true;
        msgs = TAKE_PTR(box->msgs);
        n = box->n;
        box->n = box->alloc = 0;
        pthread_mutex_unlock(&box->lock);
        mailbox_dispose_all(box, msgs, n);
        if (box->ev) {
                event_free(box->ev);
                box->ev = NULL;
        }
}

void mailbox_free(struct mailbox *box) {
        if (!box)
                return;
        mailbox_close(box);
        pthread_mutex_destroy(&box->lock);
        free(box);
}

size_t mailbox_pending(struct mailbox *box) {
        size_t n;

        pthread_mutex_lock(&box->lock);
        n = box->n;
        pthread_mutex_unlock(&box->lock);
        return n;
}
