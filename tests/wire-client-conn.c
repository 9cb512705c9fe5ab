/* SPDX-License-Identifier: MIT */
/*
 * wire-client-conn.c - the steps of tests/wire-client that work on
 * connections rather than on frames of the session: handing the session to
 * another process, a frame trickled byte by byte, and floods of
 * connections, idle, half a frame each, or each with a Hello, and
 * sessions that never read their replies (see wire-client.c for what each
 * step prints).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "wire.h"
#include "wire-client.h"

static int *flood;
static size_t nflood;

void step_handoff(const char *pidfile) {
        pid_t parent = getpid(), pid;
        FILE *f;

        fflush(stdout);
        pid = fork();
        if (pid < 0)
                die("fork");
        if (pid > 0)
                _exit(0); /* the opener goes; its pages stay with the socket */
        f = fopen(pidfile, "we");
        if (!f)
                die("pidfile");
        fprintf(f, "%d\n", (int) getpid());
        fclose(f);
        while (getppid() == parent)
                usleep(10 * 1000);
        printf("handed off to pid %d\n", (int) getpid());
}

void step_trickle(uint32_t n, unsigned ms) {
        uint32_t be = htonl(n), sent = 0;

        write_all(&be, sizeof(be));
        for (; sent < n; sent++) {
                uint8_t b = 0;
                struct pollfd p = { .fd = sock, .events = POLLRDHUP };

                /* The daemon closed it (after its Error): stop there. */
                if (poll(&p, 1, (int) ms) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                        break;
                if (send(sock, &b, 1, MSG_NOSIGNAL) != 1)
                        break;
        }
        printf("trickle closed after %u bytes\n", sent);
}

void step_flood(unsigned n) {
        unsigned failed = 0;

        flood = realloc(flood, (nflood + n) * sizeof(int));
        if (!flood)
                die("realloc");
        for (unsigned i = 0; i < n; i++) {
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

                if (fd < 0) {
                        fprintf(stderr, "wire-client: flood: socket: %s\n", strerror(errno));
                        failed += n - i;
                        break;
                }
                if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                        failed++;
                        close(fd);
                        continue;
                }
                flood[nflood++] = fd;
        }
        printf("flood opened=%u failed=%u\n", n - failed, failed);
}

void step_flood_hello(const char *tenant) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Hello hello = MB__HELLO__INIT;
        uint8_t *buf;
        size_t len;

        hello.version = WIRE_PROTOCOL_VERSION;
        hello.tenant = (char *) tenant;
        hello.client_name = (char *) "flood";
        msg.body_case = MB__MSG__BODY_HELLO;
        msg.hello = &hello;
        if (wire_frame_pack(&msg, &buf, &len) < 0)
                die("pack");
        for (size_t i = 0; i < nflood; i++)
                (void) send(flood[i], buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        free(buf);
}

void step_flood_partial(void) {
        /* A frame that announces 100 bytes and brings 2 of them. */
        static const uint8_t part[] = { 0, 0, 0, 100, 0x0a, 0x0b };

        for (size_t i = 0; i < nflood; i++)
                (void) send(flood[i], part, sizeof(part), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* A frame of @msg, packed, or die. */
static uint8_t *pack_or_die(const Mb__Msg *msg, size_t *ret_len) {
        uint8_t *buf;

        if (wire_frame_pack(msg, &buf, ret_len) < 0)
                die("pack");
        return buf;
}

/* A session that said Hello in *@p (fd -1 when refused); 1 or 0. */
static unsigned noread_open(struct pollfd *p, const uint8_t *hello, size_t len) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        *p = (struct pollfd) { .fd = -1 };
        if (fd < 0)
                die("socket");
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            send(fd, hello, len, MSG_NOSIGNAL) != (ssize_t) len) {
                close(fd);
                return 0;
        }
        (void) fcntl(fd, F_SETFL, O_NONBLOCK);
        *p = (struct pollfd) { .fd = fd, .events = POLLOUT };
        return 1;
}

void step_noread(unsigned n, const char *tenant, unsigned seconds) {
        Mb__Msg hmsg = MB__MSG__INIT, cmsg = MB__MSG__INIT, umsg = MB__MSG__INIT;
        Mb__Hello hello = MB__HELLO__INIT;
        Mb__Charge charge = MB__CHARGE__INIT;
        Mb__Uncharge uncharge = MB__UNCHARGE__INIT;
        uint8_t *hbuf, *req;
        size_t hlen, clen, ulen, rlen;
        struct pollfd *p = calloc(n, sizeof(*p));
        uint64_t sent = 0;
        unsigned closed = 0, opened = 0;
        time_t end;

        if (!p)
                die("calloc");
        hello.version = WIRE_PROTOCOL_VERSION;
        hello.tenant = (char *) tenant;
        hello.client_name = (char *) "noread";
        hmsg.body_case = MB__MSG__BODY_HELLO;
        hmsg.hello = &hello;
        hbuf = pack_or_die(&hmsg, &hlen);
        /* One Charge of a page and three empty Uncharges, as one write. */
        charge.seq = 1;
        charge.pages = 1;
        cmsg.body_case = MB__MSG__BODY_CHARGE;
        cmsg.charge = &charge;
        uncharge.seq = 2;
        umsg.body_case = MB__MSG__BODY_UNCHARGE;
        umsg.uncharge = &uncharge;
        {
                uint8_t *c = pack_or_die(&cmsg, &clen), *u = pack_or_die(&umsg, &ulen);

                rlen = clen + 3 * ulen;
                req = malloc(rlen);
                if (!req)
                        die("malloc");
                memcpy(req, c, clen);
                for (unsigned k = 0; k < 3; k++)
                        memcpy(req + clen + k * ulen, u, ulen);
                free(c);
                free(u);
        }
        for (unsigned i = 0; i < n; i++)
                opened += noread_open(&p[i], hbuf, hlen);
        printf("noread opened=%u\n", opened);
        end = time(NULL) + (time_t) seconds;
        while (time(NULL) < end && !stop) {
                for (unsigned i = 0; i < n; i++) {
                        if (p[i].fd < 0 || !(p[i].revents & (POLLOUT | POLLERR | POLLHUP)))
                                continue;
                        for (;;) {
                                ssize_t k = send(p[i].fd, req, rlen, MSG_NOSIGNAL | MSG_DONTWAIT);

                                if (k > 0) {
                                        sent += (uint64_t) k;
                                        if ((size_t) k == rlen)
                                                continue;
                                        break;
                                }
                                if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                                        break;
                                /* Cut by the daemon: again, at once. */
                                close(p[i].fd);
                                closed++;
                                opened += noread_open(&p[i], hbuf, hlen);
                                break;
                        }
                }
                (void) poll(p, n, 100);
        }
        printf("noread sessions=%u sent=%" PRIu64 " closed=%u\n", opened, sent, closed);
        for (unsigned i = 0; i < n; i++)
                if (p[i].fd >= 0)
                        close(p[i].fd);
        free(p);
        free(req);
        free(hbuf);
}

static size_t flood_closed(void) {
        size_t closed = 0;

        for (size_t i = 0; i < nflood; i++) {
                struct pollfd p = { .fd = flood[i], .events = POLLRDHUP };

                if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                        closed++;
        }
        return closed;
}

/* Count once the daemon is done: no change for 2 s with at most MAX open,
 * or no change for 10 s whatever the count (a daemon held up on a loaded
 * host has not closed its share yet; one that keeps too many is reported
 * 10 s later), and at most 10 minutes in all. */
void step_flood_count(size_t max) {
        size_t closed = flood_closed(), prev = closed;
        time_t deadline = time(NULL) + 600, since = time(NULL);

        while (time(NULL) < deadline && !stop) {
                sleep(1);
                closed = flood_closed();
                if (closed != prev) {
                        prev = closed;
                        since = time(NULL);
                        continue;
                }
                if (time(NULL) - since >= (nflood - closed <= max ? 2 : 10))
                        break;
        }
        printf("flood open=%zu closed=%zu\n", nflood - closed, closed);
}
