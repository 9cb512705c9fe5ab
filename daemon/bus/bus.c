/* SPDX-License-Identifier: MIT */
/*
 * bus.c - the bus connection of membrokerd: connect, register the objects,
 * request org.membroker1, and drive sd-bus from the manager's libevent loop.
 *
 * Loop integration: one libevent event watches sd_bus_get_fd() for the
 * events sd_bus_get_events() asks for, one timer fires at
 * sd_bus_get_timeout().  Both call sd_bus_process() until it has nothing
 * left to do (at most BUS_PROCESS_BATCH messages in one go, so that a busy
 * bus cannot starve the broker's other events) and then re-arm both from
 * sd-bus' new wishes.  Anything that queues messages outside
 * sd_bus_process() (signals, asynchronous replies) calls bus_kick().  There
 * is no second loop and no thread: the connection belongs to the main thread.
 *
 * When the bus connection is lost (the bus daemon restarted or dropped us)
 * the broker goes on serving its clients and reconnects, first after
 * BUS_RECONNECT_MIN_USEC and then at doubling intervals up to
 * BUS_RECONNECT_MAX_USEC, registering its objects and requesting the name
 * again; the D-Bus API is missing only in between (logged both ways).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <systemd/sd-bus.h>

#include "bus-internal.h"
#include "bus.h"
#include "delegate.h"
#include "log.h"
#include "macros.h"

#define BUS_PROCESS_BATCH 64
#define BUS_RECONNECT_MIN_USEC (250u * 1000u)
#define BUS_RECONNECT_MAX_USEC (30u * 1000u * 1000u)

static const sd_bus_error_map bus_error_map[] = {
        SD_BUS_ERROR_MAP(BUS_ERROR_NO_SUCH_TENANT, ENOENT),
        SD_BUS_ERROR_MAP(BUS_ERROR_TENANT_EXISTS, EEXIST),
        SD_BUS_ERROR_MAP(BUS_ERROR_BUSY, EBUSY),
        SD_BUS_ERROR_MAP(BUS_ERROR_BAD_CONFIG, EINVAL),
        SD_BUS_ERROR_MAP(BUS_ERROR_AGAIN, EAGAIN),
        SD_BUS_ERROR_MAP_END,
};

void bus_tree_unlockp(struct manager **m) {
        if (*m)
                pthread_rwlock_unlock(&(*m)->b.tree_lock);
}

void bus_stats_unlockp(struct manager **m) {
        if (*m)
                pthread_mutex_unlock(&(*m)->b.stats_lock);
}

static bool bus_is_up(struct manager *m) {
        return m && m->bus && m->bus->bus && sd_bus_is_open(m->bus->bus) > 0;
}

static void bus_dispatch(evutil_socket_t fd, short what, void *userdata);
static const char *bus_kind_name(const struct manager *m);
static int bus_open(struct manager *m, bool quiet);
static const struct manager_observer_ops bus_observer_ops;

/* Stop watching the connection (lost, or shutting down). */
static void bus_unhook(struct bus_state *s) {
        if (s->io) {
                event_free(s->io);
                s->io = NULL;
        }
        if (s->timer) {
                event_free(s->timer);
                s->timer = NULL;
        }
        s->io_added = false;
}

static void bus_retry_arm(struct bus_state *s) {
        struct timeval tv = {
                .tv_sec = (time_t) (s->retry_usec / 1000000u),
                .tv_usec = (suseconds_t) (s->retry_usec % 1000000u),
        };

        if (evtimer_add(s->retry, &tv) < 0)
                log_error("cannot arm the bus reconnection timer; the D-Bus API stays gone");
}

/* The connection is gone: stop watching it and try again later.  The
 * connection is only closed here, not freed: this may run inside
 * sd_bus_process() (a handler's bus_kick()); bus_retry() frees it from the
 * loop. */
static void bus_lost(struct manager *m, int r) {
        struct bus_state *s = m->bus;

        log_error("lost the connection to %s (%s); clients are still served, reconnecting",
                  bus_kind_name(m), strerror(-r));
        s->losses++;
        bus_unhook(s);
        /* Their owners' names went with the connection. */
        bus_pressure_triggers_free(m);
        sd_bus_close(s->bus);
        s->retry_usec = BUS_RECONNECT_MIN_USEC;
        s->retries = 0;
        bus_retry_arm(s);
}

/* Re-arm the fd event and the timer from sd-bus' current wishes. */
static int bus_rearm(struct manager *m) {
        struct bus_state *s = m->bus;
        uint64_t until_usec;
        short want = 0;
        int events, fd, r;

        if (!s || !s->io)
                return 0;

        events = sd_bus_get_events(s->bus);
        if (events < 0)
                return events;
        fd = sd_bus_get_fd(s->bus);
        if (fd < 0)
                return fd;
        if (events & POLLIN)
                want |= EV_READ;
        if (events & POLLOUT)
                want |= EV_WRITE;

        if (!s->io_added || want != s->io_events) {
                if (s->io_added)
                        event_del(s->io);
                s->io_added = false;
                if (event_assign(s->io, m->base, fd, want | EV_PERSIST, bus_dispatch, m) < 0 ||
                    event_add(s->io, NULL) < 0)
                        return -EIO;
                s->io_added = true;
                s->io_events = want;
        }

        r = sd_bus_get_timeout(s->bus, &until_usec);
        if (r < 0)
                return r;
        if (until_usec == UINT64_MAX)
                evtimer_del(s->timer);
        else {
                struct timespec ts;
                uint64_t now_usec, rel_usec;
                struct timeval tv;

                clock_gettime(CLOCK_MONOTONIC, &ts);
                now_usec = (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
                rel_usec = until_usec > now_usec ? until_usec - now_usec : 0;
                tv.tv_sec = (time_t) (rel_usec / 1000000u);
                tv.tv_usec = (suseconds_t) (rel_usec % 1000000u);
                if (evtimer_add(s->timer, &tv) < 0)
                        return -EIO;
        }
        return 0;
}

static void bus_dispatch(evutil_socket_t fd, short what, void *userdata) {
        struct manager *m = userdata;
        int r;

        (void) fd;
        (void) what;
        if (!m->bus || !m->bus->io)
                return;

        for (unsigned i = 0; i < BUS_PROCESS_BATCH; i++) {
                r = sd_bus_process(m->bus->bus, NULL);
                if (r < 0) {
                        bus_lost(m, r);
                        return;
                }
                if (r == 0)
                        break;
        }
        if (sd_bus_is_open(m->bus->bus) <= 0) {
                bus_lost(m, -ECONNRESET);
                return;
        }
        r = bus_rearm(m);
        if (r < 0)
                bus_lost(m, r);
}

void bus_kick(struct manager *m) {
        int r;

        if (!bus_is_up(m) || !m->bus->io)
                return;
        r = bus_rearm(m);
        if (r < 0)
                bus_lost(m, r);
}

/* @address without its guid= keys: a bus daemon that restarted has a new
 * guid, and sd-bus refuses a server whose guid differs from the address'.
 * Transports are separated by ';', keys by ','.  NULL on ENOMEM. */
static char *bus_address_without_guid(const char *address) {
        char *out = malloc(strlen(address) + 1), *o = out;
        const char *p = address;

        if (!out)
                return NULL;
        while (*p) {
                size_t t = strcspn(p, ";"), colon = strcspn(p, ":");
                const char *end = p + t, *k;
                bool first = true;

                if (colon < t) {
                        /* the transport name and its ':' */
                        memcpy(o, p, colon + 1);
                        o += colon + 1;
                        for (k = p + colon + 1; k < end;) {
                                size_t n = strcspn(k, ",;");

                                if (k + n > end)
                                        n = (size_t) (end - k);
                                if (n > 0 && strncmp(k, "guid=", 5) != 0) {
                                        if (!first)
                                                *o++ = ',';
                                        memcpy(o, k, n);
                                        o += n;
                                        first = false;
                                }
                                k += n;
                                if (k < end && *k == ',')
                                        k++;
                        }
                } else {
                        memcpy(o, p, t);
                        o += t;
                }
                p = end;
                if (*p == ';')
                        *o++ = *p++;
        }
        *o = '\0';
        return out;
}

static int bus_connect(struct manager *m, bool reconnecting, sd_bus **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(freep) char *address = NULL;
        int r;

        switch (m->bus_kind) {
        case MANAGER_BUS_SYSTEM:
                r = sd_bus_open_system_with_description(&bus, "membrokerd");
                break;
        case MANAGER_BUS_USER:
                r = sd_bus_open_user_with_description(&bus, "membrokerd");
                break;
        case MANAGER_BUS_ADDRESS:
                if (!m->bus_address)
                        return -EINVAL;
                if (reconnecting) {
                        address = bus_address_without_guid(m->bus_address);
                        if (!address)
                                return -ENOMEM;
                }
                r = sd_bus_new(&bus);
                if (r < 0)
                        return r;
                (void) sd_bus_set_description(bus, "membrokerd");
                r = sd_bus_set_address(bus, address ? address : m->bus_address);
                if (r < 0)
                        return r;
                r = sd_bus_set_bus_client(bus, true);
                if (r < 0)
                        return r;
                r = sd_bus_start(bus);
                break;
        default:
                return -EINVAL;
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(bus);
        return 0;
}

static const char *bus_kind_name(const struct manager *m) {
        switch (m->bus_kind) {
        case MANAGER_BUS_SYSTEM:
                return "the system bus";
        case MANAGER_BUS_USER:
                return "the user bus";
        case MANAGER_BUS_ADDRESS:
                return m->bus_address;
        default:
                return "no bus";
        }
}

/* Connect, register the objects, request the name and hook the connection
 * into the loop.  m->bus exists; m->bus->bus is NULL.  @quiet: a failure to
 * connect is expected (reconnecting) and logged by the caller. */
static int bus_open(struct manager *m, bool quiet) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        struct bus_state *s = m->bus;
        int r;

        r = bus_connect(m, quiet, &bus);
        if (r < 0) {
                log_full_errno(quiet ? LOG_DEBUG : LOG_ERR, 0, "cannot connect to %s: %s", bus_kind_name(m),
                               strerror(-r));
                return r;
        }

        r = sd_bus_add_object_vtable(bus, NULL, BUS_MANAGER_PATH, BUS_MANAGER_INTERFACE, bus_manager_vtable, m);
        if (r < 0)
                goto fail_register;
        /* Tenants: one fallback vtable and an enumerator instead of one
         * registration per tenant, so that 10,000 tenants cost nothing up
         * front and a tenant created or removed needs no bookkeeping here. */
        r = sd_bus_add_fallback_vtable(bus, NULL, BUS_TENANT_PREFIX, BUS_TENANT_INTERFACE, bus_tenant_vtable,
                                       bus_tenant_find, m);
        if (r < 0)
                goto fail_register;
        r = sd_bus_add_node_enumerator(bus, NULL, BUS_TENANT_PREFIX, bus_tenant_enumerate, m);
        if (r < 0)
                goto fail_register;
        r = sd_bus_add_object_manager(bus, NULL, BUS_MANAGER_PATH);
        if (r < 0)
                goto fail_register;

        r = sd_bus_request_name(bus, BUS_NAME, 0);
        if (r < 0) {
                log_error("cannot own %s on %s: %s%s", BUS_NAME, bus_kind_name(m), strerror(-r),
                        r == -EEXIST ? " (another membrokerd runs?)" :
                        r == -EACCES || r == -EPERM ? " (the bus policy does not allow it)" : "");
                return r;
        }

        s->io = event_new(m->base, -1, 0, bus_dispatch, m);
        s->timer = evtimer_new(m->base, bus_dispatch, m);
        if (!s->io || !s->timer) {
                bus_unhook(s);
                return -ENOMEM;
        }
        s->bus = TAKE_PTR(bus);

        r = bus_rearm(m);
        if (r < 0) {
                log_error("cannot watch the bus connection: %s", strerror(-r));
                bus_unhook(s);
                s->bus = sd_bus_flush_close_unref(s->bus);
                return r;
        }
        return 0;

fail_register:
        log_error("cannot register the D-Bus objects: %s", strerror(-r));
        return r;
}

/* The reconnection timer: free the old connection, open a new one, or try
 * again later (the interval doubles up to BUS_RECONNECT_MAX_USEC). */
static void bus_retry(evutil_socket_t fd, short what, void *userdata) {
        struct manager *m = userdata;
        struct bus_state *s = m->bus;
        int r;

        (void) fd;
        (void) what;
        if (s->bus)
                s->bus = sd_bus_flush_close_unref(s->bus);
        r = bus_open(m, true);
        if (r < 0) {
                if (s->retries++ == 0)
                        log_warning("%s is not back yet (%s); retrying every %u s at most", bus_kind_name(m),
                                    strerror(-r), BUS_RECONNECT_MAX_USEC / 1000000u);
                s->retry_usec = MB_MIN(2 * s->retry_usec, (uint64_t) BUS_RECONNECT_MAX_USEC);
                bus_retry_arm(s);
                return;
        }
        log_info("reconnected to %s after %u attempt%s; %s is back", bus_kind_name(m), s->retries + 1,
                 s->retries == 0 ? "" : "s", BUS_NAME);
        s->retries = 0;
        s->reconnects++;
}

int bus_setup(struct manager *m) {
        struct bus_state *s;
        int r;

        if (m->bus_kind == MANAGER_BUS_NONE)
                return 0;
        if (m->bus)
                return -EALREADY;

        r = sd_bus_error_add_map(bus_error_map);
        if (r < 0)
                return r;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->manager = m;
        s->retry = evtimer_new(m->base, bus_retry, m);
        if (!s->retry) {
                free(s);
                return -ENOMEM;
        }
        m->bus = s;

        r = bus_open(m, false);
        if (r < 0) {
                bus_free(m);
                return r;
        }
        manager_set_observer(m, &bus_observer_ops, m);
        log_info("%s on %s", BUS_NAME, bus_kind_name(m));
        return 0;
}

void bus_free(struct manager *m) {
        struct bus_state *s;

        if (!m || !m->bus)
                return;
        s = m->bus;
        bus_unhook(s);
        bus_pressure_triggers_free(m);
        if (s->retry)
                event_free(s->retry);
        if (s->bus)
                sd_bus_flush_close_unref(s->bus);
        free(s);
        m->bus = NULL;
}

/* ---- authorization ---- */

int bus_verify_root(sd_bus_message *msg, const char *action, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t euid;
        int r;

        /* The sender's credentials as the bus driver recorded them when it
         * connected, not anything the message claims. */
        r = sd_bus_query_sender_creds(msg, SD_BUS_CREDS_EUID | SD_BUS_CREDS_AUGMENT, &creds);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "%s: cannot determine the caller's credentials: %s", action,
                                         strerror(-r));
        r = sd_bus_creds_get_euid(creds, &euid);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "%s: the bus did not tell the caller's uid: %s", action, strerror(-r));
        if (euid != 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "%s requires uid 0 (the caller runs as uid %u)", action,
                                         (unsigned) euid);
        return 1;
}

/* The supplementary groups the bus daemon recorded for the sender of @msg
 * when it connected (SO_PEERGROUPS), from its GetConnectionCredentials():
 * the UnixGroupIDs entry, which dbus-daemon 1.12 and later fill in.  sd-bus
 * (up to systemd 252 at least) does not read that entry and would only
 * "augment" the groups from /proc/PID, whose pid may have been recycled by
 * then; this asks the bus itself.  Returns 1 with *@ret (malloc'ed, may be
 * NULL for none) and *@ret_n, 0 when the bus did not report them, or a
 * negative errno. */
static int bus_sender_groups(sd_bus_message *msg, gid_t **ret, size_t *ret_n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *sender = sd_bus_message_get_sender(msg), *key;
        int r;

        if (!sender)
                return 0;
        r = sd_bus_call_method(sd_bus_message_get_bus(msg), "org.freedesktop.DBus", "/org/freedesktop/DBus",
                               "org.freedesktop.DBus", "GetConnectionCredentials", NULL, &reply, "s", sender);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                r = sd_bus_message_read(reply, "s", &key);
                if (r < 0)
                        return r;
                if (strcmp(key, "UnixGroupIDs") == 0) {
                        const uint32_t *ids;
                        size_t bytes;

                        r = sd_bus_message_enter_container(reply, 'v', "au");
                        if (r < 0)
                                return r;
                        r = sd_bus_message_read_array(reply, 'u', (const void **) &ids, &bytes);
                        if (r < 0)
                                return r;
                        *ret_n = bytes / sizeof(uint32_t);
                        *ret = *ret_n > 0 ? malloc(bytes) : NULL;
                        if (*ret_n > 0 && !*ret)
                                return -ENOMEM;
                        if (*ret_n > 0)
                                memcpy(*ret, ids, bytes);
                        return 1;
                }
                r = sd_bus_message_skip(reply, "v");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        return r < 0 ? r : 0;
}

int bus_verify_tenant(sd_bus_message *msg, struct manager *m, struct tenant *t, bool t_is_target,
                      const char *target_path, const char *action, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        _cleanup_(freep) char *via_path = NULL;
        _cleanup_(freep) gid_t *groups = NULL;
        enum mb_delegate_verdict v;
        struct mb_caller c = {};
        unsigned count = 0, max = 0;
        bool groups_known;
        int r;

        /* The sender's uid as the bus driver recorded it when it
         * connected, not anything the message claims (bus_verify_root()). */
        r = sd_bus_query_sender_creds(msg, SD_BUS_CREDS_EUID | SD_BUS_CREDS_AUGMENT, &creds);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "%s: cannot determine the caller's credentials: %s", action,
                                         strerror(-r));
        r = sd_bus_creds_get_euid(creds, &c.uid);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "%s: the bus did not tell the caller's uid: %s", action, strerror(-r));
        if (c.uid == 0)
                return 1;
        /* The uid alone first: a Delegate= naming the uid needs no call to
         * the bus driver (a synchronous round trip on the main loop), only
         * a rule that could grant through a group does. */
        {
                const struct tenant *via;

                BUS_TREE_RDLOCK(m);
                v = mb_delegate_check(t, t_is_target, &c, &via);
        }
        groups_known = false;
        if (v != MB_DELEGATE_GRANTED) {
                r = bus_sender_groups(msg, &groups, &c.ngroups);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        log_warning("cannot ask the bus for the groups of uid %u: %s", (unsigned) c.uid,
                                    strerror(-r));
                groups_known = r > 0;
                c.groups = groups;
        }
        {
                const struct tenant *via, *full = NULL;

                BUS_TREE_RDLOCK(m);
                v = mb_delegate_check(t, t_is_target, &c, &via);
                /* cgroup.max.descendants: a delegate creates no more below
                 * a delegated tenant that has its DelegateMaxDescendants. */
                if (v == MB_DELEGATE_GRANTED && !t_is_target && !mb_delegate_room(t, target_path, &full, &count)) {
                        max = mb_delegate_max_descendants(&full->delegate);
                        via = full;
                }
                if (via) {
                        via_path = strdup(via->path);
                        if (!via_path)
                                return -ENOMEM;
                }
                if (full)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                                 "%s '%s': '%s' has %u tenants below it, and its delegates may "
                                                 "make at most DelegateMaxDescendants=%u there",
                                                 action, target_path, via_path, count, max);
        }
        switch (v) {
        case MB_DELEGATE_ROOT:
                return 1;
        case MB_DELEGATE_GRANTED:
                log_info("uid %u: %s '%s', allowed by Delegate= of '%s'", (unsigned) c.uid, action, target_path,
                         via_path);
                return 1;
        case MB_DELEGATE_DENIED_SELF:
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "%s '%s': uid %u may manage tenants below '%s' (Delegate=), not '%s' "
                                         "itself",
                                         action, target_path, (unsigned) c.uid, via_path, via_path);
        default:
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "%s requires uid 0 (the caller runs as uid %u), or a Delegate= on a "
                                         "tenant above '%s' naming that uid or one of its groups%s",
                                         action, (unsigned) c.uid, target_path,
                                         groups_known ? "" : " (the bus did not report the caller's groups)");
        }
}

/* ---- signals ---- */

void bus_emit_memory_event(struct manager *m, const char *tenant_path, enum mb_event event, uint64_t count) {
        _cleanup_(freep) char *object = NULL;
        int r;

        if (!bus_is_up(m) || !tenant_path)
                return;
        r = bus_tenant_object_path(tenant_path, &object);
        if (r < 0)
                return;
        r = sd_bus_emit_signal(m->bus->bus, object, BUS_TENANT_INTERFACE, "MemoryEvent", "st",
                               mb_event_to_string(event), count);
        if (r < 0)
                log_warning("cannot emit MemoryEvent on %s: %s", object, strerror(-r));
        bus_kick(m);
}

void bus_emit_limits_changed(struct manager *m, struct tenant *t) {
        _cleanup_(freep) char *object = NULL;
        int r;

        if (!bus_is_up(m) || !t)
                return;
        r = bus_tenant_object_path(t->path, &object);
        if (r < 0)
                return;
        r = sd_bus_emit_properties_changed(m->bus->bus, object, BUS_TENANT_INTERFACE, "MemoryMax",
                                           "MemoryHigh", "MemoryLow", "MemoryMin", "ChargeBatch", NULL);
        if (r < 0)
                log_warning("cannot emit PropertiesChanged on %s: %s", object, strerror(-r));
        bus_kick(m);
}

static int emit_charge_batch_walk(struct tenant *t, struct manager *m, bool top) {
        _cleanup_(freep) char *object = NULL;

        /* A descendant with its own ChargeBatch= does not inherit. */
        if (!top && t->charge_batch != 0)
                return 0;
        if (!top && bus_tenant_object_path(t->path, &object) >= 0)
                (void) sd_bus_emit_properties_changed(m->bus->bus, object, BUS_TENANT_INTERFACE, "ChargeBatch",
                                                      NULL);
        for (struct tenant *c = t->children; c; c = c->next_sibling)
                emit_charge_batch_walk(c, m, false);
        return 0;
}

void bus_emit_charge_batch_changed(struct manager *m, struct tenant *t) {
        if (!bus_is_up(m) || !t)
                return;
        {
                BUS_TREE_RDLOCK(m);
                emit_charge_batch_walk(t, m, true);
        }
        bus_kick(m);
}

void bus_emit_tenant_added(struct manager *m, struct tenant *t) {
        _cleanup_(freep) char *object = NULL;
        int r;

        if (!bus_is_up(m) || !t)
                return;
        r = bus_tenant_object_path(t->path, &object);
        if (r < 0)
                return;
        r = sd_bus_emit_interfaces_added(m->bus->bus, object, BUS_TENANT_INTERFACE, NULL);
        if (r < 0)
                log_warning("cannot emit InterfacesAdded for %s: %s", object, strerror(-r));
        bus_kick(m);
}

void bus_emit_tenant_removed(struct manager *m, const char *tenant_path) {
        _cleanup_(freep) char *object = NULL;
        int r;

        if (!bus_is_up(m) || !tenant_path)
                return;
        r = bus_tenant_object_path(tenant_path, &object);
        if (r < 0)
                return;
        r = sd_bus_emit_interfaces_removed(m->bus->bus, object, BUS_TENANT_INTERFACE, NULL);
        if (r < 0)
                log_warning("cannot emit InterfacesRemoved for %s: %s", object, strerror(-r));
        bus_kick(m);
}

/* ---- the manager's observer ---- */

static void observer_tenant_added(void *userdata, struct tenant *t) {
        bus_emit_tenant_added(userdata, t);
}

static void observer_tenant_removed(void *userdata, const char *tenant_path) {
        bus_emit_tenant_removed(userdata, tenant_path);
}

static void observer_limits_changed(void *userdata, struct tenant *t) {
        bus_emit_limits_changed(userdata, t);
}

static void observer_memory_event(void *userdata, const char *tenant_path, enum mb_event event, uint64_t count) {
        bus_emit_memory_event(userdata, tenant_path, event, count);
}

static void observer_stop(void *userdata) {
        bus_free(userdata);
}

static void observer_dump(void *userdata, FILE *f) {
        struct manager *m = userdata;
        struct bus_state *s = m->bus;

        if (!s)
                return;
        fprintf(f, "state: bus connected=%s losses=%" PRIu64 " reconnects=%" PRIu64 " pressure_triggers=%u\n",
                s->io ? "yes" : "no", s->losses, s->reconnects, s->npressure_triggers);
}

static const struct manager_observer_ops bus_observer_ops = {
        .tenant_added = observer_tenant_added,
        .tenant_removed = observer_tenant_removed,
        .limits_changed = observer_limits_changed,
        .memory_event = observer_memory_event,
        .stop = observer_stop,
        .dump = observer_dump,
};
