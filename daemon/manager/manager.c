/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "audit.h"
#include "charge.h"
#include "client-events.h"
#include "conn.h"
#include "config-files.h"
#include "guard.h"
#include "log.h"
#include "macros.h"
#include "mb_size.h"
#include "mailbox.h"
#include "manager-service.h"
#include "manager.h"
#include "pressure.h"
#include "reclaim.h"
#include "restart.h"
#include "rightsizer.h"
#include "service.h"
#include "state.h"
#include "tenant_state.h"
#include "worker.h"

#define MANAGER_LISTEN_BACKLOG 4096
#define MANAGER_MAX_WORKERS 256u
#define ACCEPT_PAUSE_USEC 100000 /* listener pause when out of descriptors */
#define ACCEPT_BATCH 64u         /* connections accepted per loop turn */

/* A message of m->event_box: a tenant's event count moved. */
struct manager_event {
        char *path;
        enum mb_event event;
        uint64_t count; /* hierarchical count when queued */
};

/* ---- tenant states ---- */

struct tenant_state *manager_tenant_state_new(struct tenant *t) {
        struct tenant_state *ts;

        ts = calloc(1, sizeof(*ts));
        if (!ts)
                return NULL;
        if (pthread_mutex_init(&ts->lock, NULL) != 0) {
                free(ts);
                return NULL;
        }
        ts->tenant = t;
        t->userdata = ts;
        return ts;
}

/* Unhook @ts from rstat and the active list, free it.  Stats lock held. */
static void tenant_state_free_locked(struct manager *m, struct tenant_state *ts) {
        broker_assert_stats_locked(&m->b);
        if (!ts)
                return;
        if (ts->active) {
                if (ts->active_prev)
                        ts->active_prev->active_next = ts->active_next;
                else
                        m->b.active = ts->active_next;
                if (ts->active_next)
                        ts->active_next->active_prev = ts->active_prev;
                ts->active = false;
        }
        if (ts->daemon_src)
                rstat_source_detach(&m->b.tree->rstat, &ts->tenant->rstat, ts->daemon_src, false);
        ts->tenant->userdata = NULL;
        arena_free(ts->arena);
        if (ts->daemon_slots) /* a region's slots (tenant_state_prepare()) */
                free(mb_stats_region_of_slot(ts->daemon_slots, 0));
        pthread_mutex_destroy(&ts->lock);
        free(ts);
}

static int ensure_state_cb(struct tenant *t, void *userdata) {
        if (!t->userdata && !manager_tenant_state_new(t))
                return -ENOMEM;
        return 0;
}

static int free_state_cb(struct tenant *t, void *userdata) {
        tenant_state_free_locked(userdata, t->userdata);
        return 0;
}

/* ---- the observer: the layer above (daemon/bus/bus.c) ---- */

void manager_set_observer(struct manager *m, const struct manager_observer_ops *ops, void *userdata) {
        m->observer = ops;
        m->observer_userdata = userdata;
}

static void report_tenant_added(struct manager *m, struct tenant *t) {
        if (m->observer && m->observer->tenant_added)
                m->observer->tenant_added(m->observer_userdata, t);
}

void manager_report_tenant_removed(struct manager *m, const char *tenant_path) {
        if (m->observer && m->observer->tenant_removed)
                m->observer->tenant_removed(m->observer_userdata, tenant_path);
}

void manager_report_limits_changed(struct manager *m, struct tenant *t) {
        if (m->observer && m->observer->limits_changed)
                m->observer->limits_changed(m->observer_userdata, t);
}

static void report_memory_event(struct manager *m, const char *tenant_path, enum mb_event event, uint64_t count) {
        if (m->observer && m->observer->memory_event)
                m->observer->memory_event(m->observer_userdata, tenant_path, event, count);
}

/* The observer goes with the manager: after this, nothing is reported. */
static void report_stop(struct manager *m) {
        const struct manager_observer_ops *ops = m->observer;

        m->observer = NULL;
        if (ops && ops->stop)
                ops->stop(m->observer_userdata);
        m->observer_userdata = NULL;
}

/* ---- events ---- */

void manager_queue_event(struct manager *m, struct tenant *t, enum mb_event event) {
        struct tenant_state *ts = tenant_state_of(t);
        unsigned bit = 1u << event;
        struct manager_event e;

        /* Coalesce: one queued entry per tenant and event until delivered. */
        if (ts && (atomic_fetch_or(&ts->events_queued, bit) & bit))
                return;
        e = (struct manager_event) { .path = strdup(t->path), .event = event, .count = atomic_load(&t->events[event]) };
        if (!e.path || !m->event_box)
                free(e.path);
        else if (mailbox_post(m->event_box, &e) == 0)
                return; /* else the mailbox freed the path */
        if (ts)
                atomic_fetch_and(&ts->events_queued, ~bit);
}

static void manager_event_dispose(void *userdata, void *p) {
        struct manager_event *e = p;

        free(e->path);
}

/* The main thread: tell the observer (the bus signal) and the clients. */
static void manager_deliver_event(void *userdata, void *p) {
        struct manager *m = userdata;
        struct manager_event *e = p;
        /* The tenant may be gone: look it up by path (the tree changes on
         * this thread only). */
        struct tenant *t = tenant_lookup(m->b.tree, e->path);
        uint64_t count = e->count;

        if (t) {
                struct tenant_state *ts = tenant_state_of(t);
                if (ts)
                        atomic_fetch_and(&ts->events_queued, ~(1u << e->event));
                count = atomic_load(&t->events[e->event]);
        }
        report_memory_event(m, e->path, e->event, count);
        if (t)
                client_events_deliver(m->client_events, t, e->event, count);
        free(e->path);
}

/* ---- statistics ---- */

/* Poll the stats sources of @t itself (full: walk every slot). */
static void stats_poll_tenant(struct manager *m, struct tenant *t, bool full) {
        for (struct rstat_source *src = t->rstat.sources; src; src = src->next)
                if (full)
                        (void) rstat_poll_source_full(&m->b.tree->rstat, &t->rstat, src);
                else
                        (void) rstat_poll_source(&m->b.tree->rstat, &t->rstat, src);
}

/* The next tenant after @t, in pre-order, inside @root's subtree, that has
 * stats sources in its own subtree; NULL at the end.  Subtrees without any
 * source (rstat nsources_subtree 0) are skipped whole. */
static struct tenant *stats_next_with_sources(struct tenant *t, struct tenant *root) {
        for (struct tenant *c = t->children; c; c = c->next_sibling)
                if (c->rstat.nsources_subtree > 0)
                        return c;
        for (; t != root; t = t->parent)
                for (struct tenant *s = t->next_sibling; s; s = s->next_sibling)
                        if (s->rstat.nsources_subtree > 0)
                                return s;
        return NULL;
}

/*
 * Poll the sources of @t's subtree, then flush it.  Reading the root polls
 * the active list (only tenants that have, or had, clients have sources);
 * any other read walks @t's subtree through the tenant tree, skipping
 * subtrees without sources, so reading one leaf polls that leaf's sources
 * only, whatever the number of active tenants.  @full_poll walks every slot
 * of every source (rstat_poll_source_full()); without it a source whose
 * writer maintains the region's dirty word costs one read of that word when
 * it did not change.
 */
static void stats_refresh(struct manager *m, struct tenant *t, bool force, bool full_poll) {
        broker_assert_main_thread(&m->b);
        pthread_mutex_lock(&m->b.stats_lock);
        if (t == m->b.tree->root) {
                for (struct tenant_state *ts = m->b.active; ts; ts = ts->active_next)
                        stats_poll_tenant(m, ts->tenant, full_poll);
        } else if (t->rstat.nsources_subtree > 0) {
                for (struct tenant *x = t; x; x = stats_next_with_sources(x, t))
                        stats_poll_tenant(m, x, full_poll);
        }
        if (force)
                (void) rstat_flush(&m->b.tree->rstat, &t->rstat);
        else
                (void) rstat_flush_if_needed(&m->b.tree->rstat, &t->rstat);
        pthread_mutex_unlock(&m->b.stats_lock);
}

void manager_stats_refresh(struct manager *m, struct tenant *t, bool force) {
        stats_refresh(m, t, force, false);
}

static uint64_t stat_nonneg(int64_t v) {
        return v > 0 ? (uint64_t) v : 0;
}

size_t manager_tenant_stat_fill(struct manager *m, struct tenant *t, struct mb_stat_kv kv[MANAGER_STAT_NKEYS]) {
        static const char *const keys[] = {
                "pages", "stock", "slab", "slab_reclaimable", "slab_unreclaimable", "pgalloc", "pgfree",
                "charge_requests", "uncharge_requests", "pgscan", "pgsteal", "throttle_usec", "anon_mmap",
        };
        static const char *const local_keys[] = {
                "pages_local", "stock_local", "slab_local", "slab_reclaimable_local", "slab_unreclaimable_local",
                "pgalloc_local", "pgfree_local", "charge_requests_local", "uncharge_requests_local",
                "pgscan_local", "pgsteal_local", "throttle_usec_local", "anon_mmap_local",
        };
        const size_t nkeys = ELEMENTSOF(keys);
        size_t n = 0;

        broker_assert_main_thread(&m->b);

        _Static_assert(ELEMENTSOF(keys) == ELEMENTSOF(local_keys), "stat keys");
        _Static_assert(2 * ELEMENTSOF(keys) + 1 == MANAGER_STAT_NKEYS, "MANAGER_STAT_NKEYS");

        pthread_mutex_lock(&m->b.stats_lock);
        for (int pass = 0; pass < 2; pass++) {
                const int64_t *v = pass == 0 ? t->rstat.value : t->rstat.local;
                const char *const *k = pass == 0 ? keys : local_keys;
                uint64_t values[] = {
                        stat_nonneg(v[MB_STAT_PAGES]) * m->b.page_size,
                        stat_nonneg(v[MB_STAT_STOCK]) * m->b.page_size,
                        stat_nonneg(v[MB_STAT_SLAB_RECLAIMABLE]) + stat_nonneg(v[MB_STAT_SLAB_UNRECLAIMABLE]),
                        stat_nonneg(v[MB_STAT_SLAB_RECLAIMABLE]),
                        stat_nonneg(v[MB_STAT_SLAB_UNRECLAIMABLE]),
                        stat_nonneg(v[MB_STAT_PGALLOC]),
                        stat_nonneg(v[MB_STAT_PGFREE]),
                        stat_nonneg(v[MB_STAT_CHARGE_REQUESTS]),
                        stat_nonneg(v[MB_STAT_UNCHARGE_REQUESTS]),
                        stat_nonneg(v[MB_STAT_PGSCAN]),
                        stat_nonneg(v[MB_STAT_PGSTEAL]),
                        stat_nonneg(v[MB_STAT_THROTTLE_USEC]),
                        stat_nonneg(v[MB_STAT_ANON_MMAP]) * m->b.page_size,
                };
                _Static_assert(ELEMENTSOF(values) == ELEMENTSOF(keys), "stat values");

                for (size_t i = 0; i < nkeys; i++)
                        kv[n++] = (struct mb_stat_kv) { .key = k[i], .value = values[i] };
                if (pass == 0)
                        kv[n++] = (struct mb_stat_kv) { .key = "unaccounted",
                                                        .value = audit_tenant_unaccounted(t) };
        }
        pthread_mutex_unlock(&m->b.stats_lock);
        return n;
}

int manager_tenant_stat(struct manager *m, struct tenant *t, struct mb_stat_kv **ret, size_t *ret_n) {
        struct mb_stat_kv *kv = calloc(MANAGER_STAT_NKEYS, sizeof(*kv));

        if (!kv)
                return -ENOMEM;
        *ret_n = manager_tenant_stat_fill(m, t, kv);
        *ret = kv;
        return 0;
}

static void manager_flush_timer_cb(evutil_socket_t fd, short what, void *userdata) {
        struct manager *m = userdata;

        /* The periodic flush bounds how stale a lazily read figure can be.
         * It walks every slot of every source: a slot write that the
         * region's dirty word missed (the store-buffer race in
         * mb_stats_abi.h) is folded here, at most one interval late. */
        stats_refresh(m, m->b.tree->root, true, true);
        manager_update_status(m);
}

/* ---- tenants at run time ---- */

static int limit_to_pages(struct manager *m, uint64_t bytes, unsigned long *ret) {
        uint64_t pages;

        if (bytes == UINT64_MAX) {
                *ret = PAGE_COUNTER_MAX;
                return 0;
        }
        /* page_counter_memparse(): bytes rounded down to pages. */
        pages = bytes / m->b.page_size;
        if (pages > (uint64_t) PAGE_COUNTER_MAX)
                return -EINVAL;
        *ret = (unsigned long) pages;
        return 0;
}

/* Validate everything first, then apply: a bad value changes nothing.
 * Tree lock held for writing. */
static int set_limits_locked(struct manager *m, struct tenant *t, const struct mb_limits *l) {
        unsigned long max = 0, high = 0, low = 0, min = 0;
        int r;

        broker_assert_tree_wrlocked(&m->b);
        if (l->max != MB_LIMIT_UNSET && (r = limit_to_pages(m, l->max, &max)) < 0)
                return r;
        if (l->high != MB_LIMIT_UNSET && (r = limit_to_pages(m, l->high, &high)) < 0)
                return r;
        if (l->low != MB_LIMIT_UNSET && (r = limit_to_pages(m, l->low, &low)) < 0)
                return r;
        if (l->min != MB_LIMIT_UNSET && (r = limit_to_pages(m, l->min, &min)) < 0)
                return r;
        if (l->charge_batch != MB_LIMIT_UNSET && l->charge_batch > MB_CHARGE_MAX_PAGES)
                return -EINVAL;

        /* memory_max_write(): the new max applies to the next charge even
         * when usage is above it (reclaim of the excess: pressure issue). */
        if (l->max != MB_LIMIT_UNSET && (r = page_counter_force_max(&t->memory, max)) < 0)
                return r;
        if (l->high != MB_LIMIT_UNSET && (r = page_counter_set_high(&t->memory, high)) < 0)
                return r;
        if (l->low != MB_LIMIT_UNSET && (r = page_counter_set_low(&t->memory, low)) < 0)
                return r;
        if (l->min != MB_LIMIT_UNSET && (r = page_counter_set_min(&t->memory, min)) < 0)
                return r;
        if (l->charge_batch != MB_LIMIT_UNSET)
                __atomic_store_n(&t->charge_batch, (unsigned) l->charge_batch, __ATOMIC_RELAXED);
        /* Read by the right-sizing loop on this (the main) thread. */
        if (l->pressure_target != MB_LIMIT_UNSET && rightsize_target_unpack(l->pressure_target, &t->pressure_target) == 0)
                t->pressure_target_gen++;
        return 0;
}

int manager_tenant_set_limits(struct manager *m, struct tenant *t, const struct mb_limits *limits) {
        int r;

        broker_assert_main_thread(&m->b);
        pthread_rwlock_wrlock(&m->b.tree_lock);
        r = set_limits_locked(m, t, limits);
        pthread_rwlock_unlock(&m->b.tree_lock);
        if (r < 0)
                return r;
        manager_report_limits_changed(m, t);
        /* memory_max_write(), memory_high_write(): reclaim the excess. */
        reclaim_enforce_limits(m->b.reclaimer, t);
        return 0;
}

int manager_tenant_create(struct manager *m, const char *path, const struct mb_limits *limits,
                          struct tenant **ret) {
        _cleanup_(freep) char *norm = NULL;
        struct tenant *t = NULL, *added[TENANT_MAX_DEPTH + 1];
        size_t nadded = 0;
        int r;

        broker_assert_main_thread(&m->b);
        r = tenant_path_normalize(path, &norm);
        if (r < 0)
                return r;

        pthread_rwlock_wrlock(&m->b.tree_lock);
        pthread_mutex_lock(&m->b.stats_lock);
        r = tenant_create(m->b.tree, norm, &t);
        pthread_mutex_unlock(&m->b.stats_lock);
        if (r < 0)
                goto out;

        /* The tenant and the ancestors created with it have no state yet. */
        for (struct tenant *x = t; x && !x->userdata; x = x->parent) {
                if (!manager_tenant_state_new(x)) {
                        r = -ENOMEM;
                        goto out;
                }
                if (nadded < ELEMENTSOF(added))
                        added[nadded++] = x;
        }
        if (limits) {
                r = set_limits_locked(m, t, limits);
                if (r < 0) {
                        /* Undo: leave the tree as it was. */
                        pthread_mutex_lock(&m->b.stats_lock);
                        for (size_t i = 0; i < nadded; i++) {
                                struct tenant_state *ts = tenant_state_of(added[i]);
                                tenant_state_free_locked(m, ts);
                                (void) tenant_remove(m->b.tree, added[i]);
                        }
                        pthread_mutex_unlock(&m->b.stats_lock);
                        nadded = 0;
                        t = NULL;
                        goto out;
                }
        }
out:
        pthread_rwlock_unlock(&m->b.tree_lock);
        if (r < 0)
                return r;
        for (size_t i = nadded; i > 0; i--)
                report_tenant_added(m, added[i - 1]);
        log_info("tenant %s created", t->path);
        /* A run-time tenant (restart.h keeps it across a restart), with its
         * limits in the runtime layer over what was persisted for it. */
        if (m->state) {
                struct mb_limits l;

                (void) state_set_created(m->state, t->path, true);
                if (limits)
                        (void) state_set_limits(m->state, t->path, limits, true);
                if (state_overlay(m->state, t->path, &l))
                        (void) manager_tenant_set_limits(m, t, &l);
                restart_state_changed(m->restart);
        }
        if (ret)
                *ret = t;
        return 0;
}

int manager_tenant_remove_locked(struct manager *m, struct tenant *t) {
        bool draining = atomic_load(&t->draining);
        int r;

        broker_assert_main_thread(&m->b);
        broker_assert_tree_wrlocked(&m->b);
        if (!t->parent)
                return -EPERM;
        if (t->nchildren > 0 || atomic_load(&t->nclients) > 0)
                return -EBUSY;
        /* Pages restored after a restart wait for their clients. */
        if (page_counter_read(&t->memory) > 0)
                return -EBUSY;

        restart_arena_forget(m->restart, tenant_state_of(t));
        pthread_mutex_lock(&m->b.stats_lock);
        tenant_state_free_locked(m, tenant_state_of(t));
        r = tenant_remove(m->b.tree, t);
        if (r < 0 && !t->userdata)
                (void) manager_tenant_state_new(t); /* keep the invariant: every tenant has a state */
        pthread_mutex_unlock(&m->b.stats_lock);
        if (r >= 0 && draining)
                atomic_fetch_sub(&m->ndraining, 1);
        return r;
}

int manager_tenant_remove(struct manager *m, struct tenant *t) {
        _cleanup_(freep) char *path = NULL;
        int r;

        path = strdup(t->path);
        if (!path)
                return -ENOMEM;

        pthread_rwlock_wrlock(&m->b.tree_lock);
        r = manager_tenant_remove_locked(m, t);
        pthread_rwlock_unlock(&m->b.tree_lock);
        if (r < 0)
                return r;
        log_info("tenant %s removed", path);
        manager_report_tenant_removed(m, path);
        manager_drain(m); /* a draining parent may go with its last child */
        /* RemoveTenant forgets what was set over D-Bus for it. */
        if (m->state) {
                r = state_forget(m->state, path);
                if (r < 0)
                        log_warning_errno(r, "cannot update the persisted limits after removing %s: %m", path);
                restart_state_changed(m->restart);
        }
        return 0;
}

/* ---- reclaim (daemon/reclaim/reclaim.c) ---- */

/* A proactive reclaim's caller, until its callback runs. */
struct manager_reclaim_call {
        struct manager *m;
        manager_reclaim_cb cb;
        void *userdata;
};

static void manager_reclaim_done(uint64_t reclaimed_bytes, void *userdata) {
        struct manager_reclaim_call *call = userdata;

        call->cb(call->m, reclaimed_bytes, call->userdata);
        free(call);
}

int manager_reclaim(struct manager *m, struct tenant *t, uint64_t bytes, manager_reclaim_cb cb, void *userdata) {
        struct manager_reclaim_call *call;
        int r;

        broker_assert_main_thread(&m->b);
        call = malloc(sizeof(*call));
        if (!call)
                return -ENOMEM;
        *call = (struct manager_reclaim_call) { .m = m, .cb = cb, .userdata = userdata };
        /* memory_reclaim(): bytes rounded down to pages. */
        r = reclaim_proactive(m->b.reclaimer, t, bytes / m->b.page_size, manager_reclaim_done, call);
        if (r < 0)
                free(call); /* the callback is not called */
        return r;
}

int manager_tenant_limits_wait(struct manager *m, struct tenant *t, reclaim_limits_cb cb, void *userdata) {
        return reclaim_enforce_limits_wait(m->b.reclaimer, t, cb, userdata);
}

unsigned manager_nclients(struct manager *m) {
        return atomic_load(&m->b.nclients);
}

unsigned manager_tenant_charge_batch(struct manager *m, const struct tenant *t) {
        return tenant_effective_charge_batch(t, atomic_load(&m->b.charge_batch), 0);
}

/* ---- socket ---- */

static int mkdir_parents(const char *path, mode_t mode) {
        _cleanup_(freep) char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = 0;
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        return 0;
}

static void manager_accept_resume_cb(evutil_socket_t fd, short what, void *userdata);

/* Admitted here, on the main thread, before any worker sees it: the
 * peer's user cap and the bound on connections before their Hello hold
 * for the sockets on their way to a worker too (guard_admit()).  After
 * every ACCEPT_BATCH connections the listener yields one loop turn, so
 * that under a flood the bus and the timers of this loop run between the
 * batches (libevent's listener accepts until the backlog is empty). */
static void manager_accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int socklen,
                              void *userdata) {
        struct manager *m = userdata;
        struct worker *w;
        unsigned max;
        pid_t pid;
        uid_t uid;
        int r;

        r = guard_admit(m->b.guard, fd, &pid, &uid, &max);
        if (r < 0)
                guard_refuse_peer(m->b.guard, fd, r, pid, uid, max);
        else {
                w = m->b.workers[m->next_worker++ % m->b.nworkers];
                worker_add_fd(w, fd, uid);
        }
        if (++m->accepted_this_turn >= ACCEPT_BATCH) {
                evconnlistener_disable(l);
                if (event_base_once(m->base, -1, EV_TIMEOUT, manager_accept_resume_cb, m,
                                    &(struct timeval) { 0 }) < 0)
                        evconnlistener_enable(l);
        }
}

static void manager_accept_resume_cb(evutil_socket_t fd, short what, void *userdata) {
        struct manager *m = userdata;

        m->accepted_this_turn = 0;
        evconnlistener_enable(m->listener); /* the listener outlives the base's timers */
}

static void manager_accept_error_cb(struct evconnlistener *l, void *userdata) {
        struct manager *m = userdata;

        if (guard_accept_failed(m->b.guard, evconnlistener_get_fd(l), -EVUTIL_SOCKET_ERROR())) {
                evconnlistener_disable(l);
                if (event_base_once(m->base, -1, EV_TIMEOUT, manager_accept_resume_cb, m,
                                    &(struct timeval) { .tv_usec = ACCEPT_PAUSE_USEC }) < 0)
                        evconnlistener_enable(l);
        }
}

static int manager_listen(struct manager *m) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_(closep) int fd = -1;
        const char *path = m->socket_path;
        struct stat st;
        int r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return log_error_errno(-ENAMETOOLONG, "socket path %s is too long", path);
        strcpy(sa.sun_path, path);

        /* After a restart: the socket the previous daemon listened on, kept
         * in the fd store; clients that connected meanwhile wait in its
         * backlog. */
        fd = restart_take_listener(m->restart, path);
        if (fd >= 0) {
                (void) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                log_info("listening on %s with the socket kept in the fd store", path);
                goto listen;
        }

        r = mkdir_parents(path, 0755);
        if (r < 0)
                return log_error_errno(r, "cannot create the directory of %s: %m", path);

        if (lstat(path, &st) == 0) {
                _cleanup_(closep) int probe = -1;

                if (!S_ISSOCK(st.st_mode))
                        return log_error_errno(-EEXIST, "%s exists and is not a socket", path);
                /* A socket file: in use by a running broker, or stale. */
                probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (probe >= 0 && connect(probe, (struct sockaddr *) &sa, sizeof(sa)) == 0)
                        return log_error_errno(-EADDRINUSE, "%s: another broker is listening there", path);
                if (unlink(path) < 0 && errno != ENOENT)
                        return log_error_errno(-errno, "cannot remove the stale socket %s: %m", path);
        }

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(-errno, "socket(): %m");
        /* World-connectable: admission is per tenant (docs/protocol.md).
         * The mode is set by the umask at bind() so that the socket never
         * shows up with another one (a chmod() after it left a moment
         * when the file existed as 0755); the workers are idle then, no
         * other thread creates files.  Listening at once after: a client
         * that sees the file finds it accepting. */
        {
                mode_t old = umask(0111);

                r = bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ? -errno : 0;
                umask(old);
        }
        if (r < 0)
                return log_error_errno(r, "cannot bind %s: %m", path);
        if (listen(fd, MANAGER_LISTEN_BACKLOG) < 0)
                return log_error_errno(-errno, "cannot listen on %s: %m", path);
        if (chmod(path, 0666) < 0)
                return log_error_errno(-errno, "cannot chmod %s: %m", path);
        restart_store_listener(m->restart, fd);

listen:
        m->listener = evconnlistener_new(m->base, manager_accept_cb, m,
                                         LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, MANAGER_LISTEN_BACKLOG, fd);
        if (!m->listener)
                return log_error_errno(-errno ? -errno : -ENOMEM, "cannot listen on %s: %m", path);
        TAKE_FD(fd);
        evconnlistener_set_error_cb(m->listener, manager_accept_error_cb);
        m->listening = true;
        return 0;
}

/* ---- host memory pressure (daemon/reclaim/pressure.h) ---- */

/* A PSI event: ask the tenants above their effective low for the excess. */
static void manager_pressure_cb(void *userdata) {
        struct manager *m = userdata;

        reclaim_pressure(m->b.reclaimer);
}

/* ---- signals ---- */

/* A message of m->drain_box (posted by manager_client_detached() on a
 * worker): it carries nothing, every draining tenant is looked at.  Clear
 * the flag first: a client that leaves during this drain posts again. */
static void manager_drain_handle(void *userdata, void *msg) {
        struct manager *m = userdata;

        atomic_store(&m->drain_queued, false);
        manager_drain(m);
}

static void sighup_reload_done(struct manager *m, int r, const char *error, void *userdata) {
        if (r != -ECANCELED) /* not while stopping */
                manager_notify_reloaded(m, r >= 0);
}

static void manager_signal_cb(evutil_socket_t sig, short what, void *userdata) {
        struct manager *m = userdata;

        switch (sig) {
        case SIGINT:
        case SIGTERM:
                log_info("received %s, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
                /* With the fd store, every page stays for the next daemon. */
                restart_prepare_exit(m->restart);
                event_base_loopexit(m->base, NULL);
                break;
        case SIGHUP:
                log_info("received SIGHUP, reloading the configuration");
                manager_notify_reloading(m);
                if (manager_reload_async(m, sighup_reload_done, NULL) < 0)
                        manager_notify_reloaded(m, false);
                break;
        case SIGUSR1:
                manager_log_state(m);
                break;
        }
}

/* ---- life cycle ---- */

int manager_new(struct manager **ret) {
        struct manager *m;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        broker_init(&m->b, &manager_broker_ops);
        if (guard_new(&m->b.guard) < 0) {
                broker_done(&m->b);
                free(m);
                return -ENOMEM;
        }
        m->bus_kind = MANAGER_BUS_SYSTEM;
        *ret = m;
        return 0;
}

static int manager_add_signal(struct manager *m, int sig, struct event **ret) {
        *ret = evsignal_new(m->base, sig, manager_signal_cb, m);
        if (!*ret || event_add(*ret, NULL) < 0)
                return -ENOMEM;
        return 0;
}

int manager_start(struct manager *m, char **ret_error) {
        struct timeval flush_tv;
        unsigned long capacity_pages;
        long n;
        int r;

        if (!m->config_dir) {
                m->config_dir = strdup(MB_DEFAULT_CONFIG_DIR);
                if (!m->config_dir)
                        return -ENOMEM;
        }
        r = mb_config_load(m->config_dir, &m->b.config, ret_error);
        if (r < 0)
                return r;
        atomic_store(&m->b.charge_batch, m->b.config->broker.charge_batch);
        guard_configure(m->b.guard, &m->b.config->broker);
        m->b.page_size = m->b.config->broker.page_size;
        if (m->b.page_size == 0) {
                if (ret_error)
                        if (asprintf(ret_error, "%s/membroker.conf: PageSize= must not be 0", m->config_dir) < 0)
                                *ret_error = NULL;
                return -EINVAL;
        }
        n = sysconf(_SC_NPROCESSORS_CONF);
        m->ncpus = n > 0 ? (unsigned) n : 1;
        m->b.stats_slots = m->ncpus;

        r = mb_config_build_tree(m->b.config, m->ncpus, &m->b.tree, ret_error);
        if (r < 0)
                return r;
        m->b.tree->recursive_protection = m->b.config->broker.memory_recursiveprot;
        r = tenant_walk(m->b.tree->root, ensure_state_cb, m);
        if (r < 0)
                return r;
        capacity_pages = page_counter_get_max(&m->b.tree->root->memory);
        if (capacity_pages == 0)
                return log_error_errno(-EINVAL, "Capacity= is less than one page");

        /* Before any arena is made: where arenas live. */
        r = audit_choose_backing(&m->b, ret_error);
        if (r < 0)
                return r;

        /* The main loop's base, before the modules that arm events on it
         * (the restart module's state saves during the restore). */
        m->base = event_base_new();
        if (!m->base)
                return log_error_errno(-ENOMEM, "cannot create the event base");

        /* Limits set over D-Bus, and what the fd store kept over a restart. */
        r = manager_service_setup(m, ret_error);
        if (r < 0)
                return r;

        if (!m->socket_path) {
                m->socket_path = strdup(m->b.config->broker.socket_path ? m->b.config->broker.socket_path
                                                                      : MB_DEFAULT_SOCKET);
                if (!m->socket_path)
                        return -ENOMEM;
        }

        r = mailbox_new(m->base, sizeof(struct manager_event), manager_deliver_event, manager_event_dispose, m,
                        &m->event_box);
        if (r < 0)
                return r;
        r = mailbox_new(m->base, sizeof(unsigned char), manager_drain_handle, NULL, m, &m->drain_box);
        if (r < 0)
                return r;

        /* Workers: Workers= or one per online CPU. */
        m->b.nworkers = m->b.config->broker.workers;
        if (m->b.nworkers == 0) {
                n = sysconf(_SC_NPROCESSORS_ONLN);
                m->b.nworkers = n > 0 ? (unsigned) n : 1;
        }
        m->b.nworkers = MB_MIN(m->b.nworkers, MANAGER_MAX_WORKERS);
        m->b.workers = calloc(m->b.nworkers, sizeof(struct worker *));
        if (!m->b.workers)
                return -ENOMEM;
        for (unsigned i = 0; i < m->b.nworkers; i++) {
                r = worker_new(&m->b, i, &conn_worker_ops, &m->b.workers[i]);
                if (r < 0)
                        return log_error_errno(r, "cannot create worker %u: %m", i);
                r = worker_start(m->b.workers[i]);
                if (r < 0)
                        return log_error_errno(r, "cannot start worker %u: %m", i);
        }

        r = reclaimer_new(&m->b, m->base, &conn_reclaim_client_ops, &m->b.reclaimer);
        if (r < 0)
                return log_error_errno(r, "cannot set up reclaim: %m");
        r = client_events_new(&m->b, &conn_reclaim_client_ops, &m->client_events);
        if (r < 0)
                return log_error_errno(r, "cannot set up the clients' events: %m");

        r = manager_listen(m);
        if (r < 0)
                return r;

        if (m->b.config->broker.pressure_reclaim) {
                /* Not fatal: the broker works without; the reason is logged. */
                r = pressure_new(m->base, m->pressure_path, m->pressure_trigger, manager_pressure_cb, m,
                                 &m->pressure);
                m->pressure_error = MB_MIN(r, 0);
                if (r < 0)
                        log_warning("PressureReclaim=yes, but host memory pressure cannot be watched; "
                                    "reclaiming only at the limits");
        }

        r = manager_add_signal(m, SIGINT, &m->sigint);
        if (r >= 0)
                r = manager_add_signal(m, SIGTERM, &m->sigterm);
        if (r >= 0)
                r = manager_add_signal(m, SIGHUP, &m->sighup);
        if (r >= 0)
                r = manager_add_signal(m, SIGUSR1, &m->sigusr1);
        if (r < 0)
                return log_error_errno(r, "cannot install the signal handlers");

        flush_tv = (struct timeval) { .tv_sec = MB_MAX(m->b.config->broker.stats_flush_interval_sec, 1u) };
        m->flush_timer = event_new(m->base, -1, EV_PERSIST, manager_flush_timer_cb, m);
        if (!m->flush_timer || event_add(m->flush_timer, &flush_tv) < 0)
                return -ENOMEM;
        r = audit_start(&m->b, m->base, &m->audit);
        if (r < 0)
                return r;
        r = rightsizer_start(&m->b, m->base, &m->rightsizer);
        if (r < 0)
                return r;

        {
                char b[MB_SIZE_FORMAT_MAX];

                log_info("membrokerd %s listening on %s: %u tenants, capacity %s of %" PRIu64 "-byte pages, "
                         "%u workers",
                         PACKAGE_VERSION, m->socket_path, m->b.tree->ntenants,
                         mb_size_format_pages(b, sizeof(b), capacity_pages, m->b.page_size, UINT64_MAX),
                         m->b.page_size, m->b.nworkers);
        }
        return 0;
}

int manager_run(struct manager *m) {
        if (event_base_dispatch(m->base) < 0)
                return -EIO;
        return 0;
}

void manager_free(struct manager *m) {
        if (!m)
                return;

        /* No more reclaim (requests in flight are dropped, proactive
         * callers get what was reclaimed so far). */
        pressure_free(m->pressure);
        m->pressure = NULL;
        rightsizer_free(m->rightsizer);
        m->rightsizer = NULL;
        reclaimer_shutdown(m->b.reclaimer);
        client_events_shutdown(m->client_events);

        /* No new clients, then every session ends (conn_free(): the pages
         * stay what the clients' mappings show). */
        atomic_store(&m->b.stopping, true);
        if (m->listener)
                evconnlistener_free(m->listener);
        if (m->listening) {
                /* Handing over to the next daemon: the socket stays, kept
                 * listening in the fd store. */
                if (!restart_preserving(m->restart))
                        (void) unlink(m->socket_path);
                m->listening = false;
        }
        for (unsigned i = 0; m->b.workers && i < m->b.nworkers; i++)
                worker_free(m->b.workers[i]);
        free(m->b.workers);
        reclaimer_free(m->b.reclaimer);
        m->b.reclaimer = NULL;
        client_events_free(m->client_events);
        m->client_events = NULL;

        report_stop(m); /* the bus goes */

        /* Undelivered events: the bus is gone. */
        mailbox_free(m->event_box);
        m->event_box = NULL;

        if (m->sigint)
                event_free(m->sigint);
        if (m->sigterm)
                event_free(m->sigterm);
        if (m->sighup)
                event_free(m->sighup);
        if (m->sigusr1)
                event_free(m->sigusr1);
        if (m->flush_timer)
                event_free(m->flush_timer);
        mailbox_free(m->drain_box); /* the workers are gone: nobody posts */
        m->drain_box = NULL;
        audit_free(m->audit);
        if (m->watchdog)
                event_free(m->watchdog);
        manager_reload_free(m); /* joins a reload still reading the files */
        restart_free(m->restart); /* its timer belongs to the base */
        state_free(m->state);

        if (m->b.tree) {
                pthread_mutex_lock(&m->b.stats_lock);
                (void) tenant_walk(m->b.tree->root, free_state_cb, m);
                pthread_mutex_unlock(&m->b.stats_lock);
                tenant_tree_free(m->b.tree);
        }
        mb_config_free(m->b.config);
        guard_free(m->b.guard);
        if (m->base)
                event_base_free(m->base);

        broker_done(&m->b);
        free(m->config_dir);
        free(m->socket_path);
        free(m->state_dir);
        free(m->bus_address);
        free(m->pressure_path);
        free(m->pressure_trigger);
        free(m->dump_path);
        free(m->reloads.last_error);
        free(m);
}
