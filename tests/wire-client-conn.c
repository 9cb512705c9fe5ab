/* SPDX-License-Identifier: MIT */
/*
 * wire-client-conn.c - the steps of tests/wire-client that work on
 * connections rather than on frames of the session: handing the session to
 * another process, a frame trickled byte by byte, and floods of
 * connections, idle, half a frame each, or each with a Hello (see
 * wire-client.c for what each step prints).
 */
#include <arpa/inet.h>
#include <errno.h>
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
