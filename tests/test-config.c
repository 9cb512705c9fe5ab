/* SPDX-License-Identifier: MIT */
/*
 * test-config.c - daemon/core/config.c: sizes, defaults, the shipped files,
 * [Tenant] sections, the tree built from them, and every error with its
 * exact "file:line: reason".
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* By path: "config.h" alone finds the build's autoconf header first. */
#include "../daemon/core/config.h"
#include "../daemon/manager/config-files.h"

#define GIB (1ULL << 30)
#define MIB (1ULL << 20)

/* ---- a temporary config directory per test ------------------------------ */

static char tmpdir[256];

static void tmpdir_setup(void) {
        const char *base = getenv("TMPDIR");

        snprintf(tmpdir, sizeof(tmpdir), "%s/mbconf.XXXXXX", base && *base ? base : "/tmp");
        ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static int rm_cb(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) st;
        (void) type;
        (void) ftw;
        return remove(path);
}

static void tmpdir_teardown(void) {
        nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* Write @content to tmpdir/@name (creating tenants.d/ when needed). */
static void write_file(const char *name, const char *content) {
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/tenants.d", tmpdir);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
        f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fputs(content, f) >= 0, 1);
        ck_assert_int_eq(fclose(f), 0);
}

static char *path_of(const char *name) {
        static char path[512];

        snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
        return path;
}

static struct mb_config *load_ok(void) {
        struct mb_config *c = NULL;
        char *error = NULL;
        int r = mb_config_load(tmpdir, &c, &error);

        ck_assert_msg(r == 0, "load failed: %d %s", r, error ? error : "(null)");
        ck_assert_ptr_null(error);
        ck_assert_ptr_nonnull(c);
        return c;
}

/* Load, expect failure with exactly "tmpdir/@file:@line: @reason". */
static void load_fails(const char *file, unsigned line, const char *reason) {
        struct mb_config *c = NULL;
        char *error = NULL, *expect = NULL;
        int r = mb_config_load(tmpdir, &c, &error);

        ck_assert_int_eq(r, -EINVAL);
        ck_assert_ptr_null(c);
        ck_assert_ptr_nonnull(error);
        ck_assert_int_ge(asprintf(&expect, "%s/%s:%u: %s", tmpdir, file, line, reason), 0);
        ck_assert_str_eq(error, expect);
        free(expect);
        free(error);
}

static uint64_t default_capacity(void) {
        return mb_physical_memory() / 4; /* 25% */
}

static uint64_t sys_page(void) {
        return (uint64_t) sysconf(_SC_PAGESIZE);
}

static void assert_defaults(const struct mb_broker_config *b) {
        ck_assert_uint_eq(b->capacity_bytes, default_capacity());
        ck_assert_uint_eq(b->page_size, sys_page() > 4096 ? sys_page() : 4096);
        ck_assert_uint_eq(b->charge_batch, 64);
        ck_assert_str_eq(b->socket_path, "/run/membroker/membroker.sock");
        ck_assert_uint_eq(b->stats_flush_interval_sec, 2);
        ck_assert_uint_eq(b->workers, 0);
        ck_assert_uint_eq(b->reclaim_timeout_msec, 250);
        ck_assert_uint_eq(b->rightsize_interval_msec, 1000);
        ck_assert(!b->pressure_reclaim);
        ck_assert(!b->memory_recursiveprot);
        ck_assert_uint_eq(b->max_connections_per_user, 256);
        ck_assert_uint_eq(b->frame_timeout_sec, 10);
}

/* ---- sizes -------------------------------------------------------------- */

static const struct {
        const char *s;
        uint64_t ram;
        int r;
        uint64_t v;
} sizes[] = {
        { "0", 0, 0, 0 },
        { "4096", 0, 0, 4096 },
        { "4K", 0, 0, 4096 },
        { "4k", 0, 0, 4096 },
        { "10M", 0, 0, 10 * MIB },
        { "1536m", 0, 0, 1536 * MIB },
        { "2G", 0, 0, 2 * GIB },
        { "1.5G", 0, 0, 3 * GIB / 2 },
        { "0.5K", 0, 0, 512 },
        { "2T", 0, 0, 2ULL << 40 },
        { "3t", 0, 0, 3ULL << 40 },
        { "25%", 1000, 0, 250 },
        { "12.5%", 1000, 0, 125 },
        { "100%", 1000, 0, 1000 },
        { "0%", 1000, 0, 0 },
        { "33%", 10, 0, 3 },
        { "infinity", 0, 0, MB_LIMIT_MAX },
        { "max", 0, 0, MB_LIMIT_MAX },
        { "18446744073709551614", 0, 0, 18446744073709551614ULL },
        { "101%", 1000, -ERANGE, 0 },
        { "100.1%", 1000, -ERANGE, 0 },
        { "18446744073709551615", 0, -ERANGE, 0 },
        { "18446744073709551616", 0, -ERANGE, 0 },
        { "16777216T", 0, -ERANGE, 0 },
        { "", 0, -EINVAL, 0 },
        { "K", 0, -EINVAL, 0 },
        { "4KB", 0, -EINVAL, 0 },
        { "4KiB", 0, -EINVAL, 0 },
        { "-1", 0, -EINVAL, 0 },
        { "+1", 0, -EINVAL, 0 },
        { " 4K", 0, -EINVAL, 0 },
        { "4 K", 0, -EINVAL, 0 },
        { "4K ", 0, -EINVAL, 0 },
        { "1.5", 0, -EINVAL, 0 },
        { "1.", 0, -EINVAL, 0 },
        { ".5K", 0, -EINVAL, 0 },
        { "4X", 0, -EINVAL, 0 },
        { "4P", 0, -EINVAL, 0 },
        { "1e3", 0, -EINVAL, 0 },
        { "0x10", 0, -EINVAL, 0 },
        { "abc", 0, -EINVAL, 0 },
        { "Infinity", 0, -EINVAL, 0 },
        { "25%%", 1000, -EINVAL, 0 },
};

START_TEST(test_parse_size) {
        uint64_t v = 12345;
        int r = mb_parse_size(sizes[_i].s, sizes[_i].ram, &v);

        ck_assert_msg(r == sizes[_i].r, "'%s': r=%d, expected %d", sizes[_i].s, r, sizes[_i].r);
        if (r == 0)
                ck_assert_msg(v == sizes[_i].v, "'%s': %" PRIu64 ", expected %" PRIu64, sizes[_i].s, v,
                              sizes[_i].v);
        else
                ck_assert_uint_eq(v, 12345); /* untouched */
}
END_TEST

START_TEST(test_bytes_to_pages) {
        /* page_counter_memparse(): rounded down, "max" and overflow to
         * PAGE_COUNTER_MAX. */
        ck_assert_uint_eq(mb_bytes_to_pages(0, 4096), 0);
        ck_assert_uint_eq(mb_bytes_to_pages(4095, 4096), 0);
        ck_assert_uint_eq(mb_bytes_to_pages(8191, 4096), 1);
        ck_assert_uint_eq(mb_bytes_to_pages(GIB, 4096), 262144);
        ck_assert_uint_eq(mb_bytes_to_pages(GIB, 2 * MIB), 512);
        ck_assert_uint_eq(mb_bytes_to_pages(MB_LIMIT_MAX, 4096), (unsigned long) PAGE_COUNTER_MAX);
        ck_assert_uint_eq(mb_bytes_to_pages(MB_LIMIT_MAX - 1, 4096), (unsigned long) PAGE_COUNTER_MAX);
}
END_TEST

/* ---- defaults and the shipped files ------------------------------------- */

START_TEST(test_defaults_without_files) {
        struct mb_config *c = NULL;
        char *error = NULL;

        tmpdir_setup();
        c = load_ok();
        assert_defaults(&c->broker);
        ck_assert_uint_eq(c->ntenants, 0);
        mb_config_free(c);

        /* A directory that does not exist at all is an error that names it
         * (a mistyped --config-dir), and so is a file in its place. */
        ck_assert_int_eq(mb_config_load(path_of("nonexistent"), &c, &error), -ENOENT);
        ck_assert_ptr_nonnull(strstr(error, "nonexistent: cannot use the configuration directory"));
        free(error);
        error = NULL;
        write_file("plain", "");
        ck_assert_int_eq(mb_config_load(path_of("plain"), &c, &error), -ENOTDIR);
        ck_assert_ptr_nonnull(strstr(error, "plain: the configuration directory is not a directory"));
        free(error);
        error = NULL;
        unlink(path_of("plain"));

        /* An empty membroker.conf and an empty tenants.d/. */
        write_file("membroker.conf", "");
        c = load_ok();
        assert_defaults(&c->broker);
        mb_config_free(c);
        tmpdir_teardown();
}
END_TEST

static void copy_file(const char *from, const char *to_name) {
        char buf[65536];
        size_t n;
        FILE *f = fopen(from, "re");

        ck_assert_msg(f != NULL, "cannot open %s", from);
        n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        fclose(f);
        write_file(to_name, buf);
}

static const char *srcdir(void) {
        const char *s = getenv("top_srcdir");

        return s && *s ? s : "..";
}

START_TEST(test_shipped_membroker_conf_is_the_defaults) {
        char path[1024];
        struct mb_config *c;

        tmpdir_setup();
        snprintf(path, sizeof(path), "%s/etc/membroker.conf", srcdir());
        copy_file(path, "membroker.conf");
        c = load_ok();
        assert_defaults(&c->broker);
        ck_assert_uint_eq(c->ntenants, 0);
        mb_config_free(c);
        tmpdir_teardown();
}
END_TEST

START_TEST(test_shipped_example_tenant) {
        char path[1024];
        struct mb_config *c;
        const struct mb_tenant_config *tc;

        tmpdir_setup();
        snprintf(path, sizeof(path), "%s/etc/tenants.d/example.conf.example", srcdir());

        /* As shipped it is not active. */
        copy_file(path, "tenants.d/example.conf.example");
        c = load_ok();
        ck_assert_uint_eq(c->ntenants, 0);
        mb_config_free(c);

        /* Renamed to *.conf, it defines db/cache. */
        copy_file(path, "tenants.d/db.conf");
        c = load_ok();
        ck_assert_uint_eq(c->ntenants, 1);
        tc = &c->tenants[0];
        ck_assert_str_eq(tc->path, "db/cache");
        ck_assert_uint_eq(tc->max, 2 * GIB);
        ck_assert_uint_eq(tc->high, 1536 * MIB);
        ck_assert_uint_eq(tc->low, 512 * MIB);
        ck_assert_uint_eq(tc->min, 128 * MIB);
        ck_assert_int_eq(tc->oom_policy, MB_OOM_FAIL);
        ck_assert_str_eq(tc->cgroup, "/system.slice/postgresql.service");
        mb_config_free(c);
        tmpdir_teardown();
}
END_TEST

/* ---- [Broker] ----------------------------------------------------------- */

START_TEST(test_broker_keys) {
        struct mb_config *c;
        const struct mb_broker_config *b;

        tmpdir_setup();
        write_file("membroker.conf",
                   "# a comment\n"
                   "; another comment\n"
                   "\n"
                   "[Broker]\n"
                   "Capacity=3G          # bytes with K/M/G/T, or % of RAM\n"
                   "  PageSize = 8K\n"
                   "ChargeBatch=128 ; libinih's comment\n"
                   "Socket=/tmp/x#y.sock\n"
                   "StatsFlushIntervalSec=5\n"
                   "Workers=3\n"
                   "ReclaimTimeoutMSec=1000\n"
                   "RightSizeIntervalMSec=300\n"
                   "PressureReclaim=yes\n"
                   "MemoryRecursiveProtection=on\n"
                   "MaxConnectionsPerUser=0\n"
                   "FrameTimeoutSec=3\n"
                   "ArenaBacking=memfd\n"
                   "\tWorkers=4\n");
        c = load_ok();
        b = &c->broker;
        ck_assert_uint_eq(b->capacity_bytes, 3 * GIB);
        ck_assert_uint_eq(b->page_size, 8192);
        ck_assert_uint_eq(b->charge_batch, 128);
        ck_assert_str_eq(b->socket_path, "/tmp/x#y.sock");
        ck_assert_uint_eq(b->stats_flush_interval_sec, 5);
        ck_assert_uint_eq(b->workers, 4); /* the last assignment wins */
        ck_assert_uint_eq(b->reclaim_timeout_msec, 1000);
        ck_assert_uint_eq(b->rightsize_interval_msec, 300);
        ck_assert(b->pressure_reclaim);
        ck_assert(b->memory_recursiveprot);
        ck_assert_uint_eq(b->max_connections_per_user, 0);
        ck_assert_uint_eq(b->frame_timeout_sec, 3);
        ck_assert_int_eq(b->arena_backing, MB_ARENA_BACKING_MEMFD);
        ck_assert_int_eq(b->huge_pages, MB_HUGE_PAGES_NO);
        mb_config_free(c);

        /* HugePages=thp with 2 MiB pages, in either order. */
        write_file("membroker.conf", "[Broker]\nHugePages=thp\nPageSize=2M\n");
        c = load_ok();
        ck_assert_int_eq(c->broker.huge_pages, MB_HUGE_PAGES_THP);
        ck_assert_uint_eq(c->broker.page_size, 2 * 1024 * 1024);
        mb_config_free(c);
        write_file("membroker.conf", "[Broker]\nPageSize=2M\nHugePages=hugetlbfs\n");
        c = load_ok();
        ck_assert_int_eq(c->broker.huge_pages, MB_HUGE_PAGES_HUGETLBFS);
        mb_config_free(c);

        /* Percent of RAM; an empty value resets to the default. */
        write_file("membroker.conf",
                   "[Broker]\nCapacity=50%\nChargeBatch=7\nChargeBatch=\nSocket=/x\nSocket=\n");
        c = load_ok();
        ck_assert_uint_eq(c->broker.capacity_bytes, mb_physical_memory() / 2);
        ck_assert_uint_eq(c->broker.charge_batch, 64);
        ck_assert_str_eq(c->broker.socket_path, "/run/membroker/membroker.sock");
        ck_assert_int_eq(c->broker.arena_backing, MB_ARENA_BACKING_AUTO);
        mb_config_free(c);
        tmpdir_teardown();
}
END_TEST

static const struct {
        const char *s;
        bool v;
} booleans[] = {
        { "yes", true }, { "no", false }, { "true", true }, { "false", false }, { "1", true },
        { "0", false },  { "on", true },  { "off", false }, { "YES", true },   { "Off", false },
};

START_TEST(test_booleans) {
        char buf[128];
        struct mb_config *c;

        tmpdir_setup();
        snprintf(buf, sizeof(buf), "[Broker]\nPressureReclaim=%s\nMemoryRecursiveProtection=%s\n",
                 booleans[_i].s, booleans[_i].s);
        write_file("membroker.conf", buf);
        c = load_ok();
        ck_assert(c->broker.pressure_reclaim == booleans[_i].v);
        ck_assert(c->broker.memory_recursiveprot == booleans[_i].v);
        mb_config_free(c);
        tmpdir_teardown();
}
END_TEST

/* ---- [Tenant] ----------------------------------------------------------- */

START_TEST(test_tenant_sections) {
        struct mb_config *c;
        const struct mb_tenant_config *t;

        tmpdir_setup();
        write_file("membroker.conf", "[Broker]\nCapacity=4G\n");
        /* Bytewise lexical order: "10-..." before "2-...". */
        write_file("tenants.d/2-web.conf",
                   "[Tenant]\n"
                   "Path=web\n"
                   "MemoryMax=25%\n");
        write_file("tenants.d/10-db.conf",
                   "[Tenant]\n"
                   "Path=/db/cache/\n"
                   "MemoryMax=2G\n"
                   "MemoryHigh=1536M\n"
                   "MemoryLow=512M\n"
                   "MemoryMin=128M\n"
                   "ChargeBatch=32\n"
                   "OOMPolicy=kill\n"
                   "OverrunPolicy=kill\n"
                   "OOMGroup=yes\n"
                   "AllowUsers=root 1234\n"
                   "AllowUsers=4321\n"
                   "AllowGroups=root 77\n"
                   "Cgroup=/system.slice/postgresql.service/\n"
                   "\n"
                   "[Tenant]\n"
                   "Path=db\n"
                   "MemoryMin=3G\n"
                   "MemoryMax=1G      # min above max is allowed, like the kernel\n"
                   "AllowUsers=root\n"
                   "AllowUsers=\n"
                   "MemoryPressureTarget=full avg60 0.5%\n");
        /* Ignored: not *.conf, hidden, a directory. */
        write_file("tenants.d/README", "garbage\n");
        write_file("tenants.d/x.conf.example", "garbage\n");
        write_file("tenants.d/.hidden.conf", "garbage\n");
        mkdir(path_of("tenants.d/dir.conf"), 0755);

        c = load_ok();
        ck_assert_uint_eq(c->ntenants, 3);

        t = &c->tenants[0];
        ck_assert_str_eq(t->path, "db/cache");
        ck_assert_str_eq(t->file, path_of("tenants.d/10-db.conf"));
        ck_assert_uint_eq(t->line, 2);
        ck_assert_uint_eq(t->max, 2 * GIB);
        ck_assert_uint_eq(t->high, 1536 * MIB);
        ck_assert_uint_eq(t->low, 512 * MIB);
        ck_assert_uint_eq(t->min, 128 * MIB);
        ck_assert_uint_eq(t->charge_batch, 32);
        ck_assert_int_eq(t->oom_policy, MB_OOM_KILL);
        ck_assert_int_eq(t->overrun_policy, MB_OVERRUN_KILL);
        ck_assert(t->oom_group);
        ck_assert(!t->pressure_target.enabled); /* off by default */
        ck_assert_uint_eq(t->n_allow_users, 3);
        ck_assert_uint_eq(t->allow_users[0], 0);
        ck_assert_uint_eq(t->allow_users[1], 1234);
        ck_assert_uint_eq(t->allow_users[2], 4321);
        ck_assert_uint_eq(t->n_allow_groups, 2);
        ck_assert_uint_eq(t->allow_groups[0], 0);
        ck_assert_uint_eq(t->allow_groups[1], 77);
        ck_assert_str_eq(t->cgroup, "/system.slice/postgresql.service");

        t = &c->tenants[1];
        ck_assert_str_eq(t->path, "db");
        ck_assert_uint_eq(t->line, 17);
        ck_assert_uint_eq(t->min, 3 * GIB);
        ck_assert_uint_eq(t->max, GIB);
        ck_assert_uint_eq(t->high, MB_LIMIT_MAX);
        ck_assert_uint_eq(t->low, 0);
        ck_assert_uint_eq(t->charge_batch, 0);
        ck_assert_int_eq(t->oom_policy, MB_OOM_FAIL);
        ck_assert_int_eq(t->overrun_policy, MB_OVERRUN_PUNCH);
        ck_assert(!t->oom_group);
        ck_assert(t->pressure_target.enabled);
        ck_assert_int_eq(t->pressure_target.kind, RIGHTSIZE_FULL);
        ck_assert_int_eq(t->pressure_target.window, RIGHTSIZE_AVG60);
        ck_assert_uint_eq(t->pressure_target.ppm, 5000);
        ck_assert_uint_eq(t->n_allow_users, 0);
        ck_assert_ptr_null(t->cgroup);

        t = &c->tenants[2];
        ck_assert_str_eq(t->path, "web");
        ck_assert_str_eq(t->file, path_of("tenants.d/2-web.conf"));
        ck_assert_uint_eq(t->max, GIB); /* 25% of Capacity */

        ck_assert_ptr_eq(mb_config_find_tenant(c, "/web/"), t);
        ck_assert_ptr_null(mb_config_find_tenant(c, "nope"));
        mb_config_free(c);
        tmpdir_teardown();
}
END_TEST

START_TEST(test_design_example) {
        /* docs/design.md, verbatim but for the user name (postgres need not
         * exist here). */
        struct mb_config *c;
        const struct mb_tenant_config *t;

        tmpdir_setup();
        write_file("membroker.conf",
                   "# /etc/membroker/membroker.conf\n"
                   "[Broker]\n"
                   "Capacity=25%          # bytes with K/M/G/T, or % of RAM\n"
                   "PageSize=4K\n"
                   "ChargeBatch=64\n"
                   "Socket=/run/membroker/membroker.sock\n"
                   "StatsFlushIntervalSec=2\n");
        write_file("tenants.d/db.conf",
                   "# /etc/membroker/tenants.d/db.conf\n"
                   "[Tenant]\n"
                   "Path=db/cache\n"
                   "MemoryMax=2G\n"
                   "MemoryHigh=1536M\n"
                   "MemoryLow=512M\n"
                   "MemoryMin=128M\n"
                   "AllowUsers=root\n"
                   "Cgroup=/system.slice/postgresql.service\n");
        c = load_ok();
        assert_defaults(&c->broker);
        ck_assert_uint_eq(c->ntenants, 1);
        t = &c->tenants[0];
        ck_assert_str_eq(t->path, "db/cache");
        ck_assert_uint_eq(t->line, 3);
        ck_assert_uint_eq(t->max, 2 * GIB);
        ck_assert_uint_eq(t->high, 1536 * MIB);
        ck_assert_uint_eq(t->low, 512 * MIB);
        ck_assert_uint_eq(t->min, 128 * MIB);
        ck_assert_uint_eq(t->n_allow_users, 1);
        ck_assert_uint_eq(t->allow_users[0], 0);
        ck_assert_str_eq(t->cgroup, "/system.slice/postgresql.service");
        mb_config_free(c);

        /* "max" and "infinity" spell no limit, for protection too. */
        write_file("tenants.d/db.conf", "[Tenant]\nPath=db\nMemoryMax=2G\nMemoryMax=max\nMemoryHigh=infinity\n"
                                        "MemoryMin=max\n");
        c = load_ok();
        ck_assert_uint_eq(c->tenants[0].max, MB_LIMIT_MAX);
        ck_assert_uint_eq(c->tenants[0].high, MB_LIMIT_MAX);
        ck_assert_uint_eq(c->tenants[0].min, MB_LIMIT_MAX);
        mb_config_free(c);
        tmpdir_teardown();
}
END_TEST

START_TEST(test_build_tree) {
        struct mb_config *c;
        struct tenant_tree *tree = NULL;
        struct tenant *cache, *db, *x, *y;
        char *error = NULL;

        tmpdir_setup();
        write_file("membroker.conf", "[Broker]\nCapacity=1G\nPageSize=8K\nChargeBatch=16\n"
                                     "MemoryRecursiveProtection=yes\n");
        write_file("tenants.d/a.conf",
                   "[Tenant]\nPath=db/cache\nMemoryMax=1000000\nMemoryHigh=16383\nMemoryLow=8K\n"
                   "MemoryMin=8191\nChargeBatch=4\nOOMPolicy=kill\nAllowUsers=0 7\nAllowGroups=9\n"
                   "Cgroup=/a.slice\n"
                   "[Tenant]\nPath=db\nMemoryMax=infinity\nMemoryHigh=512M\n"
                   "[Tenant]\nPath=x/y\n");
        c = load_ok();

        ck_assert_int_eq(mb_config_build_tree(c, 2, &tree, &error), 0);
        ck_assert_ptr_null(error);
        ck_assert_uint_eq(tree->ntenants, 5);
        ck_assert(tree->recursive_protection);
        ck_assert_uint_eq(page_counter_get_max(&tree->root->memory), GIB / 8192);

        cache = tenant_lookup(tree, "db/cache");
        db = tenant_lookup(tree, "db");
        x = tenant_lookup(tree, "x");
        y = tenant_lookup(tree, "x/y");
        ck_assert(cache && db && x && y);

        /* Bytes to pages, rounded down. */
        ck_assert_uint_eq(page_counter_get_max(&cache->memory), 1000000 / 8192);
        ck_assert_uint_eq(page_counter_get_high(&cache->memory), 1);
        ck_assert_uint_eq(page_counter_get_low(&cache->memory), 1);
        ck_assert_uint_eq(page_counter_get_min(&cache->memory), 0);
        ck_assert_uint_eq(cache->charge_batch, 4);
        ck_assert_int_eq(cache->oom_policy, MB_OOM_KILL);
        ck_assert_uint_eq(cache->n_allow_users, 2);
        ck_assert_uint_eq(cache->allow_users[1], 7);
        ck_assert_uint_eq(cache->n_allow_groups, 1);
        ck_assert_uint_eq(cache->allow_groups[0], 9);
        ck_assert_str_eq(cache->cgroup, "/a.slice");
        ck_assert(cache->from_config);

        /* db was created for db/cache first, then got its own settings. */
        ck_assert(db->from_config);
        ck_assert_uint_eq(page_counter_get_max(&db->memory), (unsigned long) PAGE_COUNTER_MAX);
        ck_assert_uint_eq(page_counter_get_high(&db->memory), 512 * MIB / 8192);
        ck_assert_uint_eq(tenant_charge_batch(db, c->broker.charge_batch), 16);

        /* x exists only as y's ancestor. */
        ck_assert(!x->from_config);
        ck_assert(y->from_config);
        ck_assert(tenant_is_unlimited(y));

        tenant_tree_free(tree);
        mb_config_free(c);
        tmpdir_teardown();
}
END_TEST

/* ---- errors ------------------------------------------------------------- */

struct error_case {
        const char *file;    /* relative to the config dir */
        const char *content;
        unsigned line;
        const char *reason;
};

static const struct error_case errors[] = {
        /* membroker.conf */
        { "membroker.conf", "[Brokr]\n", 1, "unknown section [Brokr], expected [Broker]" },
        { "membroker.conf", "[Tenant]\nPath=a\n", 1, "unknown section [Tenant], expected [Broker]" },
        { "membroker.conf", "[Broker]\nFoo=1\n", 2, "unknown key Foo= in section [Broker]" },
        { "membroker.conf", "[Broker]\ncapacity=1G\n", 2, "unknown key capacity= in section [Broker]" },
        { "membroker.conf", "Capacity=1G\n", 1, "Capacity= outside of any section" },
        { "membroker.conf", "\n  Capacity = 1G\n[Broker]\n", 2, "Capacity= outside of any section" },
        { "membroker.conf", "# hello\n[Broker]\nnonsense\n", 3,
          "expected Key=Value, a [Section] header or a comment" },
        { "membroker.conf", "[Broker]\nCapacity: 1G\n", 2, "expected Key=Value, a [Section] header or a comment" },
        { "membroker.conf", "[Broker]\n=1G\n", 2, "missing key name before '='" },
        { "membroker.conf", "[Broker\n", 1, "missing ']' in section header" },
        { "membroker.conf", "[Broker] x\n", 1, "unexpected text after section header" },
        { "membroker.conf", "[Broker]\n\nCapacity=12Q\n", 3,
          "bad size '12Q' for Capacity= (bytes with K/M/G/T, a percentage, or infinity)" },
        { "membroker.conf", "[Broker]\nCapacity=101%\n", 2,
          "bad size '101%' for Capacity= (bytes with K/M/G/T, a percentage, or infinity)" },
        { "membroker.conf", "[Broker]\nCapacity=infinity\n", 2,
          "Capacity= must be a size or a percentage of RAM, not 'infinity'" },
        { "membroker.conf", "[Broker]\nCapacity=1K\n", 2,
          "Capacity= (1024 bytes) is smaller than one page (4096 bytes)" },
        { "membroker.conf", "[Broker]\nCapacity=16K\nPageSize=64K\n", 2,
          "Capacity= (16384 bytes) is smaller than one page (65536 bytes)" },
        { "membroker.conf", "[Broker]\nPageSize=10%\n", 2, "bad size '10%' for PageSize= (bytes with K/M/G/T)" },
        { "membroker.conf", "[Broker]\nPageSize=max\n", 2, "bad size 'max' for PageSize= (bytes with K/M/G/T)" },
        { "membroker.conf", "[Broker]\nPageSize=12K\n", 2,
          "PageSize=12K is not a power of two multiple of the system page size (4096 bytes) up to 1G" },
        { "membroker.conf", "[Broker]\nPageSize=2K\n", 2,
          "PageSize=2K is not a power of two multiple of the system page size (4096 bytes) up to 1G" },
        { "membroker.conf", "[Broker]\nPageSize=2G\n", 2,
          "PageSize=2G is not a power of two multiple of the system page size (4096 bytes) up to 1G" },
        { "membroker.conf", "[Broker]\nChargeBatch=0\n", 2, "ChargeBatch=0 is out of range (1..16384)" },
        { "membroker.conf", "[Broker]\nChargeBatch=16385\n", 2, "ChargeBatch=16385 is out of range (1..16384)" },
        { "membroker.conf", "[Broker]\nChargeBatch=99999999999\n", 2,
          "ChargeBatch=99999999999 is out of range (1..16384)" },
        { "membroker.conf", "[Broker]\nChargeBatch=lots\n", 2, "bad number 'lots' for ChargeBatch=" },
        { "membroker.conf", "[Broker]\nChargeBatch=-1\n", 2, "bad number '-1' for ChargeBatch=" },
        { "membroker.conf", "[Broker]\nSocket=run/membroker.sock\n", 2,
          "Socket=run/membroker.sock is not an absolute path" },
        { "membroker.conf",
          "[Broker]\nSocket=/run/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
          "aaaaaaaaaaaaaaaaaaa.sock\n",
          2, "Socket= path is longer than 107 bytes" },
        { "membroker.conf", "[Broker]\nStatsFlushIntervalSec=0\n", 2,
          "StatsFlushIntervalSec=0 is out of range (1..86400)" },
        { "membroker.conf", "[Broker]\nStatsFlushIntervalSec=2s\n", 2, "bad number '2s' for StatsFlushIntervalSec=" },
        { "membroker.conf", "[Broker]\nWorkers=1025\n", 2, "Workers=1025 is out of range (0..1024)" },
        { "membroker.conf", "[Broker]\nReclaimTimeoutMSec=0\n", 2, "ReclaimTimeoutMSec=0 is out of range (1..3600000)" },
        { "membroker.conf", "[Broker]\nFrameTimeoutSec=0\n", 2, "FrameTimeoutSec=0 is out of range (1..3600)" },
        { "membroker.conf", "[Broker]\nMaxConnectionsPerUser=-1\n", 2, "bad number '-1' for MaxConnectionsPerUser=" },
        { "membroker.conf", "[Broker]\nPressureReclaim=maybe\n", 2,
          "bad boolean 'maybe' for PressureReclaim= (yes/no, true/false, on/off, 1/0)" },
        { "membroker.conf", "[Broker]\nMemoryRecursiveProtection=2\n", 2,
          "bad boolean '2' for MemoryRecursiveProtection= (yes/no, true/false, on/off, 1/0)" },
        /* tenants.d/ */
        { "tenants.d/a.conf", "[Broker]\nCapacity=1G\n", 1, "unknown section [Broker], expected [Tenant]" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nMemoryMaximum=1G\n", 3, "unknown key MemoryMaximum= in section [Tenant]" },
        { "tenants.d/a.conf", "Path=a\n", 1, "Path= outside of any section" },
        { "tenants.d/a.conf", "[Tenant]\nMemoryMax=1G\n", 1, "[Tenant] section without Path=" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\n\n[Tenant]\nMemoryMax=1G\n[Tenant]\nPath=b\n", 4,
          "[Tenant] section without Path=" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\n# the next one is empty\n[Tenant]\n", 4,
          "[Tenant] section without Path=" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nPath=b\n", 3, "Path= set twice in one [Tenant] section" },
        { "tenants.d/a.conf", "[Tenant]\nPath=\n", 2, "Path= must not be empty" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a//b\n", 2,
          "bad tenant path 'a//b' (components of [A-Za-z0-9_.-] separated by '/', at most 16 deep)" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a/../b\n", 2,
          "bad tenant path 'a/../b' (components of [A-Za-z0-9_.-] separated by '/', at most 16 deep)" },
        { "tenants.d/a.conf", "[Tenant]\nPath=db cache\n", 2,
          "bad tenant path 'db cache' (components of [A-Za-z0-9_.-] separated by '/', at most 16 deep)" },
        { "tenants.d/a.conf", "[Tenant]\nPath=1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17\n", 2,
          "bad tenant path '1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17' (components of [A-Za-z0-9_.-] "
          "separated by '/', at most 16 deep)" },
        { "tenants.d/a.conf", "[Tenant]\nPath=/\n", 2,
          "Path=/ is the root tenant, its limit is Capacity= in membroker.conf" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nMemoryMax=lots\n", 3,
          "bad size 'lots' for MemoryMax= (bytes with K/M/G/T, a percentage, or infinity)" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nMemoryHigh=-5M\n", 3,
          "bad size '-5M' for MemoryHigh= (bytes with K/M/G/T, a percentage, or infinity)" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nMemoryLow=1.5\n", 3,
          "bad size '1.5' for MemoryLow= (bytes with K/M/G/T, a percentage, or infinity)" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nMemoryMin=200%\n", 3,
          "bad size '200%' for MemoryMin= (bytes with K/M/G/T, a percentage, or infinity)" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nChargeBatch=0\n", 3, "ChargeBatch=0 is out of range (1..16384)" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nOOMPolicy=panic\n", 3, "OOMPolicy= must be fail or kill, not 'panic'" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nOverrunPolicy=fail\n", 3,
          "OverrunPolicy= must be punch or kill, not 'fail'" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nOOMGroup=maybe\n", 3,
          "bad boolean 'maybe' for OOMGroup= (yes/no, true/false, on/off, 1/0)" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nMemoryPressureTarget=some avg10\n", 3,
          "bad MemoryPressureTarget=some avg10: expected \"some|full avg10|avg60|avg300 PERCENT%\", or \"no\"" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nMemoryPressureTarget=some avg5 1%\n", 3,
          "bad MemoryPressureTarget=some avg5 1%: the second word must be \"avg10\", \"avg60\" or \"avg300\"" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nMemoryPressureTarget=some avg10 0%\n", 3,
          "bad MemoryPressureTarget=some avg10 0%: the third word must be a percentage above 0% and at most "
          "100%, with at most 4 decimals (\"0.1%\")" },
        { "membroker.conf", "[Broker]\nRightSizeIntervalMSec=5\n", 2, "RightSizeIntervalMSec=5 is out of range (10..3600000)" },
        { "membroker.conf", "[Broker]\nArenaBacking=shm\n", 2,
          "ArenaBacking= must be auto, tmpfs or memfd, not 'shm'" },
        { "membroker.conf", "[Broker]\nHugePages=2M\n", 2, "HugePages= must be no, thp or hugetlbfs, not '2M'" },
        { "membroker.conf", "[Broker]\nHugePages=thp\n", 2,
          "HugePages=thp needs PageSize=2M (the size of a huge page), not 4096 bytes" },
        { "membroker.conf", "[Broker]\nPageSize=1G\nHugePages=hugetlbfs\n", 3,
          "HugePages=hugetlbfs needs PageSize=2M (the size of a huge page), not 1073741824 bytes" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nAllowUsers=root no_such_user_mbtest\n", 3,
          "unknown user 'no_such_user_mbtest' in AllowUsers=" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nAllowUsers=4294967295\n", 3, "bad user id '4294967295' in AllowUsers=" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nAllowUsers=12ab\n", 3, "bad user id '12ab' in AllowUsers=" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nAllowGroups=no_such_group_mbtest\n", 3,
          "unknown group 'no_such_group_mbtest' in AllowGroups=" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nCgroup=system.slice\n", 3,
          "Cgroup=system.slice is not an absolute cgroup path" },
        { "tenants.d/a.conf", "[Tenant]\nPath=a\nCgroup=/a/../b\n", 3, "Cgroup=/a/../b is not an absolute cgroup path" },
};

START_TEST(test_error_messages) {
        const struct error_case *e = &errors[_i];

        tmpdir_setup();
        write_file(e->file, e->content);
        load_fails(e->file, e->line, e->reason);
        tmpdir_teardown();
}
END_TEST

START_TEST(test_error_page_size_system_dependent) {
        /* Messages above assume 4K system pages; on other machines check
         * the same message with the machine's page size. */
        char buf[256];

        tmpdir_setup();
        snprintf(buf, sizeof(buf), "[Broker]\nPageSize=%" PRIu64 "\n", sys_page() * 3);
        write_file("membroker.conf", buf);
        snprintf(buf, sizeof(buf),
                 "PageSize=%" PRIu64 " is not a power of two multiple of the system page size (%" PRIu64
                 " bytes) up to 1G",
                 sys_page() * 3, sys_page());
        load_fails("membroker.conf", 2, buf);
        tmpdir_teardown();
}
END_TEST

START_TEST(test_error_duplicate_in_one_file) {
        char reason[1024];

        tmpdir_setup();
        write_file("tenants.d/a.conf", "[Tenant]\nPath=a\n[Tenant]\nPath=/a/\n");
        snprintf(reason, sizeof(reason), "duplicate Path=a, first defined at %s/tenants.d/a.conf:2", tmpdir);
        load_fails("tenants.d/a.conf", 4, reason);
        tmpdir_teardown();
}
END_TEST

START_TEST(test_error_duplicate_across_files) {
        tmpdir_setup();
        write_file("tenants.d/a.conf", "[Tenant]\nPath=db\n[Tenant]\nPath=web\n");
        write_file("tenants.d/b.conf", "# b\n[Tenant]\nPath=x\n[Tenant]\n\nPath=/db/\n");
        write_file("tenants.d/c.conf", "[Tenant]\nPath=web\n");
        {
                char reason[1024];

                /* Two duplicates: the first one in file order is named. */
                snprintf(reason, sizeof(reason), "duplicate Path=db, first defined at %s/tenants.d/a.conf:2", tmpdir);
                load_fails("tenants.d/b.conf", 6, reason);
        }
        tmpdir_teardown();
}
END_TEST

START_TEST(test_error_in_later_file_gives_no_result) {
        tmpdir_setup();
        write_file("membroker.conf", "[Broker]\nCapacity=1G\n");
        write_file("tenants.d/a.conf", "[Tenant]\nPath=good\n");
        write_file("tenants.d/b.conf", "[Tenant]\nPath=also-good\nMemoryMax=1G\nMemoryHigh=oops\n");
        load_fails("tenants.d/b.conf", 4,
                   "bad size 'oops' for MemoryHigh= (bytes with K/M/G/T, a percentage, or infinity)");
        tmpdir_teardown();
}
END_TEST

START_TEST(test_error_line_too_long) {
        char buf[1024];

        tmpdir_setup();
        /* Long comment lines are fine... */
        {
                char comment[601], tail[301];

                memset(comment, '#', 600);
                comment[600] = '\0';
                memset(tail, '#', 300);
                tail[300] = '\0';
                snprintf(buf, sizeof(buf), "%s\n[Broker]\nWorkers=1   %s\n", comment, tail);
        }
        write_file("membroker.conf", buf);
        {
                struct mb_config *c = load_ok();
                ck_assert_uint_eq(c->broker.workers, 1);
                mb_config_free(c);
        }

        /* ...a long assignment is not silently cut. */
        snprintf(buf, sizeof(buf), "[Broker]\nSocket=/%0300d\n", 0);
        write_file("membroker.conf", buf);
        {
                struct mb_config *c = NULL;
                char *error = NULL, *expect = NULL;

                ck_assert_int_eq(mb_config_load(tmpdir, &c, &error), -EINVAL);
                ck_assert_ptr_nonnull(error);
                ck_assert_int_ge(asprintf(&expect, "%s/membroker.conf:2: line too long (more than ", tmpdir), 0);
                ck_assert_msg(strncmp(error, expect, strlen(expect)) == 0, "got: %s", error);
                free(expect);
                free(error);
        }
        tmpdir_teardown();
}
END_TEST

START_TEST(test_error_unreadable_file) {
        struct mb_config *c = NULL;
        char *error = NULL, *expect = NULL;

        tmpdir_setup();
        /* A directory where membroker.conf should be: fopen() works,
         * reading fails. */
        mkdir(path_of("membroker.conf"), 0755);
        ck_assert_int_eq(mb_config_load(tmpdir, &c, &error), -EISDIR);
        ck_assert_ptr_null(c);
        ck_assert_int_ge(asprintf(&expect, "%s/membroker.conf: read error: %s", tmpdir, strerror(EISDIR)), 0);
        ck_assert_str_eq(error, expect);
        free(expect);
        free(error);
        tmpdir_teardown();
}
END_TEST

START_TEST(test_bom_and_crlf) {
        struct mb_config *c;

        tmpdir_setup();
        write_file("membroker.conf", "\xEF\xBB\xBF[Broker]\r\nWorkers=2\r\n");
        c = load_ok();
        ck_assert_uint_eq(c->broker.workers, 2);
        mb_config_free(c);
        tmpdir_teardown();
}
END_TEST


/* tenants.d entries that are not regular files are skipped (with a
 * warning); a link to a regular file is read. */
START_TEST(test_odd_entries_skipped) {
        struct mb_config *c;
        char target[600], link[600];

        tmpdir_setup();
        write_file("tenants.d/a.conf", "[Tenant]\nPath=a\n");
        write_file("real", "[Tenant]\nPath=linked\n");
        snprintf(target, sizeof(target), "%s/real", tmpdir);
        snprintf(link, sizeof(link), "%s/tenants.d/linked.conf", tmpdir);
        ck_assert_int_eq(symlink(target, link), 0);
        snprintf(link, sizeof(link), "%s/tenants.d/loop.conf", tmpdir);
        ck_assert_int_eq(symlink("loop.conf", link), 0);
        snprintf(link, sizeof(link), "%s/tenants.d/dangling.conf", tmpdir);
        ck_assert_int_eq(symlink("nowhere", link), 0);
        snprintf(link, sizeof(link), "%s/tenants.d/fifo.conf", tmpdir);
        ck_assert_int_eq(mkfifo(link, 0644), 0);
        snprintf(link, sizeof(link), "%s/tenants.d/dir.conf", tmpdir);
        ck_assert_int_eq(mkdir(link, 0755), 0);
        snprintf(link, sizeof(link), "%s/tenants.d/null.conf", tmpdir);
        ck_assert_int_eq(symlink("/dev/null", link), 0);
        write_file("tenants.d/z.conf", "[Tenant]\nPath=z\n");

        c = load_ok(); /* (a blocking open of the FIFO would hang here) */
        ck_assert_uint_eq(c->ntenants, 3);
        ck_assert_str_eq(c->tenants[0].path, "a");
        ck_assert_str_eq(c->tenants[1].path, "linked");
        ck_assert_str_eq(c->tenants[2].path, "z");
        mb_config_free(c);
        tmpdir_teardown();
}
END_TEST

static Suite *config_suite(void) {
        Suite *s = suite_create("config");
        TCase *tc = tcase_create("core");

        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_parse_size, 0, sizeof(sizes) / sizeof(sizes[0]));
        tcase_add_test(tc, test_bytes_to_pages);
        tcase_add_test(tc, test_defaults_without_files);
        tcase_add_test(tc, test_shipped_membroker_conf_is_the_defaults);
        tcase_add_test(tc, test_shipped_example_tenant);
        tcase_add_test(tc, test_broker_keys);
        tcase_add_loop_test(tc, test_booleans, 0, sizeof(booleans) / sizeof(booleans[0]));
        tcase_add_test(tc, test_tenant_sections);
        tcase_add_test(tc, test_design_example);
        tcase_add_test(tc, test_build_tree);
        /* The PageSize messages in errors[] assume 4K pages. */
        if (sysconf(_SC_PAGESIZE) == 4096)
                tcase_add_loop_test(tc, test_error_messages, 0, sizeof(errors) / sizeof(errors[0]));
        tcase_add_test(tc, test_error_page_size_system_dependent);
        tcase_add_test(tc, test_error_duplicate_in_one_file);
        tcase_add_test(tc, test_error_duplicate_across_files);
        tcase_add_test(tc, test_error_in_later_file_gives_no_result);
        tcase_add_test(tc, test_error_line_too_long);
        tcase_add_test(tc, test_error_unreadable_file);
        tcase_add_test(tc, test_bom_and_crlf);
        tcase_add_test(tc, test_odd_entries_skipped);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(config_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
