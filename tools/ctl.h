/* SPDX-License-Identifier: MIT */
/*
 * ctl.h - what every part of membrokerctl shares: the parsed command line
 * (ctl_arg, filled by membrokerctl.c before a verb runs), error reporting
 * and the verbs the table in membrokerctl.c dispatches to.
 *
 * The parts, one concept each:
 *   membrokerctl.c     main, options, the verb table and help
 *   ctl-bus.c          the org.membroker1 API: calls, properties, tenants
 *   ctl-view.c         status, tree and top (read-only views)
 *   ctl-stat.c         stat and events (text and JSON)
 *   ctl-openmetrics.c  stat --format=openmetrics
 *   ctl-write.c        set, revert, create, remove, reload, reclaim, reset-peak
 *   ctl-rightsize.c    rightsize (MemoryPressureTarget= and its loop)
 *   ctl-util.c         pure helpers (no sd-bus; unit-tested alone)
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-bus.h>

#include "ctl-util.h"
#include "macros.h"

enum ctl_bus_kind {
        CTL_BUS_SYSTEM,
        CTL_BUS_USER,
        CTL_BUS_ADDRESS,
};

enum ctl_format {
        CTL_FORMAT_TEXT,
        CTL_FORMAT_JSON,
        CTL_FORMAT_OPENMETRICS,
        CTL_FORMAT_PROMETHEUS,
};

struct ctl_options {
        enum ctl_bus_kind bus_kind;
        const char *address;
        enum ctl_format format;
        bool bytes;
        bool runtime;
        uint64_t iterations; /* 0: forever */
        double delay_sec;
        bool help;
        bool legend; /* column headings and summary lines (--no-legend: off) */
};

/* The options of this run (membrokerctl.c); read-only once a verb runs. */
extern struct ctl_options ctl_arg;

/* Print "membrokerctl: " and the message to stderr. */
void ctl_log_error(const char *fmt, ...) _printf_(1, 2);

/* --format=openmetrics or --format=prometheus. */
static inline bool ctl_format_is_metrics(void) {
        return ctl_arg.format == CTL_FORMAT_OPENMETRICS || ctl_arg.format == CTL_FORMAT_PROMETHEUS;
}

/* A size for a table: human ("1.5G") or, with --bytes, exact. */
static inline const char *ctl_size_str(char *buf, uint64_t v) {
        return ctl_format_bytes(buf, v, ctl_arg.bytes);
}

/*
 * The verbs.  Each takes the open bus and its arguments (argv[0] is the
 * verb; membrokerctl.c has checked their number), prints its result on
 * stdout and its errors on stderr, and returns 0 or a negative errno.
 */
int ctl_view_status(sd_bus *bus, int argc, char **argv);
int ctl_view_tree(sd_bus *bus, int argc, char **argv);
int ctl_view_top(sd_bus *bus, int argc, char **argv);
int ctl_stat_show(sd_bus *bus, int argc, char **argv);
int ctl_stat_events(sd_bus *bus, int argc, char **argv);
int ctl_pressure_show(sd_bus *bus, int argc, char **argv);
int ctl_write_set(sd_bus *bus, int argc, char **argv);
int ctl_write_revert(sd_bus *bus, int argc, char **argv);
int ctl_write_create(sd_bus *bus, int argc, char **argv);
int ctl_write_remove(sd_bus *bus, int argc, char **argv);
int ctl_write_reload(sd_bus *bus, int argc, char **argv);
int ctl_write_reclaim(sd_bus *bus, int argc, char **argv);
int ctl_write_reset_peak(sd_bus *bus, int argc, char **argv);
int ctl_rightsize_show(sd_bus *bus, int argc, char **argv);
