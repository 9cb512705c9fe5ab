/* SPDX-License-Identifier: MIT */
/*
 * rightsize.c - bench-rightsize: table 14, right-sizing over time.
 *
 *   bench-rightsize BUS_ADDRESS TENANT HOT_BYTES COLD_BYTES SECONDS TARGET
 *
 * A tenant with MemoryPressureTarget=TARGET holds one client
 * (tests/rightsize-client, started by bench/mb-bench.sh) with a hot set of
 * HOT_BYTES it touches all the time and a cold cache of COLD_BYTES.  Every
 * second for SECONDS the tenant's usage, the loop's limit, its working set
 * estimate and state, and the tenant's memory pressure (some avg10, and
 * the pressure of the loop's last interval) are read over the bus and
 * printed as one row: how the usage converges to the working set, with the
 * pressure beside it.  Then the figures that answer the question: how long
 * until the usage is within 2x of the hot set, where it settles, and what
 * the pressure was meanwhile.  The run's cross-CPU round trip is printed
 * with it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-bus.h>

#include "harness.h"

#define SAMPLE_INTERVAL_NSEC 1000000000L
#define MIB_BYTES (1024.0 * 1024.0)

struct sample {
        double t_sec;
        uint64_t current, high, wse;
        uint32_t avg10;       /* hundredths of a percent */
        uint32_t interval_ppm;
        uint64_t stall_usec;  /* PressureSomeTotalUSec, UINT64_MAX without */
        char state[16];
};

static int get_u64(sd_bus *bus, const char *obj, const char *name, uint64_t *ret) {
        return sd_bus_get_property_trivial(bus, "org.membroker1", obj, "org.membroker1.Tenant", name, NULL, 't', ret);
}

static int get_u32(sd_bus *bus, const char *obj, const char *name, uint32_t *ret) {
        return sd_bus_get_property_trivial(bus, "org.membroker1", obj, "org.membroker1.Tenant", name, NULL, 'u', ret);
}

static int take(sd_bus *bus, const char *obj, double t, struct sample *s) {
        char *state = NULL;
        int r;

        s->t_sec = t;
        r = get_u64(bus, obj, "MemoryCurrent", &s->current);
        if (r >= 0)
                r = get_u64(bus, obj, "RightSizeHigh", &s->high);
        if (r >= 0)
                r = get_u64(bus, obj, "MemoryWorkingSetEstimate", &s->wse);
        if (r >= 0)
                r = get_u32(bus, obj, "RightSizePressure", &s->interval_ppm);
        if (r >= 0 && get_u32(bus, obj, "PressureSomeAvg10", &s->avg10) < 0)
                s->avg10 = UINT32_MAX; /* a daemon without memory.pressure on the bus */
        if (r >= 0 && get_u64(bus, obj, "PressureSomeTotalUSec", &s->stall_usec) < 0)
                s->stall_usec = UINT64_MAX;
        if (r >= 0)
                r = sd_bus_get_property_string(bus, "org.membroker1", obj, "org.membroker1.Tenant", "RightSizeState",
                                               NULL, &state);
        if (r < 0)
                return r;
        snprintf(s->state, sizeof(s->state), "%s", state);
        free(state);
        return 0;
}

static void fmt_mib(char *buf, size_t size, uint64_t bytes) {
        if (bytes == UINT64_MAX)
                snprintf(buf, size, "none");
        else
                snprintf(buf, size, "%.2f", (double) bytes / MIB_BYTES);
}

int main(int argc, char **argv) {
        sd_bus *bus = NULL;
        sd_bus_message *reply = NULL;
        struct sample *v;
        const char *obj_c;
        char *obj = NULL;
        uint64_t hot, cold, t0;
        unsigned seconds, n = 0;
        double within2 = -1, pressure_sum = 0;
        const struct sample *conv = NULL;
        unsigned pressure_n = 0, below = 0;
        int r;

        if (argc != 7) {
                fprintf(stderr, "usage: bench-rightsize BUS_ADDRESS TENANT HOT_BYTES COLD_BYTES SECONDS TARGET\n");
                return 2;
        }
        hot = strtoull(argv[3], NULL, 10);
        cold = strtoull(argv[4], NULL, 10);
        seconds = (unsigned) strtoul(argv[5], NULL, 10);
        v = calloc(seconds + 1, sizeof(*v));
        if (!v)
                return 2;
        r = sd_bus_new(&bus);
        if (r >= 0)
                r = sd_bus_set_address(bus, argv[1]);
        if (r >= 0)
                r = sd_bus_set_bus_client(bus, 1);
        if (r >= 0)
                r = sd_bus_start(bus);
        if (r >= 0)
                r = sd_bus_call_method(bus, "org.membroker1", "/org/membroker1", "org.membroker1.Manager", "GetTenant",
                                       NULL, &reply, "s", argv[2]);
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &obj_c);
        if (r >= 0 && !(obj = strdup(obj_c)))
                r = -ENOMEM;
        sd_bus_message_unref(reply);
        if (r < 0) {
                fprintf(stderr, "bench-rightsize: cannot reach tenant %s on %s: %s\n", argv[2], argv[1], strerror(-r));
                return 1;
        }

        printf("\n## Table 14: right-sizing (MemoryPressureTarget=)\n\n");
        printf("Question: does a tenant whose cache is far larger than what it uses shrink to its working set, "
               "and at what cost in pressure? One client (tests/rightsize-client) touches a hot set of %.1f MiB "
               "all the time and keeps a cold cache of %.1f MiB behind its shrinker; a hot page given back is "
               "allocated again at once (the refault that stalls when the tenant is at the loop's limit). "
               "MemoryPressureTarget=%s. Sampled every second over the bus: usage, the loop's limit "
               "(RightSizeHigh), MemoryWorkingSetEstimate (MiB), the state, memory.pressure some avg10, and the "
               "pressure the loop compared with the target at its last tick (RightSizePressure: the stall of its "
               "last interval or avg10, whichever is higher) (%%).\n\n",
               (double) hot / MIB_BYTES, (double) cold / MIB_BYTES, argv[6]);
        bench_note_round_trip();
        printf("\n| t (s) | usage (MiB) | limit (MiB) | working set est. (MiB) | state | some avg10 (%%) | "
               "loop's pressure (%%) |\n");
        printf("| --- | ---: | ---: | ---: | --- | ---: | ---: |\n");

        t0 = bench_now_ns();
        for (unsigned i = 0; i <= seconds; i++) {
                struct sample *s = &v[n];
                uint64_t due = t0 + (uint64_t) i * SAMPLE_INTERVAL_NSEC, now = bench_now_ns();
                char b1[32], b2[32], b3[32], avg[32];

                if (due > now) {
                        struct timespec ts = { .tv_sec = (time_t) ((due - now) / 1000000000ULL),
                                               .tv_nsec = (long) ((due - now) % 1000000000ULL) };
                        nanosleep(&ts, NULL);
                }
                r = take(bus, obj, (double) (bench_now_ns() - t0) / 1e9, s);
                if (r < 0) {
                        fprintf(stderr, "bench-rightsize: cannot read tenant %s: %s\n", argv[2], strerror(-r));
                        break;
                }
                n++;
                if (within2 < 0 && s->current <= 2 * hot) {
                        within2 = s->t_sec;
                        conv = s;
                }
                if (within2 >= 0) {
                        pressure_sum += s->interval_ppm / 10000.0;
                        pressure_n++;
                        if (s->current < hot)
                                below++;
                }
                fmt_mib(b1, sizeof(b1), s->current);
                fmt_mib(b2, sizeof(b2), s->high);
                fmt_mib(b3, sizeof(b3), s->wse);
                if (s->avg10 == UINT32_MAX)
                        snprintf(avg, sizeof(avg), "—");
                else
                        snprintf(avg, sizeof(avg), "%.2f", s->avg10 / 100.0);
                printf("| %.0f | %s | %s | %s | %s | %s | %.2f |\n", s->t_sec, b1, b2, b3, s->state, avg,
                       s->interval_ppm / 10000.0);
                fflush(stdout);
        }
        printf("\n");
        if (n > 0) {
                const struct sample *last = &v[n - 1];

                if (within2 >= 0) {
                        char stall[96] = "";

                        if (conv->stall_usec != UINT64_MAX && last->stall_usec != UINT64_MAX &&
                            last->t_sec > conv->t_sec)
                                snprintf(stall, sizeof(stall), ", a client was stalled %.3f%% of the time (some total)",
                                         (double) (last->stall_usec - conv->stall_usec) / 1e4 /
                                                 (last->t_sec - conv->t_sec));
                        bench_note("Within 2x of the hot set after %.0f s; from then on%s, the loop's pressure "
                                   "averaged %.3f%% and the usage was below the hot set in %u of %u samples.",
                                   within2, stall, pressure_n ? pressure_sum / pressure_n : 0.0, below, pressure_n);
                }
                else
                        bench_note("Not within 2x of the hot set within %u s.", seconds);
                bench_note("At the end: usage %.2f MiB = %.2fx the hot set, working set estimate %.2f MiB "
                           "(%.2fx), state %s.",
                           (double) last->current / MIB_BYTES, (double) last->current / (double) hot,
                           (double) last->wse / MIB_BYTES, (double) last->wse / (double) hot, last->state);
        }
        free(obj);
        free(v);
        sd_bus_flush_close_unref(bus);
        return n > 0 ? 0 : 1;
}
