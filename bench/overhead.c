/* SPDX-License-Identifier: MIT */
/*
 * overhead.c - table 8, memory overhead: metadata bytes per page in the
 * daemon and in the client, and per slab object by size class.
 *
 *   bench-overhead MEMBROKERD DIR
 *
 * Metadata is measured from RSS deltas over a large arena, never computed
 * from struct sizes:
 *  - daemon, per held page: RssAnon + RssShmem of membrokerd (it never maps
 *    the arenas, so all of it is metadata, some of which lives in memfds)
 *    before and after one client allocated and touched N pages;
 *  - daemon, per arena page: the same with one connected client, the daemon
 *    started once with a small and once with a large Capacity;
 *  - client, per held page: the client's own RssAnon (the pages are shared
 *    memory, RssShmem, so they do not count) before and after;
 *  - the client's page tables (VmPTE) are kernel memory, not broker
 *    metadata, and shown apart;
 *  - slab: for each size class, K objects allocated: (slab pages the cache
 *    holds × page size + the client's growth outside the pages) / K − object
 *    size, where the growth is the larger of RssAnon's and of malloc's
 *    in-use bytes (RssAnon alone misses metadata put in memory that malloc
 *    had already faulted in).
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "harness.h"
#include "macros.h"
#include "membroker.h"

#define TARGET_BYTES_PER_PAGE 8.0

static struct bench_opts opts;

static void die(const char *what, int r) {
        fprintf(stderr, "bench-overhead: %s: %s %s\n", what, strerror(r < 0 ? -r : r), mb_last_error());
        exit(2);
}

static void write_config(const char *dir, const char *capacity) {
        char path[8192], text[256];
        int r;

        r = bench_mkdir(dir);
        if (r < 0)
                die(dir, r);
        bench_path(path, sizeof path, dir, "tenants.d");
        (void) bench_mkdir(path);
        bench_path(path, sizeof path, dir, "membroker.conf");
        snprintf(text, sizeof text, "[Broker]\nCapacity=%s\n", capacity);
        if ((r = bench_write_file(path, text)) < 0)
                die(path, r);
        bench_path(path, sizeof path, dir, "tenants.d/big.conf");
        if ((r = bench_write_file(path, "[Tenant]\nPath=big\n")) < 0)
                die(path, r);
}

static int64_t kb(int pid, const char *field) {
        int64_t v = bench_proc_status_kb(pid, field);
        if (v < 0)
                die(field, (int) v);
        return v;
}

/* The daemon's own memory: anonymous plus shared (its metadata may live in
 * memfds, e.g. to survive a restart through the fd store; it never maps
 * the arenas, and the clients' stats regions it maps do not grow with the
 * pages held). */
static int64_t daemon_kb(int pid) {
        return kb(pid, "RssAnon") + kb(pid, "RssShmem");
}

/* Bytes malloc() has handed out and not taken back (heap and mmapped). */
static double malloc_in_use(void) {
        struct mallinfo2 mi = mallinfo2();
        return (double) mi.uordblks + (double) mi.hblkhd;
}

static void row(const char *what, const char *value, double per_page, bool target) {
        char b[64], r[64];

        if (per_page < 0) {
                bench_table_cells(what, value, "—", "—", NULL);
                return;
        }
        bench_fmt(b, sizeof b, per_page);
        if (target)
                bench_fmt_ratio(r, sizeof r, per_page / TARGET_BYTES_PER_PAGE);
        else
                snprintf(r, sizeof r, "(not broker metadata)");
        bench_table_cells(what, value, b, r, NULL);
}

static void slab_table(mb_client *c) {
        static const size_t sizes[] = { 8, 16, 32, 64, 96, 128, 192, 256, 512, 1024, 2048 };
        size_t budget = bench_count(&opts, 16u << 20, 2u << 20); /* bytes of objects per class */
        mb_cache *warm;
        double one_time;

        /* the first cache of a client sets up per-client state: measured
         * apart, and kept alive so that it does not count per object */
        {
                double m0 = malloc_in_use(), m1;
                int64_t a0 = kb(0, "RssAnon"), a1;
                void *o;

                warm = mb_cache_create(c, "bench-warm", 8, 0, 0, NULL);
                if (!warm)
                        die("mb_cache_create", -errno);
                o = mb_cache_alloc(warm);
                if (!o)
                        die("mb_cache_alloc", -errno);
                mb_cache_free(warm, o);
                m1 = malloc_in_use();
                a1 = kb(0, "RssAnon");
                one_time = (double) (a1 - a0) * 1024.0;
                if (m1 - m0 > one_time)
                        one_time = m1 - m0;
        }

        bench_table_begin("Table 8b: slab overhead per object",
                          "K objects of one size class allocated (and their first byte written) from an "
                          "mb_cache (no debug flags); bytes per object = (slab pages the cache holds "
                          "(mb_cache_stats) × page size + what the client grew outside the pages: the larger "
                          "of its RssAnon growth and of malloc's in-use bytes growth (mallinfo2), i.e. slab "
                          "descriptors and tables) / K. The library's own figure is "
                          "mb_cache_stats().overhead_bytes_per_object.");
        bench_table_columns("object size", "K objects", "slab pages", "bytes per object",
                            "library's own overhead figure", "measured overhead per object",
                            "overhead ratio to the object size", NULL);
        for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
                size_t size = sizes[i], k = budget / size;
                void **obj = calloc(k, sizeof(void *));
                char name[32], c1[32], c2[32], c3[32], c4[32], c5[32], c6[32], c7[32];
                struct mb_cache_stats st;
                double m0, m1, off_page;
                int64_t a0, a1;
                size_t pages;
                mb_cache *cache;
                double per, over;

                if (!obj)
                        die("calloc", -ENOMEM);
                memset(obj, 0xff, k * sizeof(void *)); /* fault the array in before measuring (not 0: calloc+memset 0 is folded away) */
                snprintf(name, sizeof name, "bench-%zu", size);
                cache = mb_cache_create(c, name, size, 0, 0, NULL);
                if (!cache)
                        die("mb_cache_create", -errno);
                a0 = kb(0, "RssAnon");
                m0 = malloc_in_use();
                for (size_t j = 0; j < k; j++) {
                        obj[j] = mb_cache_alloc(cache);
                        if (!obj[j])
                                die("mb_cache_alloc", -errno);
                        *(volatile char *) obj[j] = 1;
                }
                a1 = kb(0, "RssAnon");
                m1 = malloc_in_use();
                if (mb_cache_stats(cache, &st) < 0)
                        die("mb_cache_stats", -errno);
                pages = st.slabs;
                for (size_t j = 0; j < k; j++)
                        mb_cache_free(cache, obj[j]);
                mb_cache_destroy(cache);
                free(obj);

                off_page = (double) (a1 - a0) * 1024.0;
                if (m1 - m0 > off_page)
                        off_page = m1 - m0;
                per = ((double) pages * (double) mb_page_size(c) + off_page) / (double) k;
                over = per - (double) size;
                snprintf(c1, sizeof c1, "%zu B", size);
                snprintf(c2, sizeof c2, "%zu", k);
                snprintf(c3, sizeof c3, "%llu", (unsigned long long) pages);
                bench_fmt(c4, sizeof c4, per);
                bench_fmt(c5, sizeof c5, over);
                bench_fmt(c7, sizeof c7, st.overhead_bytes_per_object);
                bench_fmt_ratio(c6, sizeof c6, over / (double) size);
                bench_table_cells(c1, c2, c3, c4, c7, c5, c6, NULL);
        }
        putchar('\n');
        {
                char b[32];
                bench_note("A client's first cache costs %s KiB once (per-client slab state), not counted above.",
                           bench_fmt(b, sizeof b, one_time / 1024.0));
        }
        mb_cache_destroy(warm);
}

int main(int argc, char **argv) {
        const char *membrokerd, *dir;
        char conf[4096], rundir[4096], name[64], b[6][64];
        struct bench_daemon d;
        mb_client *c = NULL;
        size_t n;
        void **pages;
        int64_t d_idle, d_conn, d_held, c_anon0, c_anon1, c_pte0, c_pte1;
        int64_t cap_small_kb = 0, cap_large_kb = 0;
        const char *small_cap = "256M", *large_cap = "16G";
        double small_pages = 65536, large_pages = 4194304; /* in 4 KiB pages */
        int r;

        if (argc != 3) {
                fprintf(stderr, "usage: bench-overhead MEMBROKERD DIR\n");
                return 2;
        }
        membrokerd = argv[1];
        dir = argv[2];
        bench_opts_init(&opts);
        n = bench_count(&opts, 1u << 16, 1u << 12); /* 256 MiB of pages, quick 16 MiB */
        (void) bench_mkdir(dir);

        /* daemon and client per held page, Capacity 4G */
        bench_path(conf, sizeof conf, dir, "conf-4G");
        write_config(conf, "4G");
        bench_path(rundir, sizeof rundir, dir, "run-4G");
        r = bench_daemon_start(membrokerd, conf, rundir, NULL, &d);
        if (r < 0)
                die("membrokerd did not start", r);
        d_idle = daemon_kb(d.pid);
        pages = calloc(n, sizeof(void *));
        if (!pages)
                die("calloc", -ENOMEM);
        memset(pages, 0xff, n * sizeof(void *)); /* fault it in now (not 0: folded into calloc) */
        r = mb_connect(d.sock, "big", &c);
        if (r < 0)
                die("mb_connect", r);
        usleep(100000);
        d_conn = daemon_kb(d.pid);
        c_anon0 = kb(0, "RssAnon");
        c_pte0 = kb(0, "VmPTE");
        for (size_t i = 0; i < n; i++) {
                pages[i] = mb_page_alloc(c);
                if (!pages[i])
                        die("mb_page_alloc", -errno);
                *(volatile char *) pages[i] = 1;
        }
        usleep(100000);
        d_held = daemon_kb(d.pid);
        c_anon1 = kb(0, "RssAnon");
        c_pte1 = kb(0, "VmPTE");
        for (size_t i = 0; i < n; i++)
                mb_page_free(c, pages[i]);
        free(pages);

        bench_table_begin("Table 8: memory overhead per page",
                          "Metadata the broker keeps per page, from RSS deltas (never from struct sizes): "
                          "membrokerd's RssAnon + RssShmem (it never maps the arenas; its own metadata may "
                          "live in memfds) and the client's RssAnon (its pages are shared memory and count "
                          "as RssShmem instead). Design target: ≤ 8 "
                          "bytes per page across daemon and client.");
        bench_table_columns("what", "measured", "bytes per page", "ratio to the 8 B target", NULL);
        snprintf(b[0], sizeof b[0], "%lld KiB", (long long) d_idle);
        row("daemon RssAnon+RssShmem, idle (Capacity 4G, 1 tenant)", b[0], -1, false);
        snprintf(b[0], sizeof b[0], "%+lld KiB", (long long) (d_conn - d_idle));
        row("daemon, 1 client connected, 0 pages", b[0], -1, false);
        snprintf(b[0], sizeof b[0], "%+lld KiB over %zu pages", (long long) (d_held - d_conn), n);
        row("daemon, per page held by a client", b[0], (double) (d_held - d_conn) * 1024.0 / (double) n, true);
        snprintf(b[0], sizeof b[0], "%+lld KiB over %zu pages", (long long) (c_anon1 - c_anon0), n);
        row("client, per page held", b[0], (double) (c_anon1 - c_anon0) * 1024.0 / (double) n, true);
        snprintf(b[0], sizeof b[0], "%+lld KiB over %zu pages", (long long) (c_pte1 - c_pte0), n);
        row("client page tables (VmPTE, kernel), per touched page", b[0],
            (double) (c_pte1 - c_pte0) * 1024.0 / (double) n, false);
        {
                double total = (double) (d_held - d_conn + c_anon1 - c_anon0) * 1024.0 / (double) n;
                snprintf(b[0], sizeof b[0], "daemon + client");
                row("**broker metadata per held page**", b[0], total, true);
        }

        slab_table(c);
        mb_close(c);
        c = NULL;
        bench_daemon_stop(&d);

        /* daemon per arena (capacity) page: small vs large Capacity, one
         * client connected so that the arena exists */
        for (int k = 0; k < 2; k++) {
                const char *cap = k ? large_cap : small_cap;

                snprintf(name, sizeof name, "conf-%s", cap);
                bench_path(conf, sizeof conf, dir, name);
                write_config(conf, cap);
                snprintf(name, sizeof name, "run-%s", cap);
                bench_path(rundir, sizeof rundir, dir, name);
                r = bench_daemon_start(membrokerd, conf, rundir, NULL, &d);
                if (r < 0)
                        die("membrokerd did not start", r);
                r = mb_connect(d.sock, "big", &c);
                if (r < 0)
                        die("mb_connect", r);
                {
                        void *p = mb_page_alloc(c);

                        usleep(100000);
                        if (k)
                                cap_large_kb = daemon_kb(d.pid);
                        else
                                cap_small_kb = daemon_kb(d.pid);
                        if (p)
                                mb_page_free(c, p);
                }
                mb_close(c);
                bench_daemon_stop(&d);
        }
        bench_table_begin("Table 8c: daemon memory per arena page (capacity)",
                          "membrokerd's RssAnon + RssShmem with one client connected (so that the tenant's arena "
                          "exists, one page allocated), Capacity 256M vs 16G: what the daemon keeps per "
                          "page of capacity whether or not it is used.");
        bench_table_columns("Capacity", "daemon RssAnon+RssShmem", "bytes per arena page (16G vs 256M)",
                            "ratio to the 8 B target", NULL);
        snprintf(b[0], sizeof b[0], "%lld KiB", (long long) cap_small_kb);
        bench_table_cells(small_cap, b[0], "—", "—", NULL);
        snprintf(b[0], sizeof b[0], "%lld KiB", (long long) cap_large_kb);
        {
                double per = (double) (cap_large_kb - cap_small_kb) * 1024.0 / (large_pages - small_pages);
                bench_fmt(b[1], sizeof b[1], per);
                bench_fmt_ratio(b[2], sizeof b[2], per / TARGET_BYTES_PER_PAGE);
                bench_table_cells(large_cap, b[0], b[1], b[2], NULL);
                putchar('\n');
                {
                        double held = (double) (d_held - d_conn + c_anon1 - c_anon0) * 1024.0 / (double) n;
                        bench_target(held <= TARGET_BYTES_PER_PAGE && per <= TARGET_BYTES_PER_PAGE,
                                     "≤ 8 bytes of metadata per page",
                                     "%s B per held page (daemon + client), %s B per arena page in the daemon",
                                     bench_fmt(b[3], sizeof b[3], held), b[1]);
                }
        }
        return bench_finish();
}
