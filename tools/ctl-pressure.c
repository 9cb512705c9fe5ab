/* SPDX-License-Identifier: MIT */
/*
 * ctl-pressure.c - membrokerctl pressure: a tenant's memory.pressure in
 * the kernel's layout, or, with a trigger, a line per PressureTriggered
 * event, as a program polling a cgroup's memory.pressure for POLLPRI would
 * see them.  The trigger belongs to this process's bus connection: it goes
 * when the command ends.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-bus.h"
#include "ctl.h"

struct pressure_watch {
        uint64_t id;
        uint64_t events;
        bool done;
};

static int pressure_on_signal(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        struct pressure_watch *w = userdata;
        const char *path, *trigger;
        uint64_t id;

        (void) error;
        if (sd_bus_message_read(m, "tss", &id, &path, &trigger) < 0 || id != w->id)
                return 0;
        w->events++;
        printf("%s: %s\n", path, trigger);
        fflush(stdout);
        if (ctl_arg.iterations > 0 && w->events >= ctl_arg.iterations)
                w->done = true;
        return 0;
}

static int pressure_watch(sd_bus *bus, const char *path, const char *trigger) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *slot = NULL;
        struct pressure_watch w = {};
        int r;

        /* Subscribe before the trigger exists: no event is missed. */
        r = sd_bus_match_signal(bus, &slot, NULL, CTL_MANAGER_PATH, CTL_MANAGER_IFACE, "PressureTriggered",
                                pressure_on_signal, &w);
        if (r < 0) {
                ctl_log_error("cannot watch PressureTriggered: %s", strerror(-r));
                return r;
        }
        r = ctl_bus_call_manager(bus, "AddPressureTrigger", &error, &reply, "ss", path, trigger);
        if (r < 0)
                return ctl_bus_log_error("cannot add the pressure trigger", &error, r);
        r = sd_bus_message_read(reply, "t", &w.id);
        if (r < 0)
                return r;
        if (ctl_arg.legend)
                fprintf(stderr, "watching %s for \"%s\" (trigger %" PRIu64 ")\n", path, trigger, w.id);
        while (!w.done) {
                r = sd_bus_process(bus, NULL);
                if (r < 0) {
                        ctl_log_error("lost the bus: %s", strerror(-r));
                        return r;
                }
                if (r > 0)
                        continue;
                r = sd_bus_wait(bus, UINT64_MAX);
                if (r < 0 && r != -EINTR) {
                        ctl_log_error("lost the bus: %s", strerror(-r));
                        return r;
                }
        }
        return 0;
}

int ctl_pressure_show(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *text;
        int r;

        if (argc > 2)
                return pressure_watch(bus, argv[1], argv[2]);
        r = ctl_bus_call_manager(bus, "GetPressureText", &error, &reply, "s", argv[1]);
        if (r < 0)
                return ctl_bus_log_error("cannot read the pressure", &error, r);
        r = sd_bus_message_read(reply, "s", &text);
        if (r < 0)
                return r;
        fputs(text, stdout);
        return 0;
}
