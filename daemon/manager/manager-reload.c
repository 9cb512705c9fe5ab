/* SPDX-License-Identifier: MIT */
/*
 * manager-reload.c - Reload() and SIGHUP, and the draining of tenants gone
 * from the files.
 *
 * The files are read, parsed and checked into a new struct mb_config by a
 * thread of their own, without any lock: the main loop keeps serving the
 * bus and feeding the watchdog, the workers keep serving clients.  The new
 * configuration is then applied on the main thread under the tree lock in
 * one pass over its tenants (hash lookups, no scan per tenant); a bad file
 * changes nothing.
 *
 * A tenant the files no longer define goes at once when it has no client,
 * no child and no page; otherwise it drains, as a removed systemd unit that
 * is still active: it admits no new client (daemon/conn/conn.c) and goes when its
 * last client leaves (manager_client_detached() wakes manager_drain()).
 * Back in the files before that, it is un-drained and takes the new
 * settings.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "config-files.h"
#include "delegate.h"
#include "guard.h"
#include "log.h"
#include "macros.h"
#include "mailbox.h"
#include "manager-service.h"
#include "manager.h"
#include "reclaim.h"
#include "state.h"
#include "tenant_state.h"

struct reload_waiter {
        manager_reload_cb cb;
        void *userdata;
};

struct manager_reload {
        struct manager *m;
        pthread_t thread;
        bool running;
        struct event *done; /* activated by the thread when it is done */

        /* The thread's result, read after pthread_join(). */
        struct mb_config *config;
        char *error;
        int r;
        uint64_t read_usec; /* reading and parsing the files */

        struct reload_waiter *current, *pending; /* served by this reload / the next one */
        size_t ncurrent, npending;
        unsigned mark; /* generation for tenant->mark */
};

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

/* ---- applying a configuration (main thread) ---- */

/* Could @path be created in the running tree?  The nearest existing
 * ancestor must have no clients (no internal processes). */
static int check_creatable(struct manager *m, const char *path, const char **ret_busy) {
        _cleanup_(freep) char *p = strdup(path);
        char *slash;

        if (!p)
                return -ENOMEM;
        while ((slash = strrchr(p, '/'))) {
                struct tenant *a;
                *slash = 0;
                a = tenant_lookup(m->b.tree, p);
                if (a) {
                        if (atomic_load(&a->nclients) > 0) {
                                *ret_busy = a->path;
                                return -EBUSY;
                        }
                        return 0;
                }
        }
        if (atomic_load(&m->b.tree->root->nclients) > 0) {
                *ret_busy = "/";
                return -EBUSY;
        }
        return 0;
}

struct tenant_list {
        struct tenant **v;
        size_t n, alloc;
        unsigned mark; /* collect: from the files before, not needed now */
        bool draining; /* collect: draining */
};

static int list_add(struct tenant_list *l, struct tenant *t) {
        if (l->n == l->alloc) {
                size_t want = MB_MAX(l->alloc * 2, (size_t) 16);
                struct tenant **v = reallocarray(l->v, want, sizeof(*v));

                if (!v)
                        return -ENOMEM;
                l->v = v;
                l->alloc = want;
        }
        l->v[l->n++] = t;
        return 0;
}

static int collect_cb(struct tenant *t, void *userdata) {
        struct tenant_list *l = userdata;

        if (!t->parent)
                return 0;
        if (l->draining ? atomic_load(&t->draining) : (t->from_config && t->mark != l->mark))
                return list_add(l, t);
        return 0;
}

static int cmp_deepest_first(const void *a, const void *b) {
        const struct tenant *x = *(struct tenant *const *) a, *y = *(struct tenant *const *) b;

        return x->depth < y->depth ? 1 : x->depth > y->depth ? -1 : 0;
}

/* Remove what in @l can go now, deepest first (a parent whose last child
 * goes can go too); the paths removed are appended to @removed.  Tree lock
 * held for writing. */
static void remove_idle(struct manager *m, struct tenant_list *l, char ***removed, size_t *nremoved) {
        broker_assert_tree_wrlocked(&m->b);
        if (l->n > 1)
                qsort(l->v, l->n, sizeof(*l->v), cmp_deepest_first);
        for (size_t i = 0; i < l->n; i++) {
                struct tenant *t = l->v[i];
                char *path, **a;
                int r;

                if (t->nchildren > 0 || atomic_load(&t->nclients) > 0 || page_counter_read(&t->memory) > 0)
                        continue;
                path = strdup(t->path);
                a = path ? reallocarray(*removed, *nremoved + 1, sizeof(**removed)) : NULL;
                if (!a) {
                        free(path);
                        continue; /* stays, tried again later */
                }
                *removed = a;
                r = manager_tenant_remove_locked(m, t);
                if (r < 0) {
                        log_warning_errno(r, "tenant %s: cannot remove it: %m", path);
                        free(path);
                        continue;
                }
                (*removed)[(*nremoved)++] = path;
        }
}

static void emit_removed(struct manager *m, char **removed, size_t n, const char *why) {
        for (size_t i = 0; i < n; i++) {
                log_info("%stenant %s removed%s", why ? "" : "reload: ", removed[i], why ? why : "");
                manager_report_tenant_removed(m, removed[i]);
                free(removed[i]);
        }
        free(removed);
}

static void reload_fail(struct manager *m, int r, char *error, char **ret_error) {
        log_error("reload failed, keeping the running configuration: %s", error ? error : strerror(-r));
        /* for the state dump: what a tool asks after a failed Reload() */
        free(m->reloads.last_error);
        m->reloads.last_error = strdup(error ? error : strerror(-r));
        if (ret_error)
                *ret_error = error;
        else
                free(error);
}

struct limits_snapshot {
        unsigned long max, high, low, min;
        unsigned charge_batch;
};

static void snapshot(const struct tenant *t, struct limits_snapshot *s) {
        *s = (struct limits_snapshot) {
                .max = page_counter_get_max(&t->memory),
                .high = page_counter_get_high_setting(&t->memory),
                .low = page_counter_get_low(&t->memory),
                .min = page_counter_get_min(&t->memory),
                .charge_batch = t->charge_batch,
        };
}

/* Apply @c (taken over, read in @read_usec) to the running daemon. */
static int reload_apply(struct manager *m, struct mb_config *c, uint64_t read_usec, char **ret_error) {
        _cleanup_(freep) struct tenant **changed = NULL;
        struct tenant_list stale = {};
        char *error = NULL, **removed = NULL;
        size_t nchanged = 0, nremoved = 0;
        uint64_t locked_usec;
        unsigned mark;
        int r;

        if (c->broker.page_size != m->b.page_size) {
                log_warning("PageSize=%" PRIu64 " takes effect at the next start; keeping %" PRIu64,
                            c->broker.page_size, m->b.page_size);
                c->broker.page_size = m->b.page_size;
        }
        if (c->broker.workers != m->b.config->broker.workers)
                log_warning("Workers= takes effect at the next start");
        if (!m->socket_path && c->broker.socket_path && m->b.config->broker.socket_path &&
            strcmp(c->broker.socket_path, m->b.config->broker.socket_path) != 0)
                log_warning("Socket= takes effect at the next start");
        if (c->broker.capacity_bytes > m->b.config->broker.capacity_bytes)
                log_warning("Capacity= raised: the arenas that exist keep their size (clients map them whole), "
                            "so their tenants stay within the old capacity; new arenas get the new one");
        if (c->broker.pressure_reclaim != m->b.config->broker.pressure_reclaim)
                log_warning("PressureReclaim= takes effect at the next start");
        if (c->broker.arena_backing != m->b.config->broker.arena_backing)
                log_warning("ArenaBacking= takes effect at the next start");
        if (c->broker.huge_pages != m->b.config->broker.huge_pages)
                log_warning("HugePages= takes effect at the next start");
        if (c->broker.restart_grace_sec != m->b.config->broker.restart_grace_sec)
                log_warning("RestartGraceSec= takes effect at the next start");

        /* The persisted limits are re-read too (an admin may edit them). */
        if (m->state) {
                r = state_load_persisted(m->state, &error);
                if (r < 0) {
                        mb_config_free(c);
                        reload_fail(m, r, error, ret_error);
                        return r;
                }
                if (r > 0) {
                        log_error("%s; ignored, no persisted limits apply", error ? error : STATE_LIMITS_FILE);
                        free(TAKE_PTR(error));
                }
        }

        changed = calloc(MB_MAX(c->ntenants, (size_t) 1), sizeof(*changed));
        if (!changed) {
                mb_config_free(c);
                reload_fail(m, -ENOMEM, NULL, ret_error);
                return -ENOMEM;
        }

        pthread_rwlock_wrlock(&m->b.tree_lock);
        locked_usec = now_usec();

        /* Check first, so that a configuration that cannot be applied changes
         * nothing.  (The parser normalised every Path=.) */
        for (size_t i = 0; i < c->ntenants; i++) {
                const struct mb_tenant_config *tc = &c->tenants[i];
                const char *busy = NULL;

                if (tenant_lookup(m->b.tree, tc->path))
                        continue;
                r = check_creatable(m, tc->path, &busy);
                if (r < 0) {
                        if (r == -EBUSY && asprintf(&error, "%s:%u: cannot create tenant %s: tenant %s has clients attached",
                                                    tc->file, tc->line, tc->path, busy) < 0)
                                error = NULL;
                        pthread_rwlock_unlock(&m->b.tree_lock);
                        mb_config_free(c);
                        reload_fail(m, r, error, ret_error);
                        return r;
                }
        }

        mark = ++m->reload->mark ?: ++m->reload->mark;
        for (size_t i = 0; i < c->ntenants; i++) {
                const struct mb_tenant_config *tc = &c->tenants[i];
                struct limits_snapshot before, after;
                struct tenant *t;
                bool created = false;

                t = tenant_lookup(m->b.tree, tc->path);
                if (!t) {
                        pthread_mutex_lock(&m->b.stats_lock);
                        r = tenant_create(m->b.tree, tc->path, &t);
                        pthread_mutex_unlock(&m->b.stats_lock);
                        if (r < 0) {
                                log_error_errno(r, "%s:%u: cannot create tenant %s: %m", tc->file, tc->line, tc->path);
                                continue;
                        }
                        for (struct tenant *x = t; x && !x->userdata; x = x->parent)
                                (void) manager_tenant_state_new(x);
                        log_info("reload: tenant %s added", tc->path);
                        created = true;
                }
                snapshot(t, &before);
                r = mb_config_apply_tenant(c, tc, t);
                if (r < 0)
                        log_error_errno(r, "%s:%u: cannot apply the settings of tenant %s: %m", tc->file, tc->line,
                                        tc->path);
                snapshot(t, &after);
                if (!created && memcmp(&before, &after, sizeof(before)) != 0)
                        changed[nchanged++] = t;
                t->from_config = true;
                /* It and its ancestors are needed (and drain no more). */
                for (struct tenant *x = t; x && x->mark != mark; x = x->parent) {
                        x->mark = mark;
                        if (atomic_load(&x->draining)) {
                                atomic_store(&x->draining, false);
                                atomic_fetch_sub(&m->ndraining, 1);
                                log_info("reload: tenant %s is back in the files, no longer draining", x->path);
                        }
                }
        }

        /* Tenants the files no longer define (and that no defined tenant
         * needs as an ancestor): marked draining first, then those without
         * clients, children or pages go, deepest first; the others drain.
         * (Marking before looking at the client count pairs with
         * manager_client_detached(): a client leaving now is seen either
         * here or there.) */
        stale.mark = mark;
        r = tenant_walk(m->b.tree->root, collect_cb, &stale);
        if (r < 0)
                log_error_errno(r, "reload: cannot list the tenants gone from the files: %m");
        for (size_t i = 0; i < stale.n; i++) {
                if (!atomic_exchange(&stale.v[i]->draining, true))
                        atomic_fetch_add(&m->ndraining, 1);
                /* Its Delegate= went with the file: the rights end. */
                mb_delegate_done(&stale.v[i]->delegate);
        }
        remove_idle(m, &stale, &removed, &nremoved);

        (void) page_counter_force_max(&m->b.tree->root->memory,
                                      (unsigned long) MB_MIN(c->broker.capacity_bytes / m->b.page_size,
                                                             (uint64_t) PAGE_COUNTER_MAX));
        m->b.tree->recursive_protection = c->broker.memory_recursiveprot;

        mb_config_free(m->b.config);
        m->b.config = c;
        atomic_store(&m->b.charge_batch, c->broker.charge_batch);
        guard_configure(m->b.guard, &c->broker);
        locked_usec = now_usec() - locked_usec;
        pthread_rwlock_unlock(&m->b.tree_lock);
        free(stale.v);

        if (atomic_load(&m->ndraining) > 0)
                log_info("reload: %u tenants gone from the files drain until their last client leaves",
                         atomic_load(&m->ndraining));

        /* What was set over D-Bus stays over the files (state.h). */
        manager_apply_layers(m);

        emit_removed(m, removed, nremoved, NULL);
        for (size_t i = 0; i < nchanged; i++) {
                manager_report_limits_changed(m, changed[i]);
                /* A lower max or high reclaims the excess (daemon/reclaim/reclaim.c). */
                reclaim_enforce_limits(m->b.reclaimer, changed[i]);
        }
        /* A lower Capacity= is the root's max lowered: it reclaims across
         * every tenant, like writing a lower memory.max at the top. */
        reclaim_enforce_limits(m->b.reclaimer, m->b.tree->root);
        log_info("configuration reloaded: %u tenants (files read in %" PRIu64 " ms, tree lock held %" PRIu64 " ms)",
                 m->b.tree->ntenants, read_usec / 1000, locked_usec / 1000);
        return 0;
}

/* Count the outcome @r of a reload for the state dump; returns @r. */
static int reload_counted(struct manager *m, int r) {
        if (r < 0)
                m->reloads.failed++;
        else {
                m->reloads.ok++;
                free(TAKE_PTR(m->reloads.last_error));
        }
        return r;
}

static int reload_state(struct manager *m) {
        struct manager_reload *rl;

        if (m->reload)
                return 0;
        rl = calloc(1, sizeof(*rl));
        if (!rl)
                return -ENOMEM;
        rl->m = m;
        m->reload = rl;
        return 0;
}

int manager_reload(struct manager *m, char **ret_error) {
        struct mb_config *c = NULL;
        char *error = NULL;
        uint64_t start = now_usec();
        int r;

        broker_assert_main_thread(&m->b);

        r = reload_state(m);
        if (r < 0)
                return reload_counted(m, r);
        r = mb_config_load(m->config_dir, &c, &error);
        if (r < 0) {
                reload_fail(m, r, error, ret_error);
                return reload_counted(m, r);
        }
        return reload_counted(m, reload_apply(m, c, now_usec() - start, ret_error));
}

/* ---- the reload thread ---- */

static void *reload_thread(void *userdata) {
        struct manager_reload *rl = userdata;
        uint64_t start = now_usec();

        rl->r = mb_config_load(rl->m->config_dir, &rl->config, &rl->error);
        rl->read_usec = now_usec() - start;
        /* Thread-safe (evthread_use_pthreads()): wakes the main loop. */
        event_active(rl->done, EV_READ, 0);
        return NULL;
}

static void call_waiters(struct manager *m, struct reload_waiter *w, size_t n, int r, const char *error) {
        for (size_t i = 0; i < n; i++)
                w[i].cb(m, r, error, w[i].userdata);
        free(w);
}

static int reload_thread_start(struct manager_reload *rl) {
        int r;

        rl->config = NULL;
        rl->error = NULL;
        rl->r = 0;
        r = -pthread_create(&rl->thread, NULL, reload_thread, rl);
        if (r < 0)
                return log_error_errno(r, "cannot start the reload thread: %m");
        rl->running = true;
        return 0;
}

static void reload_done_cb(evutil_socket_t fd, short what, void *userdata) {
        struct manager_reload *rl = userdata;
        struct manager *m = rl->m;
        struct reload_waiter *w;
        char *error = NULL;
        size_t n;
        int r;

        pthread_join(rl->thread, NULL);
        rl->running = false;

        if (rl->r < 0) {
                r = rl->r;
                reload_fail(m, r, TAKE_PTR(rl->error), &error);
        } else
                r = reload_apply(m, TAKE_PTR(rl->config), rl->read_usec, &error);
        (void) reload_counted(m, r);

        w = TAKE_PTR(rl->current);
        n = rl->ncurrent;
        rl->ncurrent = 0;
        /* Requests that came while the files were being read: read them
         * again for those. */
        if (rl->npending > 0) {
                rl->current = TAKE_PTR(rl->pending);
                rl->ncurrent = rl->npending;
                rl->npending = 0;
                if (reload_thread_start(rl) < 0) {
                        struct reload_waiter *p = TAKE_PTR(rl->current);
                        size_t np = rl->ncurrent;

                        rl->ncurrent = 0;
                        call_waiters(m, p, np, -EAGAIN, "cannot start the reload thread");
                }
        }
        call_waiters(m, w, n, r, error);
        free(error);
}

int manager_reload_async(struct manager *m, manager_reload_cb cb, void *userdata) {
        struct manager_reload *rl;
        struct reload_waiter **list, *a;
        size_t *n;
        int r;

        broker_assert_main_thread(&m->b);

        r = reload_state(m);
        if (r < 0)
                return r;
        rl = m->reload;
        if (!rl->done) {
                rl->done = event_new(m->base, -1, 0, reload_done_cb, rl);
                if (!rl->done)
                        return -ENOMEM;
        }

        list = rl->running ? &rl->pending : &rl->current;
        n = rl->running ? &rl->npending : &rl->ncurrent;
        a = reallocarray(*list, *n + 1, sizeof(**list));
        if (!a)
                return -ENOMEM;
        *list = a;
        a[(*n)++] = (struct reload_waiter) { .cb = cb, .userdata = userdata };
        if (rl->running)
                return 0;

        r = reload_thread_start(rl);
        if (r < 0) {
                rl->ncurrent--;
                return r;
        }
        return 0;
}

void manager_reload_free(struct manager *m) {
        struct manager_reload *rl = m->reload;

        if (!rl)
                return;
        if (rl->running) {
                pthread_join(rl->thread, NULL);
                mb_config_free(rl->config);
                free(rl->error);
        }
        call_waiters(m, rl->current, rl->ncurrent, -ECANCELED, "the daemon is stopping");
        call_waiters(m, rl->pending, rl->npending, -ECANCELED, "the daemon is stopping");
        if (rl->done)
                event_free(rl->done);
        free(rl);
        m->reload = NULL;
}

/* ---- draining ---- */

void manager_client_detached(struct manager *m, struct tenant *t) {
        unsigned before = atomic_fetch_sub(&t->nclients, 1);

        atomic_fetch_sub(&m->b.nclients, 1);
        /* @t may be gone from here on.  Reading ndraining after the count
         * went down pairs with reload_apply(), which marks a tenant draining
         * before it looks at its count.  One message at a time in the
         * mailbox: a burst of leaving clients costs one drain.  A post fails
         * only without memory; the tenant then goes at the next drain (the
         * next last client leaving, RemoveTenant, a reload). */
        if (before == 1 && atomic_load(&m->ndraining) > 0 && m->drain_box &&
            !atomic_exchange(&m->drain_queued, true) && mailbox_post(m->drain_box, &(unsigned char) { 0 }) < 0)
                atomic_store(&m->drain_queued, false);
}

void manager_drain(struct manager *m) {
        struct tenant_list l = { .draining = true };
        char **removed = NULL;
        size_t nremoved = 0;

        broker_assert_main_thread(&m->b);
        if (atomic_load(&m->ndraining) == 0)
                return;
        pthread_rwlock_wrlock(&m->b.tree_lock);
        if (tenant_walk(m->b.tree->root, collect_cb, &l) >= 0)
                remove_idle(m, &l, &removed, &nremoved);
        pthread_rwlock_unlock(&m->b.tree_lock);
        free(l.v);
        emit_removed(m, removed, nremoved, ": drained, its last client left");
}
