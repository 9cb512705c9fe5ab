/* SPDX-License-Identifier: MIT */
/*
 * scale.c - table 10, scale: 10,000 tenants and 1,000 connected clients.
 *
 *   bench-scale MEMBROKERD DIR BUS-ADDRESS BUSCTL
 *
 * Two set-ups side by side, each a fresh membrokerd on the private bus:
 *   small: 1 tenant, 100 clients;
 *   large: 10,000 tenants (100 parents of 99 leaves, MemoryMax on every
 *          leaf), 1,000 clients, each on its own leaf.
 * Measured: start-up time (spawn to READY=1), daemon RSS after start and
 * with every client connected, the time of each mb_connect() (sequential,
 * MB_CONNECT_NO_THREAD so that 1,000 clients are not 1,000 threads).  Then
 * "nothing lost": every client allocates one page and writes its number in
 * it; NClients and MemoryCurrent are read over D-Bus with busctl; every page
 * is checked; after all clients disconnect, NClients and MemoryCurrent must
 * return to 0.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "harness.h"
#include "membroker.h"

static struct bench_opts opts;
static const char *busctl, *bus_address;

struct setup {
        const char *name;
        unsigned nparents, nleaves; /* 0 parents: one tenant "solo" */
        unsigned nclients;
        /* results */
        double startup_ms[BENCH_MAX_REPS];
        unsigned nstartup;
        double startup_med, startup_min, startup_max;
        double rss_start_kb, rss_clients_kb;
        double *connect_us;
        double connect_med, connect_max, connect_total_ms;
        unsigned long bus_nclients, bus_nclients_after;
        unsigned long long bus_current, bus_current_after;
        unsigned pages_ok;
        char error[256];
};

static void die(const char *what, int r) {
        fprintf(stderr, "bench-scale: %s: %s %s\n", what, strerror(r < 0 ? -r : r), mb_last_error());
        exit(2);
}

static void write_config(const char *dir, const struct setup *s) {
        char path[8192], text[256];
        int r;

        if ((r = bench_mkdir(dir)) < 0)
                die(dir, r);
        bench_path(path, sizeof path, dir, "tenants.d");
        (void) bench_mkdir(path);
        bench_path(path, sizeof path, dir, "membroker.conf");
        if ((r = bench_write_file(path, "[Broker]\nCapacity=8G\n")) < 0)
                die(path, r);
        if (s->nparents == 0) {
                bench_path(path, sizeof path, dir, "tenants.d/solo.conf");
                if ((r = bench_write_file(path, "[Tenant]\nPath=solo\n")) < 0)
                        die(path, r);
                return;
        }
        for (unsigned p = 0; p < s->nparents; p++)
                for (unsigned l = 0; l < s->nleaves; l++) {
                        char name[64];

                        snprintf(name, sizeof name, "tenants.d/s%03u-t%03u.conf", p, l);
                        bench_path(path, sizeof path, dir, name);
                        snprintf(text, sizeof text, "[Tenant]\nPath=s%03u/t%03u\nMemoryMax=64M\n", p, l);
                        if ((r = bench_write_file(path, text)) < 0)
                                die(path, r);
                }
}

static unsigned ntenants(const struct setup *s) {
        return s->nparents ? s->nparents * (s->nleaves + 1) : 1;
}

static void tenant_of(const struct setup *s, unsigned client, char *buf, size_t size) {
        unsigned leaves = s->nparents * s->nleaves, k;

        if (s->nparents == 0) {
                snprintf(buf, size, "solo");
                return;
        }
        k = (unsigned) ((unsigned long) client * leaves / s->nclients);
        snprintf(buf, size, "s%03u/t%03u", k / s->nleaves, k % s->nleaves);
}

/* busctl get-property of the Manager: the number after the type letter */
static int bus_get(const char *prop, unsigned long long *ret) {
        char out[256], addr[4200];
        char *argv[] = { (char *) busctl, addr, (char *) "get-property", (char *) "org.membroker1",
                         (char *) "/org/membroker1", (char *) "org.membroker1.Manager", (char *) prop, NULL };
        char *sp;

        snprintf(addr, sizeof addr, "--address=%s", bus_address);
        if (bench_spawn(argv, out, sizeof out) < 0)
                return -EIO;
        sp = strchr(out, ' ');
        if (!sp)
                return -EIO;
        *ret = strtoull(sp + 1, NULL, 10);
        return 0;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static void med_min_max(double *v, unsigned n, double *med, double *min, double *max) {
        qsort(v, n, sizeof(double), cmp_double);
        *med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        *min = v[0];
        *max = v[n - 1];
}

static void run_clients(const char *membrokerd, const char *dir, struct setup *s) {
        char conf[4096], run[4096], tenant[64], name[64];
        struct bench_daemon d;
        mb_client **c = calloc(s->nclients, sizeof(mb_client *));
        uint32_t **page = calloc(s->nclients, sizeof(uint32_t *));
        unsigned long long v;
        uint64_t t_all;
        int r;

        s->connect_us = calloc(s->nclients, sizeof(double));
        if (!c || !page || !s->connect_us)
                die("calloc", -ENOMEM);
        snprintf(name, sizeof name, "conf-%s", s->name);
        bench_path(conf, sizeof conf, dir, name);
        snprintf(name, sizeof name, "run-%s-clients", s->name);
        bench_path(run, sizeof run, dir, name);
        r = bench_daemon_start(membrokerd, conf, run, bus_address, &d);
        if (r < 0)
                die("membrokerd did not start", r);
        usleep(200000);
        s->rss_start_kb = (double) bench_proc_status_kb(d.pid, "VmRSS");

        t_all = bench_now_ns();
        for (unsigned i = 0; i < s->nclients; i++) {
                uint64_t t0 = bench_now_ns();

                tenant_of(s, i, tenant, sizeof tenant);
                r = mb_connect_ex(d.sock, tenant, MB_CONNECT_NO_THREAD, &c[i]);
                if (r < 0) {
                        snprintf(s->error, sizeof s->error, "client %u of %u (tenant %s) could not connect: %s (%s)",
                                 i + 1, s->nclients, tenant, strerror(-r), mb_last_error());
                        s->nclients = i;
                        break;
                }
                s->connect_us[i] = (double) (bench_now_ns() - t0) / 1000.0;
        }
        s->connect_total_ms = (double) (bench_now_ns() - t_all) / 1e6;

        for (unsigned i = 0; i < s->nclients; i++) {
                page[i] = mb_page_alloc(c[i]);
                if (!page[i]) {
                        snprintf(s->error, sizeof s->error, "client %u: mb_page_alloc: %s", i, mb_last_error());
                        break;
                }
                page[i][0] = 0x6d620000u + i;
                page[i][1023] = ~(0x6d620000u + i);
        }
        usleep(200000);
        s->rss_clients_kb = (double) bench_proc_status_kb(d.pid, "VmRSS");
        if (bus_get("NClients", &v) == 0)
                s->bus_nclients = (unsigned long) v;
        if (bus_get("MemoryCurrent", &v) == 0)
                s->bus_current = v;
        for (unsigned i = 0; i < s->nclients; i++)
                if (page[i] && page[i][0] == 0x6d620000u + i && page[i][1023] == ~(0x6d620000u + i))
                        s->pages_ok++;
        for (unsigned i = 0; i < s->nclients; i++) {
                if (page[i])
                        mb_page_free(c[i], page[i]);
                mb_close(c[i]);
        }
        /* the daemon notices the hang-ups asynchronously */
        for (int k = 0; k < 200; k++) {
                if (bus_get("NClients", &v) == 0 && v == 0)
                        break;
                usleep(50000);
        }
        if (bus_get("NClients", &v) == 0)
                s->bus_nclients_after = (unsigned long) v;
        if (bus_get("MemoryCurrent", &v) == 0)
                s->bus_current_after = v;
        bench_daemon_stop(&d);
        if (s->nclients > 0) {
                double mn;
                double *tmp = malloc(s->nclients * sizeof(double));
                memcpy(tmp, s->connect_us, s->nclients * sizeof(double));
                med_min_max(tmp, s->nclients, &s->connect_med, &mn, &s->connect_max);
                free(tmp);
        }
        free(c);
        free(page);
}

static void cells(const char *what, double a, double b, const char *unit) {
        char x[64], y[64], r[64], t[64];

        snprintf(x, sizeof x, "%s %s", bench_fmt(t, sizeof t, a), unit);
        snprintf(y, sizeof y, "%s %s", bench_fmt(t, sizeof t, b), unit);
        bench_table_cells(what, x, y, a > 0 ? bench_fmt_ratio(r, sizeof r, b / a) : "—", NULL);
}

int main(int argc, char **argv) {
        const char *membrokerd, *dir;
        struct setup s[2];
        char conf[4096], run[4096], name[64], b[4][64];
        uint64_t nofile;

        if (argc != 5) {
                fprintf(stderr, "usage: bench-scale MEMBROKERD DIR BUS-ADDRESS BUSCTL\n");
                return 2;
        }
        membrokerd = argv[1];
        dir = argv[2];
        bus_address = argv[3];
        busctl = argv[4];
        bench_opts_init(&opts);
        (void) bench_mkdir(dir);
        /* the daemon inherits it: 10,000 arenas and 1,000 connections */
        nofile = bench_raise_nofile(1u << 20);

        s[0] = (struct setup) { .name = "small", .nparents = 0, .nclients = (unsigned) bench_count(&opts, 100, 10) };
        s[1] = (struct setup) { .name = "large", .nparents = (unsigned) bench_count(&opts, 100, 5), .nleaves = 99,
                                .nclients = (unsigned) bench_count(&opts, 1000, 20) };
        for (int k = 0; k < 2; k++) {
                snprintf(name, sizeof name, "conf-%s", s[k].name);
                bench_path(conf, sizeof conf, dir, name);
                write_config(conf, &s[k]);
        }

        /* start-up, interleaved; the first start of each is a warm-up */
        for (unsigned rep = 0; rep <= (opts.quick ? 1 : 5); rep++)
                for (int k = 0; k < 2; k++) {
                        struct bench_daemon d;
                        int r;

                        snprintf(name, sizeof name, "conf-%s", s[k].name);
                        bench_path(conf, sizeof conf, dir, name);
                        snprintf(name, sizeof name, "run-%s-%u", s[k].name, rep);
                        bench_path(run, sizeof run, dir, name);
                        r = bench_daemon_start(membrokerd, conf, run, bus_address, &d);
                        if (r < 0)
                                die("membrokerd did not start", r);
                        bench_daemon_stop(&d);
                        if (rep > 0)
                                s[k].startup_ms[s[k].nstartup++] = d.startup_ns / 1e6;
                }
        for (int k = 0; k < 2; k++) {
                med_min_max(s[k].startup_ms, s[k].nstartup, &s[k].startup_med, &s[k].startup_min, &s[k].startup_max);
                run_clients(membrokerd, dir, &s[k]);
        }

        bench_table_begin("Table 10: scale",
                          "A fresh membrokerd on the private bus, twice: 1 tenant with 100 clients, and "
                          "10,000 tenants (100 parents of 99 leaves, MemoryMax on every leaf) with 1,000 "
                          "clients, each client on its own leaf; clients connect one after another "
                          "(MB_CONNECT_NO_THREAD) from one process, then each allocates one page and writes "
                          "its number into it.");
        printf("RLIMIT_NOFILE raised to %llu (the daemon inherits it).\n\n", (unsigned long long) nofile);
        {
                char h0[96], h1[96];
                snprintf(h0, sizeof h0, "%u tenant, %u clients", ntenants(&s[0]), s[0].nclients);
                snprintf(h1, sizeof h1, "%u tenants, %u clients", ntenants(&s[1]), s[1].nclients);
                bench_table_columns("measure", h0, h1, "ratio of the large set-up to the small one", NULL);
        }
        {
                char x[64], y[64], r[64];
                snprintf(x, sizeof x, "%s ms (%s–%s)", bench_fmt(b[0], sizeof b[0], s[0].startup_med),
                         bench_fmt(b[1], sizeof b[1], s[0].startup_min), bench_fmt(b[2], sizeof b[2], s[0].startup_max));
                snprintf(y, sizeof y, "%s ms (%s–%s)", bench_fmt(b[0], sizeof b[0], s[1].startup_med),
                         bench_fmt(b[1], sizeof b[1], s[1].startup_min), bench_fmt(b[2], sizeof b[2], s[1].startup_max));
                bench_table_cells("start-up, spawn to READY=1 (median, min–max)", x, y,
                                  bench_fmt_ratio(r, sizeof r, s[1].startup_med / s[0].startup_med), NULL);
        }
        cells("daemon VmRSS after start-up", s[0].rss_start_kb / 1024, s[1].rss_start_kb / 1024, "MiB");
        cells("daemon VmRSS, all clients connected", s[0].rss_clients_kb / 1024, s[1].rss_clients_kb / 1024, "MiB");
        cells("daemon RSS per connected client", (s[0].rss_clients_kb - s[0].rss_start_kb) / s[0].nclients,
              (s[1].rss_clients_kb - s[1].rss_start_kb) / (s[1].nclients ? s[1].nclients : 1), "KiB");
        cells("mb_connect(), median", s[0].connect_med, s[1].connect_med, "µs");
        cells("mb_connect(), slowest", s[0].connect_max, s[1].connect_max, "µs");
        cells("all connects, one after another", s[0].connect_total_ms, s[1].connect_total_ms, "ms");
        for (int k = 0; k < 2; k++)
                snprintf(b[k], sizeof b[k], "%lu", s[k].bus_nclients);
        bench_table_cells("NClients over D-Bus, all connected", b[0], b[1], "—", NULL);
        for (int k = 0; k < 2; k++)
                snprintf(b[k], sizeof b[k], "%u of %u", s[k].pages_ok, s[k].nclients);
        bench_table_cells("pages intact (client's number in it)", b[0], b[1], "—", NULL);
        for (int k = 0; k < 2; k++)
                snprintf(b[k], sizeof b[k], "%lu / %llu B", s[k].bus_nclients_after, s[k].bus_current_after);
        bench_table_cells("NClients / MemoryCurrent after all left", b[0], b[1], "—", NULL);
        putchar('\n');
        for (int k = 0; k < 2; k++)
                if (s[k].error[0])
                        printf("- %s set-up: %s\n", s[k].name, s[k].error);
        {
                unsigned want = opts.quick ? s[1].nclients : 1000;
                bool ok = !s[1].error[0] && s[1].nclients == want && s[1].bus_nclients == want &&
                          s[1].pages_ok == want && s[1].bus_nclients_after == 0 && s[1].bus_current_after == 0;

                bench_target(ok, "1,000 connected clients, 10,000 tenants, nothing lost",
                             "%u clients connected, NClients %lu, %u pages intact, after disconnect NClients %lu "
                             "and MemoryCurrent %llu",
                             s[1].nclients, s[1].bus_nclients, s[1].pages_ok, s[1].bus_nclients_after,
                             s[1].bus_current_after);
        }
        return bench_finish();
}
