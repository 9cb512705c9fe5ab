/* SPDX-License-Identifier: MIT */
/*
 * client.c - libmembroker's client object (client.h): its errors, its
 * lifetime, its fate in a fork() child, and the accessors of the public and
 * internal (mb_internal.h) API.  The work is done by stock.c, session.c,
 * reclaim.c and connect.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
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
#include "stock/stock.h"

/* ---- errors ---- */

static __thread char error_message[ERROR_MESSAGE_BYTES];

void mb_set_error(const char *fmt, ...) {
        char buf[ERROR_MESSAGE_BYTES];
        va_list ap;

        /* Through a copy, so that an argument may be mb_last_error(). */
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        memcpy(error_message, buf, sizeof(buf));
}

const char *mb_last_error(void) {
        return error_message;
}

/* ---- fork(): every live client, disabled in the child ---- */

static pthread_mutex_t client_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t client_registry_once = PTHREAD_ONCE_INIT;
static mb_client *client_registry_head;

static void client_registry_prepare(void) {
        pthread_mutex_lock(&client_registry_lock);
}

static void client_registry_parent(void) {
        pthread_mutex_unlock(&client_registry_lock);
}

/* In the child: every connection belongs to the parent.  Empty and disable
 * the stocks (so that every alloc and free takes the slow path, which
 * refuses with -ECHILD) without writing anything the parent shares: the
 * stocks are private memory, the stats region and the arena are not. */
static void client_registry_child(void) {
        for (mb_client *c = client_registry_head; c; c = c->reg_next) {
                c->forked = true;
                /* Atomic mode: taking a stock's lock in rseq mode rewrites
                 * the CPU's stats slot (stock.h), which is the parent's. */
                c->rseq_lock = false;
                c->rseq_ncpus = 0;
                for (unsigned i = 0; i < c->ncpus; i++) {
                        c->stocks[i].word = 0;
                        c->stocks[i].limit = 0;
                }
        }
        /* The membarrier registration of the child's new address space is
         * pcpu_lock.c's fork handler. */
        pthread_mutex_unlock(&client_registry_lock);
}

static void client_registry_init(void) {
        (void) pthread_atfork(client_registry_prepare, client_registry_parent, client_registry_child);
}

void client_registry_add(mb_client *c) {
        MB_LOCK_GUARD(&client_registry_lock);

        c->reg_next = client_registry_head;
        if (client_registry_head)
                client_registry_head->reg_prev = c;
        client_registry_head = c;
}

void client_registry_remove(mb_client *c) {
        MB_LOCK_GUARD(&client_registry_lock);

        if (c->reg_prev)
                c->reg_prev->reg_next = c->reg_next;
        else if (client_registry_head == c)
                client_registry_head = c->reg_next;
        if (c->reg_next)
                c->reg_next->reg_prev = c->reg_prev;
        c->reg_prev = c->reg_next = NULL;
}

mb_client *client_new(unsigned flags) {
        pthread_condattr_t ca;
        mb_client *c;

        (void) pthread_once(&client_registry_once, client_registry_init);
        c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        pthread_mutex_init(&c->conn_lock, NULL);
        pthread_mutex_init(&c->cb_lock, NULL);
        pthread_mutex_init(&c->io_lock, NULL);
        pthread_mutex_init(&c->send_lock, NULL);
        pthread_mutex_init(&c->held_lock, NULL);
        pthread_rwlock_init(&c->shrinker_lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&c->io_cond, &ca);
        pthread_condattr_destroy(&ca);
        c->wake_fd = c->notify_fd = c->poll_fd = -1;
        c->flags = flags;
        c->rseq_offset = pcpu_rseq_cpu_offset();
        c->rseq_area = __rseq_offset;
        c->rseq_lock = stock_rseq_mode();
        return c;
}

void client_free(mb_client *c) {
        if (!c)
                return;
        wire_conn_free(c->conn);
        if (c->wake_fd >= 0)
                close(c->wake_fd);
        if (c->notify_fd >= 0)
                close(c->notify_fd);
        if (c->poll_fd >= 0)
                close(c->poll_fd);
        free(c->requests);
        if (c->base)
                munmap(c->base, c->arena_bytes);
        if (c->stats)
                munmap(c->stats, c->stats_bytes);
        free(c->stocks);
        free(c->stock_pages);
        free(c->tenant);
        free(c->socket_path);
        reconnect_held_done(&c->held);
        free(c->broken_reason);
        for (size_t i = 0; i < c->nevents; i++)
                free(c->events[i].name);
        free(c->events);
        free(c->shrinkers);
        while (c->pressure_triggers) {
                struct client_pressure_trigger *t = c->pressure_triggers;

                c->pressure_triggers = t->next;
                if (t->fd >= 0)
                        close(t->fd);
                free(t->trigger);
                free(t);
        }
        if (!c->forked) {
                /* A child may inherit these locked by a thread it lacks. */
                pthread_mutex_destroy(&c->conn_lock);
                pthread_mutex_destroy(&c->cb_lock);
                pthread_mutex_destroy(&c->io_lock);
                pthread_mutex_destroy(&c->send_lock);
                pthread_mutex_destroy(&c->held_lock);
                pthread_cond_destroy(&c->io_cond);
                pthread_rwlock_destroy(&c->shrinker_lock);
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

void mb_client_stat_add(mb_client *c, enum mb_stat_item item, int64_t delta) {
        struct stock *s;

        if (c->forked || (unsigned) item >= _MB_STAT_NR)
                return; /* the region is the parent's */
        s = stock_lock_this(c);
        mb_stat_slot_add(s->slot, item, delta);
        stock_stat_dirty(c);
        stock_unlock(c, s);
}

const struct mb_stats_region *mb_client_stats_region(const mb_client *c) {
        return c->stats;
}
