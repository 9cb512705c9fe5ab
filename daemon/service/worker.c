/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "broker.h"
#include "guard.h"
#include "log.h"
#include "macros.h"
#include "mailbox.h"
#include "worker.h"

/* WORKER_STOP in the inbox: disconnect everyone and leave the loop. */
#define WORKER_STOP (-1)

/* The inbox's messages: an accepted socket to take over with the uid it
 * was admitted for, or WORKER_STOP.  Sockets that come after the stop are
 * closed. */
struct worker_accepted {
        int fd;
        uid_t uid;
};

static void worker_punch_cb(evutil_socket_t fd, short what, void *userdata);

static void worker_inbox_handle(void *userdata, void *msg) {
        struct worker *w = userdata;
        const struct worker_accepted *a = msg;

        if (a->fd != WORKER_STOP) {
                if (w->stopping) {
                        close(a->fd);
                        guard_release(w->b->guard, a->uid, true);
                } else
                        (void) w->ops->accept(w, a->fd, a->uid);
                return;
        }
        if (w->stopping)
                return;
        /* Shutdown: every client's pages go back, as on a crash. */
        w->stopping = true;
        w->ops->disconnect_all(w);
        event_base_loopbreak(w->base);
}

/* A socket never taken over. */
static void worker_inbox_dispose(void *userdata, void *msg) {
        struct worker *w = userdata;
        const struct worker_accepted *a = msg;

        if (a->fd >= 0) {
                close(a->fd);
                guard_release(w->b->guard, a->uid, true);
        }
}

static void *worker_main(void *userdata) {
        struct worker *w = userdata;

        event_base_loop(w->base, EVLOOP_NO_EXIT_ON_EMPTY);
        return NULL;
}

int worker_new(struct broker *b, unsigned index, const struct worker_ops *ops, struct worker **ret) {
        struct worker *w;
        int r;

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->b = b;
        w->ops = ops;
        w->index = index;

        w->extents = calloc(WORKER_MAX_UNCHARGE_EXTENTS, sizeof(*w->extents));
        w->pb_extents = calloc(MB_FRAME_MAX_EXTENTS, sizeof(*w->pb_extents));
        w->pb_extent_ptrs = calloc(MB_FRAME_MAX_EXTENTS, sizeof(*w->pb_extent_ptrs));
        w->frame = malloc(WIRE_HEADER_BYTES + WIRE_MAX_FRAME_BYTES);
        w->base = event_base_new();
        /* One priority for every event: the punch, activated by a
         * return, goes to the end of the loop turn's active queue, behind
         * the reads (and their replies) already due in this turn, and runs
         * in that turn whatever follows (a lower priority would starve
         * while clients keep the worker busy). */
        if (w->base) {
                w->punch_ev = event_new(w->base, -1, 0, worker_punch_cb, w);
                if (!w->punch_ev) {
                        worker_free(w);
                        return -ENOMEM;
                }
        }
        r = w->base ? mailbox_new(w->base, sizeof(struct worker_accepted), worker_inbox_handle, worker_inbox_dispose, w, &w->inbox)
                    : -ENOMEM;
        if (r < 0 || !w->extents || !w->pb_extents || !w->pb_extent_ptrs || !w->frame) {
                worker_free(w);
                return -ENOMEM;
        }
        *ret = w;
        return 0;
}

static int worker_punch_cmp(const void *x, const void *y) {
        const struct worker_punch *a = x, *b = y;

        if (a->arena != b->arena)
                return (uintptr_t) a->arena < (uintptr_t) b->arena ? -1 : 1;
        return a->start < b->start ? -1 : a->start > b->start;
}

void worker_flush_punch(struct worker *w) {
        size_t i = 0;

        if (w->npunch == 0)
                return;
        /* Several returns' extents in order: adjacent ones punch as one. */
        qsort(w->punch, w->npunch, sizeof(*w->punch), worker_punch_cmp);
        while (i < w->npunch) {
                struct arena_extent run = { w->punch[i].start, w->punch[i].count };
                struct arena *a = w->punch[i].arena;

                for (i++; i < w->npunch && w->punch[i].arena == a && w->punch[i].start == run.start + run.count; i++)
                        run.count += w->punch[i].count;
                arena_release_finish(a, &run, 1);
        }
        w->npunch = 0;
}

static void worker_punch_cb(evutil_socket_t fd, short what, void *userdata) {
        (void) fd;
        (void) what;
        worker_flush_punch(userdata);
}

void worker_defer_punch(struct worker *w, struct arena *a, const struct arena_extent *extents, size_t n) {
        if (n == 0)
                return;
        if (w->npunch + n > w->punch_alloc) {
                size_t want = MB_MAX(w->punch_alloc * 2, w->npunch + n);
                struct worker_punch *p = reallocarray(w->punch, want, sizeof(*p));

                if (!p) {
                        arena_release_finish(a, extents, n);
                        return;
                }
                w->punch = p;
                w->punch_alloc = want;
        }
        for (size_t i = 0; i < n; i++)
                w->punch[w->npunch++] = (struct worker_punch) { a, extents[i].start, extents[i].count };
        event_active(w->punch_ev, EV_TIMEOUT, 0);
}

int worker_start(struct worker *w) {
        int r;

        r = pthread_create(&w->thread, NULL, worker_main, w);
        if (r != 0)
                return -r;
        w->started = true;
        return 0;
}

void worker_add_fd(struct worker *w, int fd, uid_t uid) {
        struct worker_accepted a = { .fd = fd, .uid = uid };

        /* On failure (stopped, out of memory) the mailbox disposes of it. */
        (void) mailbox_post(w->inbox, &a);
}

void worker_stop(struct worker *w) {
        struct worker_accepted stop = { .fd = WORKER_STOP };

        if (!w || !w->started)
                return;
        if (mailbox_post(w->inbox, &stop) < 0)
                /* Cannot happen while the worker runs, save out of
                 * memory: stop the loop without disconnecting (the
                 * connections go in worker_free()). */
                event_base_loopbreak(w->base);
        pthread_join(w->thread, NULL);
        w->started = false;
        /* What came after the stop is closed; later sockets are refused. */
        mailbox_close(w->inbox);
}

void worker_free(struct worker *w) {
        if (!w)
                return;
        worker_stop(w);
        /* Connections never taken over (the thread never ran). */
        if (w->conns)
                w->ops->disconnect_all(w);
        worker_flush_punch(w);
        if (w->punch_ev)
                event_free(w->punch_ev);
        free(w->punch);
        mailbox_free(w->inbox); /* closes the sockets still queued */
        if (w->base)
                event_base_free(w->base);
        free(w->extents);
        free(w->pb_extents);
        free(w->pb_extent_ptrs);
        free(w->frame);
        free(w);
}
