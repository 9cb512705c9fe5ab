/* SPDX-License-Identifier: MIT */
/*
 * bus-pressure.c - memory.pressure on the bus: GetPressure and
 * GetPressureText (Tenant, and Manager with a path), and the triggers of
 * bus callers (AddPressureTrigger, RemovePressureTrigger, the
 * PressureTriggered signal).
 *
 * A trigger is the kernel's psi_trigger written to a cgroup's
 * memory.pressure: "some|full THRESHOLD WINDOW" in microseconds.  Each has
 * a timer on the main loop that samples the tenant's total every tenth of
 * the window (the kernel's polling period, rtpoll_min_period = window /
 * 10) and runs psi_trigger_update(); an event is a PressureTriggered
 * signal sent to the caller that added the trigger only.  A trigger
 * belongs to its caller's connection, like the kernel's belongs to the
 * open file: it goes when that caller leaves the bus (sd_bus_track), or
 * when the daemon loses the bus.  The tenant is looked up by path at every
 * sample: a removed tenant fires nothing, and one created again under the
 * same path starts a new window.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <systemd/sd-bus.h>

#include "bus-internal.h"
#include "log.h"
#include "macros.h"
#include "psi.h"

/* What one caller, and all of them together, may hold. */
#define BUS_PRESSURE_TRIGGERS_PER_CALLER_MAX 64u
#define BUS_PRESSURE_TRIGGERS_MAX 1024u
/* The fastest sampling: 500 ms windows sample every 50 ms. */
#define BUS_PRESSURE_POLL_DIVISOR 10u

struct bus_pressure_trigger {
        struct bus_pressure_trigger *prev, *next;
        struct manager *m;
        uint64_t id;
        char *tenant_path;
        char *spec;
        char *owner;          /* the caller's unique name */
        sd_bus_track *track;  /* goes when the owner leaves the bus */
        struct event *timer;
        const struct tenant *tenant; /* at the last sample (a tenant created anew restarts the window) */
        struct psi_trigger tr;
};


/* ---- readings ---- */

static void bus_pressure_read(struct tenant *t, struct psi_reading ret[_PSI_KIND_NR]) {
        uint64_t now = psi_now_usec();

        for (int k = 0; k < _PSI_KIND_NR; k++)
                tenant_pressure_read_at(t, (enum psi_kind) k, now, &ret[k]);
}

int bus_tenant_method_get_pressure(sd_bus_message *msg, struct manager *m, struct tenant *t, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct psi_reading r[_PSI_KIND_NR];
        int k, rr;

        (void) m;
        (void) error;
        bus_pressure_read(t, r);
        rr = sd_bus_message_new_method_return(msg, &reply);
        if (rr < 0)
                return rr;
        rr = sd_bus_message_open_container(reply, 'a', "(sdddt)");
        if (rr < 0)
                return rr;
        for (k = 0; k < _PSI_KIND_NR; k++) {
                rr = sd_bus_message_append(reply, "(sdddt)", psi_kind_to_string((enum psi_kind) k),
                                           r[k].avg10 / 100.0, r[k].avg60 / 100.0, r[k].avg300 / 100.0,
                                           r[k].total_usec);
                if (rr < 0)
                        return rr;
        }
        rr = sd_bus_message_close_container(reply);
        if (rr < 0)
                return rr;
        return sd_bus_send(NULL, reply, NULL);
}

int bus_tenant_method_get_pressure_text(sd_bus_message *msg, struct manager *m, struct tenant *t,
                                        sd_bus_error *error) {
        struct psi_reading r[_PSI_KIND_NR];
        char text[PSI_TEXT_MAX_BYTES];

        (void) m;
        (void) error;
        bus_pressure_read(t, r);
        if (psi_format(&r[PSI_SOME], &r[PSI_FULL], text, sizeof(text)) < 0)
                return -ENOBUFS;
        return sd_bus_reply_method_return(msg, "s", text);
}

/* Which figure a Pressure* property names: kind, and 0 for the total or
 * 10/60/300 for an average.  -EINVAL for another name. */
int bus_pressure_property_parse(const char *property, enum psi_kind *ret_kind, unsigned *ret_which) {
        static const struct {
                const char *name;
                enum psi_kind kind;
                unsigned which;
        } names[] = {
                { "PressureSomeTotalUSec", PSI_SOME, 0 }, { "PressureSomeAvg10", PSI_SOME, 10 },
                { "PressureSomeAvg60", PSI_SOME, 60 },    { "PressureSomeAvg300", PSI_SOME, 300 },
                { "PressureFullTotalUSec", PSI_FULL, 0 }, { "PressureFullAvg10", PSI_FULL, 10 },
                { "PressureFullAvg60", PSI_FULL, 60 },    { "PressureFullAvg300", PSI_FULL, 300 },
        };

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strcmp(names[i].name, property) == 0) {
                        *ret_kind = names[i].kind;
                        *ret_which = names[i].which;
                        return 0;
                }
        return -EINVAL;
}

uint64_t bus_pressure_figure(const struct psi_reading *r, unsigned which) {
        switch (which) {
        case 10:
                return r->avg10;
        case 60:
                return r->avg60;
        case 300:
                return r->avg300;
        default:
                return r->total_usec;
        }
}

int bus_tenant_property_get_pressure(sd_bus *bus, const char *path, const char *interface, const char *property,
                                     sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        struct manager *m = userdata;
        struct psi_reading r;
        enum psi_kind kind;
        struct tenant *t;
        unsigned which;

        (void) bus;
        (void) interface;
        t = bus_tenant_from_object_path(m, path);
        if (!t)
                return sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_OBJECT, "No tenant at %s", path);
        if (bus_pressure_property_parse(property, &kind, &which) < 0)
                return -EINVAL;
        tenant_pressure_read(t, kind, &r);
        if (which == 0)
                return sd_bus_message_append(reply, "t", r.total_usec);
        return sd_bus_message_append(reply, "u", (uint32_t) bus_pressure_figure(&r, which));
}

/* ---- triggers ---- */

static void bus_pressure_trigger_free(struct bus_pressure_trigger *bt) {
        if (!bt)
                return;
        MB_LIST_REMOVE(bt->m->bus->pressure_triggers, bt);
        bt->m->bus->npressure_triggers--;
        if (bt->timer)
                event_free(bt->timer);
        sd_bus_track_unref(bt->track);
        free(bt->tenant_path);
        free(bt->spec);
        free(bt->owner);
        free(bt);
}

/* The tenant's current total, or false when it is gone.  Main thread; the
 * tree lock for reading keeps the tenant while it is read. */
static bool bus_pressure_sample(struct bus_pressure_trigger *bt, uint64_t now, uint64_t *ret_total,
                                bool *ret_new) {
        struct manager *m = bt->m;
        uint64_t totals[_PSI_KIND_NR];
        struct tenant *t;

        pthread_rwlock_rdlock(&m->b.tree_lock);
        t = tenant_lookup(m->b.tree, bt->tenant_path);
        if (t)
                psi_group_totals(&t->psi, now, totals);
        pthread_rwlock_unlock(&m->b.tree_lock);
        if (!t) {
                bt->tenant = NULL;
                return false;
        }
        *ret_new = t != bt->tenant;
        bt->tenant = t;
        *ret_total = totals[bt->tr.kind];
        return true;
}

static void bus_pressure_emit(struct bus_pressure_trigger *bt) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *sig = NULL;
        struct manager *m = bt->m;
        int r;

        if (!m->bus || !m->bus->bus)
                return;
        r = sd_bus_message_new_signal(m->bus->bus, &sig, BUS_MANAGER_PATH, BUS_MANAGER_INTERFACE,
                                      "PressureTriggered");
        if (r >= 0)
                r = sd_bus_message_set_destination(sig, bt->owner);
        if (r >= 0)
                r = sd_bus_message_append(sig, "tss", bt->id, bt->tenant_path, bt->spec);
        if (r >= 0)
                r = sd_bus_send(m->bus->bus, sig, NULL);
        if (r < 0)
                log_warning("cannot send PressureTriggered to %s: %s", bt->owner, strerror(-r));
        bus_kick(m);
}

static void bus_pressure_tick(evutil_socket_t fd, short what, void *userdata) {
        struct bus_pressure_trigger *bt = userdata;
        uint64_t now = psi_now_usec(), total;
        bool fresh;

        (void) fd;
        (void) what;
        if (!bus_pressure_sample(bt, now, &total, &fresh))
                return;
        if (fresh) {
                psi_trigger_init(&bt->tr, bt->tr.kind, bt->tr.threshold_usec, bt->tr.window_usec, total, now);
                return;
        }
        if (psi_trigger_update(&bt->tr, total, now))
                bus_pressure_emit(bt);
}

static int bus_pressure_owner_gone(sd_bus_track *track, void *userdata) {
        struct bus_pressure_trigger *bt = userdata;

        (void) track;
        log_info("pressure trigger %" PRIu64 " on %s: %s left the bus", bt->id, bt->tenant_path, bt->owner);
        bus_pressure_trigger_free(bt);
        return 0;
}

static unsigned bus_pressure_count_owner(struct manager *m, const char *owner) {
        unsigned n = 0;

        for (struct bus_pressure_trigger *bt = m->bus->pressure_triggers; bt; bt = bt->next)
                n += strcmp(bt->owner, owner) == 0;
        return n;
}

int bus_manager_method_add_pressure_trigger(sd_bus_message *msg, struct manager *m, sd_bus_error *error) {
        struct bus_pressure_trigger *bt;
        const char *path, *spec, *sender;
        struct tenant *t;
        enum psi_kind kind;
        uint64_t threshold, window, now, totals[_PSI_KIND_NR];
        struct timeval tv;
        int r;

        r = sd_bus_message_read(msg, "ss", &path, &spec);
        if (r < 0)
                return r;
        if (psi_trigger_parse(spec, &kind, &threshold, &window) < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "trigger '%s': not \"some|full THRESHOLD_USEC WINDOW_USEC\" with a "
                                         "window of %llu..%llu us and 0 < threshold <= window",
                                         spec, PSI_WINDOW_MIN_USEC, PSI_WINDOW_MAX_USEC);
        sender = sd_bus_message_get_sender(msg);
        if (!sender)
                return sd_bus_error_set(error, SD_BUS_ERROR_NOT_SUPPORTED, "A trigger needs a caller on a bus");
        if (m->bus->npressure_triggers >= BUS_PRESSURE_TRIGGERS_MAX ||
            bus_pressure_count_owner(m, sender) >= BUS_PRESSURE_TRIGGERS_PER_CALLER_MAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "Too many pressure triggers (%u per caller, %u in all)",
                                         BUS_PRESSURE_TRIGGERS_PER_CALLER_MAX, BUS_PRESSURE_TRIGGERS_MAX);
        r = bus_tenant_lookup(m, path, &t, error);
        if (r < 0)
                return r;

        bt = calloc(1, sizeof(*bt));
        if (!bt)
                return -ENOMEM;
        bt->m = m;
        MB_LIST_PREPEND(m->bus->pressure_triggers, bt);
        m->bus->npressure_triggers++;
        bt->id = ++m->bus->pressure_last_id;
        bt->tenant_path = strdup(t->path);
        bt->spec = strdup(spec);
        bt->owner = strdup(sender);
        bt->timer = event_new(m->base, -1, EV_PERSIST, bus_pressure_tick, bt);
        if (!bt->tenant_path || !bt->spec || !bt->owner || !bt->timer) {
                bus_pressure_trigger_free(bt);
                return -ENOMEM;
        }
        r = sd_bus_track_new(sd_bus_message_get_bus(msg), &bt->track, bus_pressure_owner_gone, bt);
        if (r >= 0)
                r = sd_bus_track_add_sender(bt->track, msg);
        if (r < 0) {
                bus_pressure_trigger_free(bt);
                return r;
        }
        now = psi_now_usec();
        psi_group_totals(&t->psi, now, totals);
        bt->tenant = t;
        psi_trigger_init(&bt->tr, kind, threshold, window, totals[kind], now);
        tv = (struct timeval) {
                .tv_sec = (time_t) (window / BUS_PRESSURE_POLL_DIVISOR / 1000000u),
                .tv_usec = (suseconds_t) (window / BUS_PRESSURE_POLL_DIVISOR % 1000000u),
        };
        if (event_add(bt->timer, &tv) < 0) {
                bus_pressure_trigger_free(bt);
                return -EIO;
        }
        log_info("pressure trigger %" PRIu64 " on %s: \"%s\" for %s", bt->id, bt->tenant_path, spec, sender);
        return sd_bus_reply_method_return(msg, "t", bt->id);
}

int bus_manager_method_remove_pressure_trigger(sd_bus_message *msg, struct manager *m, sd_bus_error *error) {
        const char *sender = sd_bus_message_get_sender(msg);
        uint64_t id;
        int r;

        r = sd_bus_message_read(msg, "t", &id);
        if (r < 0)
                return r;
        for (struct bus_pressure_trigger *bt = m->bus->pressure_triggers; bt; bt = bt->next)
                if (bt->id == id && sender && strcmp(bt->owner, sender) == 0) {
                        bus_pressure_trigger_free(bt);
                        return sd_bus_reply_method_return(msg, NULL);
                }
        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "No pressure trigger %" PRIu64 " of this caller",
                                 id);
}

void bus_pressure_triggers_free(struct manager *m) {
        if (!m->bus)
                return;
        while (m->bus->pressure_triggers)
                bus_pressure_trigger_free(m->bus->pressure_triggers);
}
