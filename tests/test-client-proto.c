/* SPDX-License-Identifier: MIT */
/*
 * test-client-proto.c - libmembroker against a scripted fake daemon.
 *
 * Each test runs a small fake membrokerd in a thread: it listens on a
 * temporary socket, answers Hello with a real Welcome (an arena memfd and a
 * stats memfd passed with SCM_RIGHTS) and then plays a script: daemon
 * requests (Reclaim, Drain, Event), errors and protocol violations that the
 * real daemon sends rarely or not yet.  What the fake saw is recorded and
 * checked by the test thread after the fake is joined.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "macros.h"
#include "core/mb_internal.h"
#include "mb_stats_abi.h"
#include "membroker.h"
#include "wire.h"

#define FAKE_PAGE_BYTES 4096u
#define FAKE_ARENA_PAGES 1024u

struct fake {
        char dir[64];
        char path[128];
        int listen_fd;
        int fd;
        pthread_t thread;
        void (*script)(struct fake *f);
        unsigned batch;
        bool send_fds;
        uint64_t next_page;
        uint8_t buf[WIRE_HEADER_BYTES + WIRE_MAX_FRAME_BYTES];
        size_t len;
        sem_t go;            /* the test tells the script to go on */
        const char *failed;  /* first thing the fake did not like */

        /* what the fake saw */
        char hello_tenant[64];
        char hello_name[64];
        uint32_t hello_version;
        uint32_t reply_to;
        int reason;
        uint64_t reply_pages;
        size_t reply_extents;
        uint64_t uncharged_pages;
        size_t first_uncharge_extents;
        bool saw_eof;
};

static void fake_fail(struct fake *f, const char *what) {
        if (!f->failed)
                f->failed = what;
}

/* Next message from the client; NULL at EOF or on error. */
static Mb__Msg *fake_recv(struct fake *f) {
        for (;;) {
                Mb__Msg *m;
                size_t used;
                ssize_t n;
                int r = wire_frame_parse(f->buf, f->len, &used, &m);

                if (r == 0) {
                        memmove(f->buf, f->buf + used, f->len - used);
                        f->len -= used;
                        return m;
                }
                if (r != -EAGAIN) {
                        fake_fail(f, "client sent an invalid frame");
                        return NULL;
                }
                n = recv(f->fd, f->buf + f->len, sizeof(f->buf) - f->len, 0);
                if (n <= 0) {
                        if (n == 0)
                                f->saw_eof = true;
                        return NULL;
                }
                f->len += (size_t) n;
        }
}

static Mb__Msg *fake_expect(struct fake *f, Mb__Msg__BodyCase what) {
        Mb__Msg *m = fake_recv(f);

        if (!m || m->body_case != what) {
                fake_fail(f, "client sent something else than expected");
                if (m)
                        mb__msg__free_unpacked(m, NULL);
                return NULL;
        }
        return m;
}

static void fake_send(struct fake *f, const Mb__Msg *m, const int *fds, size_t nfds) {
        union {
                struct cmsghdr align;
                uint8_t buf[CMSG_SPACE(sizeof(int) * 2)];
        } control = {};
        uint8_t *frame;
        size_t len;
        struct iovec iov;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (wire_frame_pack(m, &frame, &len) < 0) {
                fake_fail(f, "cannot pack");
                return;
        }
        iov = (struct iovec) { .iov_base = frame, .iov_len = len };
        if (nfds > 0) {
                struct cmsghdr *cm;

                mh.msg_control = &control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
                cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
                memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
        }
        if (sendmsg(f->fd, &mh, MSG_NOSIGNAL) != (ssize_t) len)
                fake_fail(f, "short send");
        free(frame);
}

static void fake_welcome(struct fake *f) {
        Mb__Msg *hello = fake_expect(f, MB__MSG__BODY_HELLO);
        Mb__Welcome w = MB__WELCOME__INIT;
        Mb__Msg m = MB__MSG__INIT;
        unsigned nslots = (unsigned) sysconf(_SC_NPROCESSORS_CONF);
        size_t stats_bytes = mb_stats_region_bytes(nslots);
        struct mb_stats_region *region;
        int fds[2];

        if (!hello)
                return;
        snprintf(f->hello_tenant, sizeof(f->hello_tenant), "%s", hello->hello->tenant);
        snprintf(f->hello_name, sizeof(f->hello_name), "%s",
                 hello->hello->client_name ? hello->hello->client_name : "");
        f->hello_version = hello->hello->version;
        mb__msg__free_unpacked(hello, NULL);

        fds[0] = memfd_create("fake-arena", MFD_CLOEXEC);
        fds[1] = memfd_create("fake-stats", MFD_CLOEXEC);
        if (fds[0] < 0 || fds[1] < 0 || ftruncate(fds[0], (off_t) FAKE_ARENA_PAGES * FAKE_PAGE_BYTES) < 0 ||
            ftruncate(fds[1], (off_t) stats_bytes) < 0) {
                fake_fail(f, "memfd");
                return;
        }
        region = mmap(NULL, stats_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
        if (region == MAP_FAILED) {
                fake_fail(f, "mmap");
                return;
        }
        region->magic = MB_STATS_MAGIC;
        region->version = MB_STATS_VERSION;
        region->nslots = nslots;
        region->nitems = _MB_STAT_NR;
        munmap(region, stats_bytes);

        w.version = WIRE_PROTOCOL_VERSION;
        w.tenant = (char *) "fake/tenant";
        w.page_size = FAKE_PAGE_BYTES;
        w.charge_batch = f->batch;
        w.arena_pages = FAKE_ARENA_PAGES;
        w.stats_slots = nslots;
        w.client_id = 42;
        m.body_case = MB__MSG__BODY_WELCOME;
        m.welcome = &w;
        fake_send(f, &m, fds, f->send_fds ? 2 : 0);
        close(fds[0]);
        close(fds[1]);
}

/* Answer one Charge with the next pages of the arena. */
/* Answer the next Charge with a Grant of all its pages, or (@need_only)
 * only the pages it says it needs. */
static void fake_grant_pages(struct fake *f, bool need_only) {
        Mb__Msg *c = fake_expect(f, MB__MSG__BODY_CHARGE);
        Mb__Grant g = MB__GRANT__INIT;
        Mb__Extent e = MB__EXTENT__INIT, *ep = &e;
        Mb__Msg m = MB__MSG__INIT;

        if (!c)
                return;
        e.start = f->next_page;
        e.count = need_only && c->charge->has_need ? c->charge->need : c->charge->pages;
        f->next_page += e.count;
        g.seq = c->charge->seq;
        g.n_extents = 1;
        g.extents = &ep;
        m.body_case = MB__MSG__BODY_GRANT;
        m.grant = &g;
        fake_send(f, &m, NULL, 0);
        mb__msg__free_unpacked(c, NULL);
}

static void fake_grant(struct fake *f) {
        fake_grant_pages(f, false);
}

static void fake_error(struct fake *f, bool has_seq, uint32_t seq, int code, const char *reason) {
        Mb__Error e = MB__ERROR__INIT;
        Mb__Msg m = MB__MSG__INIT;

        e.has_seq = has_seq;
        e.seq = seq;
        e.code = code;
        e.reason = (char *) reason;
        m.body_case = MB__MSG__BODY_ERROR;
        m.error = &e;
        fake_send(f, &m, NULL, 0);
}

static void fake_ack(struct fake *f, uint32_t seq, uint64_t pages) {
        Mb__Ack a = MB__ACK__INIT;
        Mb__Msg m = MB__MSG__INIT;

        a.seq = seq;
        a.pages = pages;
        m.body_case = MB__MSG__BODY_ACK;
        m.ack = &a;
        fake_send(f, &m, NULL, 0);
}

static uint64_t extents_pages(const Mb__Uncharge *u) {
        uint64_t n = 0;

        for (size_t i = 0; i < u->n_extents; i++)
                n += u->extents[i]->count;
        return n;
}

/* Read the client's messages until EOF, acking Uncharges. */
static void fake_drain_until_eof(struct fake *f) {
        Mb__Msg *m;

        while ((m = fake_recv(f))) {
                if (m->body_case == MB__MSG__BODY_UNCHARGE)
                        fake_ack(f, m->uncharge->seq, extents_pages(m->uncharge));
                mb__msg__free_unpacked(m, NULL);
        }
}

static void *fake_run(void *userdata) {
        struct fake *f = userdata;

        f->fd = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (f->fd < 0) {
                fake_fail(f, "accept");
                return NULL;
        }
        fake_welcome(f);
        f->script(f);
        close(f->fd);
        return NULL;
}

static struct fake *fake_start(void (*script)(struct fake *f), unsigned batch) {
        struct fake *f = calloc(1, sizeof(*f));
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        ck_assert_ptr_nonnull(f);
        f->script = script;
        f->batch = batch;
        f->send_fds = true;
        sem_init(&f->go, 0, 0);
        snprintf(f->dir, sizeof(f->dir), "/tmp/mbproto.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(f->dir));
        snprintf(f->path, sizeof(f->path), "%s/sock", f->dir);
        ck_assert_uint_lt(strlen(f->path), sizeof(sa.sun_path));
        memcpy(sa.sun_path, f->path, strlen(f->path) + 1);
        f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(f->listen_fd, 0);
        ck_assert_int_eq(bind(f->listen_fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(f->listen_fd, 4), 0);
        ck_assert_int_eq(pthread_create(&f->thread, NULL, fake_run, f), 0);
        return f;
}

/* Join the fake and check it was content. */
static void fake_finish(struct fake *f) {
        ck_assert_int_eq(pthread_join(f->thread, NULL), 0);
        close(f->listen_fd);
        unlink(f->path);
        rmdir(f->dir);
        ck_assert_msg(!f->failed, "fake daemon: %s", f->failed);
}

static mb_client *connect_fake(struct fake *f) {
        mb_client *c = NULL;
        int r = mb_connect_ex(f->path, NULL, MB_CONNECT_NO_THREAD, &c);

        ck_assert_msg(r == 0, "mb_connect: %d %s", r, mb_last_error());
        return c;
}

/* Call mb_process() until it handled @n messages (or 10 s passed). */
static void process_n(mb_client *c, int n) {
        int done = 0;

        for (int i = 0; i < 1000 && done < n; i++) {
                struct pollfd p = { .fd = mb_get_fd(c), .events = POLLIN };
                int r;

                (void) poll(&p, 1, 10);
                r = mb_process(c);
                ck_assert_msg(r >= 0, "mb_process: %d %s", r, mb_last_error());
                done += r;
        }
        ck_assert_int_ge(done, n);
}

static int64_t stat_sum(const mb_client *c, enum mb_stat_item item) {
        const struct mb_stats_region *r = mb_client_stats_region(c);
        int64_t sum = 0;

        for (uint32_t i = 0; i < r->nslots; i++)
                sum += r->slot[i].v[item];
        return sum;
}

static void pin_here(void) {
        cpu_set_t set;
        int cpu = sched_getcpu();

        CPU_ZERO(&set);
        CPU_SET(cpu < 0 ? 0 : cpu, &set);
        ck_assert_int_eq(sched_setaffinity(0, sizeof(set), &set), 0);
}

/* ---- Hello ---- */

static void script_hello_only(struct fake *f) {
        fake_drain_until_eof(f);
}

START_TEST(test_hello) {
        struct fake *f = fake_start(script_hello_only, 4);
        mb_client *c = connect_fake(f);

        ck_assert_str_eq(mb_tenant_path(c), "fake/tenant");
        ck_assert_uint_eq(mb_page_size(c), FAKE_PAGE_BYTES);
        ck_assert_uint_eq(mb_charge_batch(c), 4);
        ck_assert_uint_eq(mb_client_id(c), 42);
        mb_close(c);
        fake_finish(f);
        ck_assert_str_eq(f->hello_tenant, "auto");
        ck_assert_str_eq(f->hello_name, program_invocation_short_name);
        ck_assert_uint_eq(f->hello_version, WIRE_PROTOCOL_VERSION);
        /* mb_close() half-closes and waits for the daemon. */
        ck_assert(f->saw_eof);
        free(f);
}
END_TEST

START_TEST(test_welcome_without_fds) {
        struct fake *f = fake_start(script_hello_only, 4);
        mb_client *c = NULL;

        f->send_fds = false;
        ck_assert_int_eq(mb_connect(f->path, "x", &c), -EPROTO);
        ck_assert_ptr_nonnull(strstr(mb_last_error(), "descriptors"));
        fake_finish(f);
        free(f);
}
END_TEST

/* ---- Reclaim, Drain, Event ---- */

static void script_reclaim(struct fake *f) {
        Mb__Reclaim rc = MB__RECLAIM__INIT;
        Mb__Msg m = MB__MSG__INIT, *u;

        fake_grant(f);
        sem_wait(&f->go); /* the client freed its page: 4 in the stock */
        rc.seq = 77;
        rc.pages = 3;
        m.body_case = MB__MSG__BODY_RECLAIM;
        m.reclaim = &rc;
        fake_send(f, &m, NULL, 0);
        u = fake_expect(f, MB__MSG__BODY_UNCHARGE);
        if (u) {
                f->reply_to = u->uncharge->has_reply_to ? u->uncharge->reply_to : 0;
                f->reason = u->uncharge->reason;
                f->reply_pages = extents_pages(u->uncharge);
                for (size_t i = 0; i < u->uncharge->n_extents; i++)
                        if (u->uncharge->extents[i]->start + u->uncharge->extents[i]->count > 4)
                                fake_fail(f, "reclaimed a page that was never granted");
                fake_ack(f, u->uncharge->seq, f->reply_pages);
                mb__msg__free_unpacked(u, NULL);
        }
        fake_drain_until_eof(f);
}

START_TEST(test_reclaim_answered_from_stock) {
        struct fake *f;
        mb_client *c;
        void *p;

        pin_here();
        f = fake_start(script_reclaim, 4);
        c = connect_fake(f);
        p = mb_page_alloc(c);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(mb_page_free(c, p), 0);
        ck_assert_int_eq(stat_sum(c, MB_STAT_STOCK), 4);
        sem_post(&f->go);
        process_n(c, 1);
        ck_assert_int_eq(stat_sum(c, MB_STAT_STOCK), 1);
        mb_close(c);
        fake_finish(f);
        ck_assert_uint_eq(f->reply_to, 77);
        ck_assert_int_eq(f->reason, MB__UNCHARGE_REASON__UNCHARGE_RECLAIM);
        ck_assert_uint_eq(f->reply_pages, 3);
        free(f);
}
END_TEST

/* The return of an overfull stock does not wait for its Ack (a free never
 * waits for the daemon); a Drain that arrives meanwhile is answered by the
 * next mb_process(), from what the stocks hold then. */
static void script_drain_inline(struct fake *f) {
        Mb__Drain d = MB__DRAIN__INIT;
        Mb__Msg m = MB__MSG__INIT, *u, *r;

        fake_grant(f); /* bulk 12 */
        u = fake_expect(f, MB__MSG__BODY_UNCHARGE); /* the overfull stock */
        if (!u)
                return;
        f->first_uncharge_extents = u->uncharge->n_extents;
        f->uncharged_pages = extents_pages(u->uncharge);
        d.seq = 9;
        m.body_case = MB__MSG__BODY_DRAIN;
        m.drain = &d;
        fake_send(f, &m, NULL, 0);
        r = fake_expect(f, MB__MSG__BODY_UNCHARGE);
        if (r) {
                f->reply_to = r->uncharge->has_reply_to ? r->uncharge->reply_to : 0;
                f->reason = r->uncharge->reason;
                f->reply_pages = extents_pages(r->uncharge);
        }
        fake_ack(f, u->uncharge->seq, f->uncharged_pages);
        if (r)
                fake_ack(f, r->uncharge->seq, f->reply_pages);
        mb__msg__free_unpacked(u, NULL);
        if (r)
                mb__msg__free_unpacked(r, NULL);
        fake_drain_until_eof(f);
}

START_TEST(test_drain_inline) {
        struct fake *f;
        mb_client *c;
        void *pages[12];

        pin_here();
        f = fake_start(script_drain_inline, 4);
        c = connect_fake(f);
        ck_assert_int_eq(mb_page_alloc_bulk(c, pages, 12), 0);
        /* 8 fit the stock (2 * batch); the 9th sends one batch back. */
        for (int i = 0; i < 9; i++)
                ck_assert_int_eq(mb_page_free(c, pages[i]), 0);
        ck_assert_int_eq(stat_sum(c, MB_STAT_STOCK), 5);
        ck_assert_int_eq(stat_sum(c, MB_STAT_PAGES), 3);
        ck_assert_int_eq(stat_sum(c, MB_STAT_PGFREE), 9);
        process_n(c, 1); /* the Drain, answered from the stock */
        ck_assert_int_eq(stat_sum(c, MB_STAT_STOCK), 0);
        process_n(c, 2); /* the two Acks, dropped */
        mb_close(c);
        fake_finish(f);
        /* The coldest batch went back, coalesced into one extent. */
        ck_assert_uint_eq(f->uncharged_pages, 4);
        ck_assert_uint_eq(f->first_uncharge_extents, 1);
        ck_assert_uint_eq(f->reply_to, 9);
        ck_assert_int_eq(f->reason, MB__UNCHARGE_REASON__UNCHARGE_DRAIN);
        ck_assert_uint_eq(f->reply_pages, 5);
        free(f);
}
END_TEST

static void script_event(struct fake *f) {
        Mb__Event e = MB__EVENT__INIT;
        Mb__Msg m = MB__MSG__INIT;

        sem_wait(&f->go);
        e.event = (char *) "high";
        e.count = 3;
        m.body_case = MB__MSG__BODY_EVENT;
        m.event = &e;
        fake_send(f, &m, NULL, 0);
        fake_drain_until_eof(f);
}

struct seen_event {
        char name[16];
        uint64_t count;
        size_t page_size;
        int calls;
};

static void on_event(mb_client *c, const char *event, uint64_t count, void *userdata) {
        struct seen_event *s = userdata;

        snprintf(s->name, sizeof(s->name), "%s", event);
        s->count = count;
        s->page_size = mb_page_size(c); /* callbacks may call the library */
        s->calls++;
}

START_TEST(test_event_callback) {
        struct fake *f = fake_start(script_event, 4);
        mb_client *c = connect_fake(f);
        struct seen_event seen = {};

        ck_assert_int_eq(mb_set_event_callback(c, on_event, &seen), 0);
        sem_post(&f->go);
        process_n(c, 1);
        ck_assert_int_eq(seen.calls, 1);
        ck_assert_str_eq(seen.name, "high");
        ck_assert_uint_eq(seen.count, 3);
        ck_assert_uint_eq(seen.page_size, FAKE_PAGE_BYTES);
        mb_close(c);
        fake_finish(f);
        free(f);
}
END_TEST

/* ---- errors ---- */

static void script_enomem_then_grant(struct fake *f) {
        /* One Charge: a batch that needs one page (the daemon falls back
         * to the need, as try_charge does); no second try by the client. */
        Mb__Msg *c = fake_expect(f, MB__MSG__BODY_CHARGE);

        if (!c)
                return;
        if (c->charge->pages != f->batch || !c->charge->has_need || c->charge->need != 1)
                fake_fail(f, "unexpected charge size");
        fake_error(f, true, c->charge->seq, ENOMEM, "charge to fake/tenant failed: fake at max");
        mb__msg__free_unpacked(c, NULL);
        /* What the daemon does when the batch does not fit but the need
         * does: a Grant of the need only. */
        fake_grant_pages(f, true);
        fake_drain_until_eof(f);
}

START_TEST(test_enomem_keeps_session) {
        struct fake *f = fake_start(script_enomem_then_grant, 4);
        mb_client *c = connect_fake(f);

        errno = 0;
        ck_assert_ptr_null(mb_page_alloc(c));
        ck_assert_int_eq(errno, ENOMEM);
        ck_assert_str_eq(mb_last_error(), "charge to fake/tenant failed: fake at max");
        ck_assert_ptr_nonnull(mb_page_alloc(c));
        mb_close(c);
        fake_finish(f);
        free(f);
}
END_TEST

static void script_fatal_error(struct fake *f) {
        fake_grant(f);
        Mb__Msg *c = fake_expect(f, MB__MSG__BODY_CHARGE);

        if (c) {
                fake_error(f, false, 0, EPROTO, "unexpected message from a fake client");
                mb__msg__free_unpacked(c, NULL);
        }
}

START_TEST(test_fatal_error_ends_session) {
        struct fake *f;
        mb_client *c;
        void *pages[4], *p;

        pin_here();
        f = fake_start(script_fatal_error, 4);
        c = connect_fake(f);
        ck_assert_int_eq(mb_page_alloc_bulk(c, pages, 4), 0);
        errno = 0;
        ck_assert_ptr_null(mb_page_alloc(c));
        ck_assert_int_eq(errno, EPROTO);
        ck_assert_str_eq(mb_last_error(), "unexpected message from a fake client");
        /* The session is gone: the stock is empty and stays so. */
        ck_assert_int_eq(mb_page_free(c, pages[0]), -EPROTO);
        ck_assert_ptr_nonnull(strstr(mb_last_error(), "lost"));
        ck_assert_ptr_nonnull(strstr(mb_last_error(), "unexpected message from a fake client"));
        p = mb_page_alloc(c);
        ck_assert_ptr_null(p);
        ck_assert_int_eq(mb_process(c), -EPROTO);
        mb_close(c);
        fake_finish(f);
        free(f);
}
END_TEST

static void script_bad_grant(struct fake *f) {
        Mb__Msg *c = fake_expect(f, MB__MSG__BODY_CHARGE);
        Mb__Grant g = MB__GRANT__INIT;
        Mb__Extent e = MB__EXTENT__INIT, *ep = &e;
        Mb__Msg m = MB__MSG__INIT;

        if (!c)
                return;
        e.start = FAKE_ARENA_PAGES - 1; /* runs past the arena */
        e.count = c->charge->pages;
        g.seq = c->charge->seq;
        g.n_extents = 1;
        g.extents = &ep;
        m.body_case = MB__MSG__BODY_GRANT;
        m.grant = &g;
        fake_send(f, &m, NULL, 0);
        mb__msg__free_unpacked(c, NULL);
        fake_drain_until_eof(f);
}

START_TEST(test_grant_outside_arena) {
        struct fake *f = fake_start(script_bad_grant, 4);
        mb_client *c = connect_fake(f);

        errno = 0;
        ck_assert_ptr_null(mb_page_alloc(c));
        ck_assert_int_eq(errno, EPROTO);
        ck_assert_ptr_nonnull(strstr(mb_last_error(), "protocol error"));
        mb_close(c);
        fake_finish(f);
        free(f);
}
END_TEST

static void script_hang_up(struct fake *f) {
        (void) f;
}

START_TEST(test_daemon_gone) {
        struct fake *f = fake_start(script_hang_up, 4);
        mb_client *c = connect_fake(f);

        fake_finish(f);
        errno = 0;
        ck_assert_ptr_null(mb_page_alloc(c));
        ck_assert_int_eq(errno, ECONNRESET);
        ck_assert_ptr_nonnull(strstr(mb_last_error(), "closed the connection"));
        mb_close(c);
        free(f);
}
END_TEST

static Suite *proto_suite(void) {
        Suite *s = suite_create("client-proto");
        TCase *tc = tcase_create("proto");

        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_hello);
        tcase_add_test(tc, test_welcome_without_fds);
        tcase_add_test(tc, test_reclaim_answered_from_stock);
        tcase_add_test(tc, test_drain_inline);
        tcase_add_test(tc, test_event_callback);
        tcase_add_test(tc, test_enomem_keeps_session);
        tcase_add_test(tc, test_fatal_error_ends_session);
        tcase_add_test(tc, test_grant_outside_arena);
        tcase_add_test(tc, test_daemon_gone);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(proto_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
