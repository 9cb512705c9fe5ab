/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "conn.h"
#include "log.h"
#include "macros.h"
#include "manager.h"
#include "worker.h"

static void worker_wakeup_cb(evutil_socket_t fd, short what, void *userdata) {
        struct worker *w = userdata;
        _cleanup_(freep) int *fds = NULL;
        size_t n;
        bool stopping;

        pthread_mutex_lock(&w->lock);
        fds = TAKE_PTR(w->pending);
        n = w->npending;
        w->npending = w->pending_alloc = 0;
        stopping = w->stopping;
        pthread_mutex_unlock(&w->lock);

        for (size_t i = 0; i < n; i++) {
                if (stopping)
                        close(fds[i]);
                else
                        (void) conn_new(w, fds[i]);
        }

        if (stopping) {
                /* Shutdown: every client's pages go back, as on a crash. */
                while (w->conns)
                        conn_free(w->conns);
                event_base_loopbreak(w->base);
        }
}

static void *worker_main(void *userdata) {
        struct worker *w = userdata;

        event_base_loop(w->base, EVLOOP_NO_EXIT_ON_EMPTY);
        return NULL;
}

int worker_new(struct manager *m, unsigned index, struct worker **ret) {
        struct worker *w;
        int r;

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->m = m;
        w->index = index;
        r = pthread_mutex_init(&w->lock, NULL);
        if (r != 0) {
                free(w);
                return -r;
        }

        w->extents = calloc(WORKER_MAX_UNCHARGE_EXTENTS, sizeof(*w->extents));
        w->pb_extents = calloc(MB_FRAME_MAX_EXTENTS, sizeof(*w->pb_extents));
        w->pb_extent_ptrs = calloc(MB_FRAME_MAX_EXTENTS, sizeof(*w->pb_extent_ptrs));
        w->frame = malloc(WIRE_HEADER_BYTES + WIRE_MAX_FRAME_BYTES);
        w->base = event_base_new();
        if (w->base)
                w->wakeup = event_new(w->base, -1, 0, worker_wakeup_cb, w);
        if (!w->extents || !w->pb_extents || !w->pb_extent_ptrs || !w->frame || !w->base || !w->wakeup) {
                worker_free(w);
                return -ENOMEM;
        }
        *ret = w;
        return 0;
}

int worker_start(struct worker *w) {
        int r;

        r = pthread_create(&w->thread, NULL, worker_main, w);
        if (r != 0)
                return -r;
        w->started = true;
        return 0;
}

void worker_add_fd(struct worker *w, int fd) {
        pthread_mutex_lock(&w->lock);
        if (w->stopping)
                goto refuse;
        if (w->npending == w->pending_alloc) {
                size_t n = MB_MAX(w->pending_alloc * 2, (size_t) 16);
                int *p = realloc(w->pending, n * sizeof(int));
                if (!p)
                        goto refuse;
                w->pending = p;
                w->pending_alloc = n;
        }
        w->pending[w->npending++] = fd;
        pthread_mutex_unlock(&w->lock);
        /* Thread-safe with evthread_use_pthreads(): wakes the worker's loop. */
        event_active(w->wakeup, EV_READ, 0);
        return;

refuse:
        pthread_mutex_unlock(&w->lock);
        close(fd);
}

void worker_stop(struct worker *w) {
        if (!w || !w->started)
                return;
        pthread_mutex_lock(&w->lock);
        w->stopping = true;
        pthread_mutex_unlock(&w->lock);
        event_active(w->wakeup, EV_READ, 0);
        pthread_join(w->thread, NULL);
        w->started = false;
}

void worker_free(struct worker *w) {
        if (!w)
                return;
        worker_stop(w);
        /* Connections never taken over (the thread never ran). */
        while (w->conns)
                conn_free(w->conns);
        for (size_t i = 0; i < w->npending; i++)
                close(w->pending[i]);
        free(w->pending);
        if (w->wakeup)
                event_free(w->wakeup);
        if (w->base)
                event_base_free(w->base);
        pthread_mutex_destroy(&w->lock);
        free(w->extents);
        free(w->pb_extents);
        free(w->pb_extent_ptrs);
        free(w->frame);
        free(w);
}
