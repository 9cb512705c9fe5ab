/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "log.h"
#include "macros.h"
#include "manager-service.h"
#include "restart.h"
#include "service.h"
#include "state.h"

static int apply_layer_cb(const struct state_entry *e, void *userdata) {
        struct manager *m = userdata;
        struct mb_limits l;
        struct tenant *t;
        int r;

        if (!state_overlay(m->state, e->path, &l))
                return 0;
        t = tenant_lookup(m->b.tree, e->path);
        if (!t)
                return 0; /* applied when the tenant appears */
        r = manager_tenant_set_limits(m, t, &l);
        if (r < 0)
                log_warning_errno(r, "tenant %s: cannot apply the limits set over D-Bus: %m", e->path);
        return 0;
}

void manager_apply_layers(struct manager *m) {
        if (m->state)
                (void) state_foreach(m->state, apply_layer_cb, m);
}

/* ---- what the restart module asks of the manager (restart_ops) ---- */

static int restart_tenant_create(void *userdata, const char *path, struct tenant **ret) {
        return manager_tenant_create(userdata, path, NULL, ret);
}

static unsigned restart_charge_batch(void *userdata) {
        struct manager *m = userdata;

        return atomic_load(&m->b.charge_batch);
}

static void status_line(struct manager *m, char *buf, size_t size);

static void restart_grace_over(void *userdata) {
        struct manager *m = userdata;
        char status[512];

        status_line(m, status, sizeof(status));
        service_status("%s", status);
}

static const struct restart_ops manager_restart_ops = {
        .tenant_create = restart_tenant_create,
        .charge_batch = restart_charge_batch,
        .grace_over = restart_grace_over,
};

int manager_service_setup(struct manager *m, char **ret_error) {
        _cleanup_(freep) char *refused = NULL;
        struct restart_params params;
        int r;

        r = state_new(m->state_dir, &m->state);
        if (r < 0)
                return r;
        r = state_load_persisted(m->state, &refused);
        if (r < 0) {
                if (ret_error)
                        *ret_error = TAKE_PTR(refused);
                return r;
        }
        if (r > 0)
                log_error("%s; ignored, starting without persisted limits",
                          refused ? refused : STATE_LIMITS_FILE);
        params = (struct restart_params) {
                .base = m->base,
                .tree = m->b.tree,
                .state = m->state,
                .page_size = m->b.page_size,
                .arena_tmpfs = m->b.arena_tmpfs,
                /* Huge pages never fall back to 4 KiB ones in a memfd. */
                .arena_memfd_fallback = m->b.config->broker.arena_backing == MB_ARENA_BACKING_AUTO &&
                                        m->b.config->broker.huge_pages == MB_HUGE_PAGES_NO,
                .arena_huge = m->b.config->broker.huge_pages == MB_HUGE_PAGES_THP,
                .arena_hugetlb = m->b.config->broker.huge_pages == MB_HUGE_PAGES_HUGETLBFS,
                .arena_hugetlb_bounded = m->b.arena_hugetlb_bounded,
                .grace_sec = m->b.config->broker.restart_grace_sec,
        };
        r = restart_new(&params, &manager_restart_ops, m, &m->restart);
        if (r < 0)
                return r;
        r = restart_restore(m->restart, ret_error);
        if (r < 0)
                return r;
        manager_apply_layers(m);
        return 0;
}

static void status_line(struct manager *m, char *buf, size_t size) {
        uint64_t pages = 0, clients = 0;

        restart_pending(m->restart, &pages, &clients);
        m->status_tenants = m->b.tree->ntenants;
        m->status_clients = manager_nclients(m);
        if (clients > 0)
                snprintf(buf, size, "Serving %u tenants, %u clients on %s; waiting for %" PRIu64
                         " clients of the previous daemon (%" PRIu64 " pages)",
                         m->status_tenants, m->status_clients, m->socket_path, clients, pages);
        else
                snprintf(buf, size, "Serving %u tenants, %u clients on %s", m->status_tenants, m->status_clients,
                         m->socket_path);
}

int manager_service_ready(struct manager *m) {
        char status[512];
        int r;

        r = service_watchdog_start(m->base, &m->watchdog, NULL);
        if (r < 0)
                return r;
        status_line(m, status, sizeof(status));
        /* The socket listens (manager_start()) and the bus name is ours
         * (bus_setup(), called by main() in between). */
        (void) service_notifyf("READY=1\nSTATUS=%s", status);
        return restart_start_grace(m->restart);
}

void manager_update_status(struct manager *m) {
        char status[512];

        if (!service_notify_enabled())
                return;
        if (m->status_tenants == m->b.tree->ntenants && m->status_clients == manager_nclients(m))
                return;
        status_line(m, status, sizeof(status));
        service_status("%s", status);
}

void manager_notify_reloading(struct manager *m) {
        (void) service_notify("RELOADING=1\nSTATUS=Reloading the configuration");
}

void manager_notify_reloaded(struct manager *m, bool ok) {
        char status[512];

        status_line(m, status, sizeof(status));
        (void) service_notifyf("READY=1\nSTATUS=%s%s", ok ? "" : "Reload failed, running configuration kept; ",
                               status);
}

int manager_tenant_set_limits_layer(struct manager *m, struct tenant *t, const struct mb_limits *limits,
                                    bool runtime) {
        int r;

        r = manager_tenant_set_limits(m, t, limits);
        if (r < 0)
                return r;
        if (!m->state)
                return 0;
        r = state_set_limits(m->state, t->path, limits, runtime);
        if (r < 0)
                return log_error_errno(r, "tenant %s: the new limits apply but cannot be saved in %s: %m", t->path,
                                       m->state_dir ? m->state_dir : "(no state directory)");
        restart_state_changed(m->restart);
        return 0;
}

int manager_tenant_revert_limits(struct manager *m, struct tenant *t, const struct mb_limits *fields,
                                 bool runtime_only) {
        const struct mb_tenant_config *tc;
        struct mb_limits l, layers;
        int r;

        if (!m->state)
                return -EROFS;
        r = state_revert(m->state, t->path, fields, runtime_only);
        if (r <= 0)
                return r;
        restart_state_changed(m->restart);

        /* What applies now: the files (or a run-time tenant's defaults),
         * with what the layers still set over them. */
        tc = mb_config_find_normalized(m->b.config, t->path);
        l = (struct mb_limits) {
                .max = tc ? tc->max : MB_LIMIT_MAX,
                .high = tc ? tc->high : MB_LIMIT_MAX,
                .low = tc ? tc->low : 0,
                .min = tc ? tc->min : 0,
                .charge_batch = tc ? tc->charge_batch : 0,
                .pressure_target = tc ? rightsize_target_pack(&tc->pressure_target) : 0,
        };
        if (state_overlay(m->state, t->path, &layers))
                state_limits_merge(&l, &layers);
        r = manager_tenant_set_limits(m, t, &l);
        if (r < 0)
                return log_error_errno(r, "tenant %s: cannot apply the limits after a revert: %m", t->path);
        return 1;
}
