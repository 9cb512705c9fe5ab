/* SPDX-License-Identifier: MIT */
/*
 * client.c - libmembroker's client object (client.h): its lifetime and the
 * accessors of the public and internal (mb_internal.h) API.  The work is
 * done by the parts: session/, stock/, slab/, malloc/, composed by api/.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/client.h"
#include "macros.h"
#include "core/mb_internal.h"
#include "membroker.h"
#include "core/pcpu_lock.h"

mb_client *client_new(unsigned flags) {
        pthread_condattr_t ca;
        mb_client *c;

        c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        pthread_mutex_init(&c->session.conn_lock, NULL);
        pthread_mutex_init(&c->ev.lock, NULL);
        pthread_mutex_init(&c->session.io_lock, NULL);
        pthread_mutex_init(&c->session.send_lock, NULL);
        pthread_mutex_init(&c->restart.held_lock, NULL);
        pthread_mutex_init(&c->spill.lock, NULL);
        pthread_rwlock_init(&c->shrink.lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&c->session.io_cond, &ca);
        pthread_condattr_destroy(&ca);
        c->session.wake_fd = c->session.notify_fd = c->session.poll_fd = -1;
        c->flags = flags;
        c->rseq_offset = pcpu_rseq_cpu_offset();
        c->rseq_area = __rseq_offset;
        return c;
}

void client_free(mb_client *c) {
        if (!c)
                return;
        if (c->session.wake_fd >= 0)
                close(c->session.wake_fd);
        if (c->session.notify_fd >= 0)
                close(c->session.notify_fd);
        if (c->session.poll_fd >= 0)
                close(c->session.poll_fd);
        free(c->session.requests);
        if (c->base)
                munmap(c->base, c->arena_bytes);
        if (c->stats)
                munmap(c->stats, c->stats_bytes);
        free(c->stocks);
        free(c->stock_pages);
        free(c->spill.pages);
        free(c->tenant);
        free(c->restart.socket_path);
        free(c->session.broken_reason);
        for (size_t i = 0; i < c->ev.n; i++)
                free(c->ev.queue[i].name);
        free(c->ev.queue);
        free(c->shrink.list);
        while (c->session.pressure_triggers) {
                struct client_pressure_trigger *t = c->session.pressure_triggers;

                c->session.pressure_triggers = t->next;
                if (t->fd >= 0)
                        close(t->fd);
                free(t->trigger);
                free(t);
        }
        if (!c->forked) {
                /* A child may inherit these locked by a thread it lacks. */
                pthread_mutex_destroy(&c->session.conn_lock);
                pthread_mutex_destroy(&c->ev.lock);
                pthread_mutex_destroy(&c->session.io_lock);
                pthread_mutex_destroy(&c->session.send_lock);
                pthread_mutex_destroy(&c->restart.held_lock);
                pthread_cond_destroy(&c->session.io_cond);
                pthread_rwlock_destroy(&c->shrink.lock);
        }
        free(c);
}

/* ---- accessors ---- */

mb_handle_t mb_page_to_handle(const mb_client *c, const void *page) {
        if (!client_page_valid(c, page))
                return MB_HANDLE_INVALID;
        return (mb_handle_t) ((uintptr_t) page - (uintptr_t) c->base) >> c->page_shift;
}

void *mb_handle_to_page(const mb_client *c, mb_handle_t handle) {
        if (handle >= c->arena_pages) {
                errno = EINVAL;
                return NULL;
        }
        return c->base + (handle << c->page_shift);
}

size_t mb_page_size(const mb_client *c) {
        return c->page_size;
}

unsigned mb_charge_batch(const mb_client *c) {
        return __atomic_load_n(&c->charge_batch, __ATOMIC_RELAXED);
}

const char *mb_tenant_path(const mb_client *c) {
        return c->tenant;
}

uint64_t mb_client_id(const mb_client *c) {
        return c->client_id;
}

/* ---- mb_internal.h ---- */

unsigned mb_client_cpu(const mb_client *c) {
        return pcpu_current_cpu(c->rseq_offset, c->ncpus);
}

unsigned mb_client_ncpus(const mb_client *c) {
        return c->ncpus;
}

const struct mb_stats_region *mb_client_stats_region(const mb_client *c) {
        return c->stats;
}
