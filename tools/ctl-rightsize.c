/* SPDX-License-Identifier: MIT */
/*
 * ctl-rightsize.c - membrokerctl rightsize: MemoryPressureTarget= and the
 * state of the right-sizing loop of tenants (org.membroker1.Tenant's
 * MemoryPressureTarget, RightSizeState, MemoryWorkingSetEstimate,
 * RightSizeStep, RightSizeHigh, RightSizeReclaimed), as a table or JSON.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-bus.h"
#include "ctl.h"

struct rs_row {
        char *path, *target, *state;
        uint64_t current, wse, step, high, reclaimed;
};

static void row_done(struct rs_row *w) {
        free(w->path);
        free(w->target);
        free(w->state);
}

static int get_u64(sd_bus *bus, const char *object, const char *name, sd_bus_error *error, uint64_t *ret) {
        return sd_bus_get_property_trivial(bus, CTL_BUS_NAME, object, CTL_TENANT_IFACE, name, error, 't', ret);
}

/* The properties of the tenant at @object (canonical @path) into @w. */
static int read_row(sd_bus *bus, const char *object, const char *path, struct rs_row *w) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        char what[256];
        int r;

        snprintf(what, sizeof what, "tenant '%s'", path);
        *w = (struct rs_row) { .path = strdup(path) };
        if (!w->path)
                return -ENOMEM;
        r = sd_bus_get_property_string(bus, CTL_BUS_NAME, object, CTL_TENANT_IFACE, "MemoryPressureTarget", &error,
                                       &w->target);
        if (r >= 0)
                r = sd_bus_get_property_string(bus, CTL_BUS_NAME, object, CTL_TENANT_IFACE, "RightSizeState", &error,
                                               &w->state);
        if (r >= 0)
                r = get_u64(bus, object, "MemoryCurrent", &error, &w->current);
        if (r >= 0)
                r = get_u64(bus, object, "MemoryWorkingSetEstimate", &error, &w->wse);
        if (r >= 0)
                r = get_u64(bus, object, "RightSizeStep", &error, &w->step);
        if (r >= 0)
                r = get_u64(bus, object, "RightSizeHigh", &error, &w->high);
        if (r >= 0)
                r = get_u64(bus, object, "RightSizeReclaimed", &error, &w->reclaimed);
        if (r < 0)
                return ctl_bus_log_error(what, &error, r);
        return 0;
}

static void print_rows(const struct rs_row *v, size_t n) {
        if (ctl_arg.format == CTL_FORMAT_JSON) {
                fputc('[', stdout);
                for (size_t i = 0; i < n; i++) {
                        fputs(i ? ",{\"Path\":" : "{\"Path\":", stdout);
                        ctl_json_string(stdout, v[i].path);
                        fputs(",\"MemoryPressureTarget\":", stdout);
                        ctl_json_string(stdout, v[i].target);
                        fputs(",\"RightSizeState\":", stdout);
                        ctl_json_string(stdout, v[i].state);
                        printf(",\"MemoryCurrent\":%" PRIu64 ",\"MemoryWorkingSetEstimate\":%" PRIu64
                               ",\"RightSizeStep\":%" PRIu64 ",\"RightSizeHigh\":%" PRIu64
                               ",\"RightSizeReclaimed\":%" PRIu64 "}",
                               v[i].current, v[i].wse, v[i].step, v[i].high, v[i].reclaimed);
                }
                fputs("]\n", stdout);
                return;
        }
        if (ctl_arg.legend)
                printf("%-20s %-18s %-8s %10s %10s %10s %10s %10s\n", "TENANT", "TARGET", "STATE", "CURRENT",
                       "WORKINGSET", "STEP", "LIMIT", "RECLAIMED");
        for (size_t i = 0; i < n; i++) {
                char b1[CTL_FORMAT_BYTES_MAX], b2[CTL_FORMAT_BYTES_MAX], b3[CTL_FORMAT_BYTES_MAX],
                        b4[CTL_FORMAT_BYTES_MAX], b5[CTL_FORMAT_BYTES_MAX];

                printf("%-20s %-18s %-8s %10s %10s %10s %10s %10s\n", v[i].path, v[i].target, v[i].state,
                       ctl_size_str(b1, v[i].current), ctl_size_str(b2, v[i].wse), ctl_size_str(b3, v[i].step),
                       v[i].high == UINT64_MAX ? "max" : ctl_size_str(b4, v[i].high),
                       ctl_size_str(b5, v[i].reclaimed));
        }
}

int ctl_rightsize_show(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct rs_row *v = NULL;
        size_t n = 0, alloc = 0;
        int r = 0;

        if (argc <= 1) {
                /* Every tenant that sets a target. */
                const char *path, *object;

                r = ctl_bus_call_manager(bus, "ListTenants", &error, &reply, "");
                if (r < 0)
                        return ctl_bus_log_error("ListTenants", &error, r);
                r = sd_bus_message_enter_container(reply, 'a', "(so)");
                while (r >= 0 && (r = sd_bus_message_read(reply, "(so)", &path, &object)) > 0) {
                        struct rs_row w;

                        if (n == alloc) {
                                struct rs_row *nv = reallocarray(v, alloc ? 2 * alloc : 16, sizeof(*nv));

                                if (!nv) {
                                        r = -ENOMEM;
                                        break;
                                }
                                v = nv;
                                alloc = alloc ? 2 * alloc : 16;
                        }
                        r = read_row(bus, object, path, &w);
                        if (r < 0) {
                                row_done(&w);
                                break;
                        }
                        if (strcmp(w.target, "no") == 0)
                                row_done(&w);
                        else
                                v[n++] = w;
                }
        } else {
                v = calloc((size_t) argc, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                for (int a = 1; a < argc && r >= 0; a++) {
                        _cleanup_(freep) char *object = NULL, *canonical = NULL;

                        r = ctl_bus_tenant_object(bus, argv[a], &object, &canonical);
                        if (r >= 0) {
                                r = read_row(bus, object, canonical, &v[n]);
                                if (r < 0)
                                        row_done(&v[n]);
                                else
                                        n++;
                        }
                }
        }
        if (r >= 0)
                print_rows(v, n);
        for (size_t i = 0; i < n; i++)
                row_done(&v[i]);
        free(v);
        return r < 0 ? r : 0;
}
