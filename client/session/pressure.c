/* SPDX-License-Identifier: MIT */
/*
 * pressure.c - PSI triggers of the application on its tenant's
 * memory.pressure (mb_pressure_trigger(), membroker.h).
 *
 * The kernel hands out a file whose poll() reports POLLPRI when a trigger
 * fires; here the daemon evaluates the trigger (the kernel's psi_trigger
 * window logic) and sends PressureEvent{id}, and the thread that reads
 * the connection makes the trigger's eventfd readable.  The trigger enters
 * the list before it is sent, so an event that follows the Ack closely is
 * not lost; it is re-sent to a restarted daemon once accepted (active).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/client.h"
#include "macros.h"
#include "core/mb_internal.h"
#include "membroker.h"
#include "session/session.h"

/* The longest trigger text worth sending ("some 10000000 10000000" and
 * blanks). */
#define PRESSURE_TRIGGER_MAX_BYTES 64

static void pressure_unlink_locked(mb_client *c, struct client_pressure_trigger *t) {
        mb_assert_mutex_held(&c->session.io_lock);
        for (struct client_pressure_trigger **p = &c->session.pressure_triggers; *p; p = &(*p)->next)
                if (*p == t) {
                        *p = t->next;
                        return;
                }
}

static void pressure_free(struct client_pressure_trigger *t) {
        if (t->fd >= 0)
                close(t->fd);
        free(t->trigger);
        free(t);
}

int mb_pressure_trigger(mb_client *c, const char *trigger) {
        struct client_pressure_trigger *t;
        int r;

        if (!c || !trigger || strnlen(trigger, PRESSURE_TRIGGER_MAX_BYTES) >= PRESSURE_TRIGGER_MAX_BYTES) {
                mb_set_error("mb_pressure_trigger: no client or no trigger, or a trigger too long");
                return -EINVAL;
        }
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        t->trigger = strdup(trigger);
        if (t->fd < 0 || !t->trigger) {
                r = t->fd < 0 ? -errno : -ENOMEM;
                pressure_free(t);
                mb_set_error("mb_pressure_trigger: %s", strerror(-r));
                return r;
        }

        MB_LOCK_GUARD(&c->session.conn_lock);
        r = session_broken(c);
        if (r < 0) {
                pressure_free(t);
                return session_lost(c);
        }
        pthread_mutex_lock(&c->session.io_lock);
        if (!c->session.pressure_ok) {
                pthread_mutex_unlock(&c->session.io_lock);
                pressure_free(t);
                mb_set_error("membrokerd has no pressure triggers");
                return -EOPNOTSUPP;
        }
        t->id = ++c->session.pressure_last_id;
        t->next = c->session.pressure_triggers;
        c->session.pressure_triggers = t;
        pthread_mutex_unlock(&c->session.io_lock);

        r = session_pressure_trigger_locked(c, t->id, trigger);

        pthread_mutex_lock(&c->session.io_lock);
        if (r < 0) {
                pressure_unlink_locked(c, t);
                pthread_mutex_unlock(&c->session.io_lock);
                pressure_free(t);
                return r;
        }
        t->active = true;
        r = t->fd;
        pthread_mutex_unlock(&c->session.io_lock);
        return r;
}

int mb_pressure_trigger_close(mb_client *c, int fd) {
        struct client_pressure_trigger *t = NULL;
        uint32_t id = 0;

        if (!c || fd < 0)
                return -EBADF;
        MB_LOCK_GUARD(&c->session.conn_lock);
        pthread_mutex_lock(&c->session.io_lock);
        for (t = c->session.pressure_triggers; t; t = t->next)
                if (t->fd == fd && t->active)
                        break;
        if (t) {
                id = t->id;
                pressure_unlink_locked(c, t);
        }
        pthread_mutex_unlock(&c->session.io_lock);
        if (!t) {
                mb_set_error("mb_pressure_trigger_close: %d is no pressure trigger of this client", fd);
                return -EBADF;
        }
        /* Out of the list first: no event writes to the fd any more. */
        if (session_broken(c) == 0)
                (void) session_pressure_trigger_locked(c, id, NULL);
        pressure_free(t);
        return 0;
}
