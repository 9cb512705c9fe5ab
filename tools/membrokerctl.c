/* SPDX-License-Identifier: MIT */
/*
 * membrokerctl - command-line front end of membrokerd over D-Bus, in the
 * manner of oomctl, systemd-cgls and systemd-cgtop.  Every figure comes from
 * the org.membroker1 API; nothing here knows the daemon's
 * internals.  This file holds main, the options, the verb table and the
 * help; ctl.h lists the other parts.
 *
 *   membrokerctl [--system|--user|--address ADDRESS] [--json] [--bytes] VERB ...
 *
 * Exit status: 0 on success, 1 when the daemon or the bus refused or failed
 * (the D-Bus error message is printed), 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-bus.h"
#include "ctl.h"

#define EXIT_USAGE 2
#define TOP_DEFAULT_DELAY_SEC 1.0

struct ctl_options ctl_arg = {
        .bus_kind = CTL_BUS_SYSTEM,
        .format = CTL_FORMAT_TEXT,
        .delay_sec = TOP_DEFAULT_DELAY_SEC,
        .legend = true,
};

static const char *program = "membrokerctl";

void ctl_log_error(const char *fmt, ...) {
        va_list ap;

        fprintf(stderr, "%s: ", program);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/* ---- verbs and help ---- */

struct verb {
        const char *name;
        int min_args, max_args; /* including the verb; -1: no maximum */
        int (*run)(sd_bus *bus, int argc, char **argv);
        const char *usage;
        const char *summary;
        const char *help;
};

static const struct verb verbs[] = {
        { "status", 1, 1, ctl_view_status, "status",
          "Show the broker's capacity, usage and counters",
          "Show the broker: capacity, usage, page size, charge batch, tenants, clients and how much\n"
          "work the statistics flush did (StatsFlushes, StatsFlushedNodes).\n"
          "Options: --json, --bytes." },
        { "tree", 1, 2, ctl_view_tree, "tree [PATH]",
          "Show the tenant hierarchy with usage and limits",
          "Show the tenant hierarchy below PATH (default: the root) like systemd-cgls, with usage,\n"
          "peak and limits of each tenant and its number of clients.  'max' means no limit.\n"
          "Options: --json (a list of tenants with their D-Bus properties), --bytes." },
        { "stat", 1, -1, ctl_stat_show, "stat [PATH...]",
          "Show memory.stat of tenants (text, JSON, OpenMetrics)",
          "Show memory.stat of the tenants given (default: every tenant).  Byte values are\n"
          "hierarchical (the tenant and its descendants); *_local keys cover the tenant alone.\n"
          "Reading flushes the lazily kept statistics of that subtree when enough updates are\n"
          "pending; otherwise the figures are at most StatsFlushIntervalSec= old.\n"
          "Options: --bytes (exact numbers, the daemon's GetStatText), --json,\n"
          "         --format=openmetrics (usage, limits, memory.stat and memory.events of every\n"
          "         tenant given, as OpenMetrics text),\n"
          "         --format=prometheus (the same in the Prometheus text format, for node_exporter's\n"
          "         textfile collector: membrokerctl stat --format=prometheus > DIR/membroker.prom)." },
        { "events", 2, 2, ctl_stat_events, "events PATH",
          "Show memory.events of a tenant",
          "Show memory.events of PATH: how often protection was breached (low), the tenant was\n"
          "throttled (high), a charge hit a hard limit (max), a charge failed (oom, oom_kill)\n"
          "and a client backed arena pages it did not hold (overrun), OOMGroup= killed a whole\n"
          "tenant (oom_group_kill);\n"
          "SUBTREE counts the tenant and its descendants, LOCAL the tenant alone.\n"
          "Options: --json." },
        { "pressure", 2, 3, ctl_pressure_show, "pressure PATH [TRIGGER]",
          "Show memory.pressure of a tenant, or wait for its trigger",
          "Show PATH's memory.pressure in the kernel's layout: \"some\" and \"full\" lines with\n"
          "avg10, avg60, avg300 (percent of time stalled) and total (microseconds).\n"
          "With TRIGGER (\"some|full THRESHOLD_USEC WINDOW_USEC\", the kernel's PSI trigger, a\n"
          "window of 500000..10000000), print a line each time the stall within the window\n"
          "reaches the threshold (at most once per window), until interrupted or, with -n N,\n"
          "after N events." },
        { "set", 3, -1, ctl_write_set, "set PATH Key=Value...",
          "Change limits (MemoryMax=1G ...)",
          "Change limits of PATH at once: MemoryMax=, MemoryHigh=, MemoryLow=, MemoryMin= take bytes\n"
          "with K/M/G/T (powers of 1024), N% of the capacity, or 'infinity'; ChargeBatch= takes pages;\n"
          "\"MemoryPressureTarget=some avg10 0.1%\" (or =no) sets the right-sizing target.\n"
          "Without --runtime the change is persisted in the state directory and survives restarts;\n"
          "with --runtime it lasts until the daemon stops.  An empty value (MemoryMax=) resets the\n"
          "key in that layer, so that what the configuration files say applies again.\n"
          "Needs uid 0, or a Delegate= above PATH naming the caller.\n"
          "Options: --runtime." },
        { "revert", 2, -1, ctl_write_revert, "revert PATH [KEY...]",
          "Undo set: back to the configuration files",
          "Drop what set did to the keys given of PATH (default: every key), persisted and runtime\n"
          "alike, as 'systemctl revert' does: the limits the configuration files give (or, for a\n"
          "tenant made with create, no limit) apply again.  Needs uid 0, or a Delegate= above PATH\n"
          "naming the caller." },
        { "reclaim", 3, 3, ctl_write_reclaim, "reclaim PATH SIZE",
          "Reclaim memory from a subtree",
          "Ask the clients of PATH's subtree to give back SIZE bytes (K/M/G/T), like writing to\n"
          "memory.reclaim, and print how much was reclaimed.  Needs uid 0, or a Delegate= above PATH\n"
          "naming the caller.\n"
          "Options: --json, --bytes." },
        { "reset-peak", 2, 2, ctl_write_reset_peak, "reset-peak PATH",
          "Reset MemoryPeak to the current usage",
          "Start PATH's MemoryPeak over from its current usage, like writing to memory.peak.\n"
          "Needs uid 0, or a Delegate= above PATH naming the caller." },
        { "rightsize", 1, -1, ctl_rightsize_show, "rightsize [PATH...]",
          "Show the right-sizing of tenants (MemoryPressureTarget=)",
          "Show MemoryPressureTarget= of the tenants given (default: every tenant that sets one) and\n"
          "the state of the loop that sizes each to its working set: probing (reclaiming steps while\n"
          "the pressure stays below the target), backoff (above it), idle (nothing to reclaim), stopped\n"
          "(its clients did not answer; set the target again to restart) or off; the usage, the\n"
          "working set estimate, the last step, the limit the loop keeps and what it reclaimed.\n"
          "Options: --json, --bytes, --no-legend." },
        { "top", 1, 1, ctl_view_top, "top",
          "Show tenants ordered by usage, refreshing",
          "Show tenants ordered by usage, refreshed every -d SEC seconds, like systemd-cgtop.\n"
          "Allocation and free rates are pages per second between two refreshes.  On a terminal\n"
          "the screen is redrawn; otherwise each refresh is printed after the previous one.\n"
          "Options: -n/--iterations=N (stop after N refreshes; default: until interrupted),\n"
          "         -d/--delay=SEC (default 1), --json (one JSON object per refresh), --bytes." },
        { "create", 2, -1, ctl_write_create, "create PATH [Key=Value...]",
          "Create a tenant at run time",
          "Create a tenant (and missing parents) at run time, with the limits given (as for set).\n"
          "Needs uid 0, or a Delegate= above PATH naming the caller." },
        { "remove", 2, 2, ctl_write_remove, "remove PATH",
          "Remove an idle leaf tenant",
          "Remove a tenant that has no clients and no children.  Needs uid 0, or a Delegate= above\n"
          "PATH naming the caller." },
        { "reload", 1, 1, ctl_write_reload, "reload",
          "Re-read the configuration",
          "Re-read the configuration files, as SIGHUP does; on an error the running configuration\n"
          "is kept and the error (file:line) is printed.  Needs uid 0." },
};

static const struct verb *find_verb(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (strcmp(verbs[i].name, name) == 0)
                        return &verbs[i];
        return NULL;
}

static void help_common(void) {
        printf("\nBus options:\n"
               "     --system          Talk to membrokerd on the system bus (default)\n"
               "     --user            Talk to membrokerd on the user bus\n"
               "     --address=ADDRESS Talk to membrokerd on the bus at ADDRESS\n"
               "\nOutput options:\n"
               "     --json            Output JSON (status, tree, stat, events, reclaim, top)\n"
               "     --format=FORMAT   text (default), json, openmetrics or prometheus (stat only)\n"
               "     --bytes           Exact byte counts instead of human sizes\n"
               "     --no-legend       No column headings or summary lines (tree, top, events)\n"
               "     --no-pager        Accepted as systemctl does; the output is never paged\n"
               "  -h --help            Show this help, or the help of VERB\n"
               "     --version         Show the version\n");
}

static void help_main(void) {
        printf("%s [OPTIONS...] VERB [ARGS...]\n\n"
               "Inspect and control membrokerd, the userspace memory broker, over D-Bus.\n\n"
               "Verbs:\n",
               program);
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                printf("  %-28s %s\n", verbs[i].usage, verbs[i].summary);
        printf("  %-28s %s\n", "help [VERB]", "Show this help, or the help of VERB");
        help_common();
        printf("\nVerb options:\n"
               "     --runtime         set: the change lasts until the daemon stops (not persisted)\n"
               "  -n --iterations=N   top: refresh N times, then exit; pressure: stop after N events\n"
               "  -d --delay=SEC      top: seconds between refreshes\n");
        printf("\nSizes are shown in powers of 1024 (K, M, G, T); 'max' means no limit.\n"
               "Exit status: 0 on success, 1 when the daemon refused or failed, 2 on a usage error.\n"
               "See '%s help VERB' or '%s VERB --help' for each verb.\n",
               program, program);
}

static void help_verb(const struct verb *v) {
        printf("%s [OPTIONS...] %s\n\n%s\n", program, v->usage, v->help);
        help_common();
}

static int parse_argv(int argc, char **argv) {
        enum {
                ARG_SYSTEM = 0x100,
                ARG_USER,
                ARG_ADDRESS,
                ARG_JSON,
                ARG_FORMAT,
                ARG_BYTES,
                ARG_RUNTIME,
                ARG_VERSION,
                ARG_NO_PAGER,
                ARG_NO_LEGEND,
        };
        static const struct option options[] = {
                { "no-pager", no_argument, NULL, ARG_NO_PAGER },
                { "no-legend", no_argument, NULL, ARG_NO_LEGEND },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "system", no_argument, NULL, ARG_SYSTEM },
                { "user", no_argument, NULL, ARG_USER },
                { "address", required_argument, NULL, ARG_ADDRESS },
                { "json", no_argument, NULL, ARG_JSON },
                { "format", required_argument, NULL, ARG_FORMAT },
                { "bytes", no_argument, NULL, ARG_BYTES },
                { "runtime", no_argument, NULL, ARG_RUNTIME },
                { "iterations", required_argument, NULL, 'n' },
                { "delay", required_argument, NULL, 'd' },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "hn:d:", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        ctl_arg.help = true;
                        break;
                case ARG_VERSION:
                        printf("membrokerctl %s\n", PACKAGE_VERSION);
                        return 0;
                case ARG_SYSTEM:
                        ctl_arg.bus_kind = CTL_BUS_SYSTEM;
                        break;
                case ARG_USER:
                        ctl_arg.bus_kind = CTL_BUS_USER;
                        break;
                case ARG_ADDRESS:
                        ctl_arg.bus_kind = CTL_BUS_ADDRESS;
                        ctl_arg.address = optarg;
                        break;
                case ARG_JSON:
                        ctl_arg.format = CTL_FORMAT_JSON;
                        break;
                case ARG_FORMAT:
                        if (strcmp(optarg, "text") == 0)
                                ctl_arg.format = CTL_FORMAT_TEXT;
                        else if (strcmp(optarg, "json") == 0)
                                ctl_arg.format = CTL_FORMAT_JSON;
                        else if (strcmp(optarg, "openmetrics") == 0)
                                ctl_arg.format = CTL_FORMAT_OPENMETRICS;
                        else if (strcmp(optarg, "prometheus") == 0)
                                ctl_arg.format = CTL_FORMAT_PROMETHEUS;
                        else {
                                ctl_log_error("unknown format '%s' (text, json, openmetrics, prometheus)", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_BYTES:
                        ctl_arg.bytes = true;
                        break;
                case ARG_NO_PAGER:
                        /* As systemctl's: membrokerctl never pages, so there
                         * is nothing to turn off (scripts may pass it). */
                        break;
                case ARG_NO_LEGEND:
                        ctl_arg.legend = false;
                        break;
                case ARG_RUNTIME:
                        ctl_arg.runtime = true;
                        break;
                case 'n':
                        if (ctl_parse_u64(optarg, &ctl_arg.iterations) < 0 || ctl_arg.iterations == 0) {
                                ctl_log_error("invalid iteration count '%s'", optarg);
                                return -EINVAL;
                        }
                        break;
                case 'd': {
                        char *end;
                        errno = 0;
                        ctl_arg.delay_sec = strtod(optarg, &end);
                        if (errno || *end || !(ctl_arg.delay_sec > 0) || ctl_arg.delay_sec > 86400) {
                                ctl_log_error("invalid delay '%s' (seconds)", optarg);
                                return -EINVAL;
                        }
                        break;
                }
                default:
                        return -EINVAL;
                }
        }
        return 1;
}

int main(int argc, char **argv) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        const struct verb *v;
        int r, nargs;
        char **args;

        setlocale(LC_ALL, "");
        r = parse_argv(argc, argv);
        if (r < 0) {
                fprintf(stderr, "Try '%s --help'.\n", program);
                return EXIT_USAGE;
        }
        if (r == 0)
                return EXIT_SUCCESS;

        args = argv + optind;
        nargs = argc - optind;
        if (nargs == 0) {
                if (ctl_arg.help) {
                        help_main();
                        return EXIT_SUCCESS;
                }
                ctl_log_error("a verb is needed (status, tree, stat, events, set, reclaim, top, ...)");
                fprintf(stderr, "Try '%s --help'.\n", program);
                return EXIT_USAGE;
        }
        if (strcmp(args[0], "help") == 0) {
                if (nargs == 1) {
                        help_main();
                        return EXIT_SUCCESS;
                }
                v = find_verb(args[1]);
                if (!v) {
                        ctl_log_error("unknown verb '%s'", args[1]);
                        return EXIT_USAGE;
                }
                help_verb(v);
                return EXIT_SUCCESS;
        }
        v = find_verb(args[0]);
        if (!v) {
                ctl_log_error("unknown verb '%s'", args[0]);
                fprintf(stderr, "Try '%s --help'.\n", program);
                return EXIT_USAGE;
        }
        if (ctl_arg.help) {
                help_verb(v);
                return EXIT_SUCCESS;
        }
        if (nargs < v->min_args || (v->max_args >= 0 && nargs > v->max_args)) {
                ctl_log_error("%s", nargs < v->min_args ? "too few arguments" : "too many arguments");
                fprintf(stderr, "Usage: %s %s\n", program, v->usage);
                return EXIT_USAGE;
        }
        if (ctl_format_is_metrics() && v->run != ctl_stat_show) {
                ctl_log_error("--format=%s is only for stat",
                              ctl_arg.format == CTL_FORMAT_PROMETHEUS ? "prometheus" : "openmetrics");
                return EXIT_USAGE;
        }
        if (ctl_arg.bus_kind == CTL_BUS_ADDRESS && (!ctl_arg.address || !*ctl_arg.address)) {
                ctl_log_error("--address needs a bus address");
                return EXIT_USAGE;
        }

        r = ctl_bus_open(&bus);
        if (r < 0)
                return EXIT_FAILURE;
        r = v->run(bus, nargs, args);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
