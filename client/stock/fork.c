/* SPDX-License-Identifier: MIT */
/*
 * fork.c - fork(): every live client, its stocks disabled in the child.
 *
 * A child of fork() inherits the parent's mappings of the arena and the
 * stats region, and its connection, but none of them are its own: the
 * daemon knows the parent.  The child's copy of each client is marked
 * forked and its stocks emptied, so that every allocation takes the slow
 * path, which refuses with -ECHILD.
 */
#include <pthread.h>
#include <stddef.h>

#include "core/client.h"
#include "macros.h"
#include "stock/stock.h"

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
        for (mb_client *c = client_registry_head; c; c = c->reg.next) {
                c->forked = true;
                /* Atomic mode: taking a stock's lock in rseq mode rewrites
                 * the CPU's stats slot (stock.h), which is the parent's. */
                c->rseq_lock = false;
                c->rseq_ncpus = 0;
                for (unsigned i = 0; i < c->ncpus; i++) {
                        c->stocks[i].word = 0;
                        c->stocks[i].limit = 0;
                }
                /* The spill's lock may have been held by a thread the
                 * child does not have. */
                pthread_mutex_init(&c->spill.lock, NULL);
                c->spill.n = 0;
        }
        /* The membarrier registration of the child's new address space is
         * pcpu_lock.c's fork handler. */
        pthread_mutex_unlock(&client_registry_lock);
}

static void client_registry_init(void) {
        (void) pthread_atfork(client_registry_prepare, client_registry_parent, client_registry_child);
}

void client_registry_add(mb_client *c) {
        (void) pthread_once(&client_registry_once, client_registry_init);
        MB_LOCK_GUARD(&client_registry_lock);

        c->reg.next = client_registry_head;
        if (client_registry_head)
                client_registry_head->reg.prev = c;
        client_registry_head = c;
}

void client_registry_remove(mb_client *c) {
        MB_LOCK_GUARD(&client_registry_lock);

        if (c->reg.prev)
                c->reg.prev->reg.next = c->reg.next;
        else if (client_registry_head == c)
                client_registry_head = c->reg.next;
        if (c->reg.next)
                c->reg.next->reg.prev = c->reg.prev;
        c->reg.prev = c->reg.next = NULL;
}
