/* SPDX-License-Identifier: MIT */
/*
 * conn.c - socket transport of libmembroker (see wire_conn.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "session/wire_conn.h"
#include "macros.h"
#include "core/mb_internal.h"

/* Room for one frame of the largest size plus what follows it. */
#define CONN_RBUF_BYTES (WIRE_HEADER_BYTES + WIRE_MAX_FRAME_BYTES + 4096u)

int wire_conn_open(const char *path, struct wire_conn **ret) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_(closep) int fd = -1;
        struct wire_conn *c;
        size_t len = strlen(path);

        if (len == 0 || len >= sizeof(sa.sun_path)) {
                mb_set_error("socket path '%s' does not fit a Unix socket address", path);
                return -ENAMETOOLONG;
        }
        memcpy(sa.sun_path, path, len + 1);

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                int r = negative_errno();
                mb_set_error("cannot create a socket: %s", strerror(-r));
                return r;
        }
        while (connect(fd, (const struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = negative_errno();

                if (r == -EINTR)
                        continue;
                mb_set_error("cannot connect to membrokerd at %s: %s", path, strerror(-r));
                /* A missing socket file means the same as nobody listening. */
                return r == -ENOENT ? -ECONNREFUSED : r;
        }

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->rbuf = malloc(CONN_RBUF_BYTES);
        if (!c->rbuf) {
                free(c);
                return -ENOMEM;
        }
        c->rcap = CONN_RBUF_BYTES;
        c->fd = TAKE_FD(fd);
        *ret = c;
        return 0;
}

void wire_conn_close_fds(struct wire_conn *c) {
        for (size_t i = 0; i < c->nfds; i++)
                close(c->fds[i]);
        c->nfds = 0;
}

void wire_conn_free(struct wire_conn *c) {
        if (!c)
                return;
        wire_conn_close_fds(c);
        if (c->fd >= 0)
                close(c->fd);
        free(c->rbuf);
        free(c);
}

int wire_conn_send(struct wire_conn *c, const Mb__Msg *msg) {
        _cleanup_(freep) uint8_t *buf = NULL;
        size_t len, off = 0;
        int r;

        r = wire_frame_pack(msg, &buf, &len);
        if (r < 0) {
                mb_set_error("cannot pack a %s message: %s", wire_msg_name(msg), strerror(-r));
                return r;
        }
        while (off < len) {
                ssize_t n = send(c->fd, buf + off, len - off, MSG_NOSIGNAL);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = negative_errno();
                        if (r == -EPIPE || r == -ECONNRESET) {
                                mb_set_error("membrokerd closed the connection");
                                return -ECONNRESET;
                        }
                        mb_set_error("cannot send to membrokerd: %s", strerror(-r));
                        return r;
                }
                off += (size_t) n;
        }
        return 0;
}

/* Keep the descriptors of one SCM_RIGHTS message; more than fit are closed
 * and make the stash invalid (wire_conn_take_fds() then fails). */
static void wire_conn_stash_fds(struct wire_conn *c, struct msghdr *mh) {
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
                size_t n;
                int fds[WIRE_MAX_FDS * 2];

                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                n = MB_MIN(n, ELEMENTSOF(fds));
                memcpy(fds, CMSG_DATA(cm), n * sizeof(int));
                for (size_t i = 0; i < n; i++) {
                        if (c->nfds < WIRE_MAX_FDS)
                                c->fds[c->nfds++] = fds[i];
                        else
                                close(fds[i]);
                }
        }
}

/* Read what the socket has (at least one byte when @block). */
static int wire_conn_fill(struct wire_conn *c, bool block) {
        union {
                struct cmsghdr align;
                uint8_t buf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
        } control;
        struct iovec iov = { .iov_base = c->rbuf + c->rlen, .iov_len = c->rcap - c->rlen };
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = &control,
                .msg_controllen = sizeof(control),
        };
        ssize_t n;

        if (iov.iov_len == 0)
                return -ENOBUFS; /* cannot happen: a frame fits rbuf */
        for (;;) {
                n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC | (block ? 0 : MSG_DONTWAIT));
                if (n >= 0)
                        break;
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                        return -EAGAIN;
                n = -errno;
                mb_set_error("cannot read from membrokerd: %s", strerror((int) -n));
                return (int) n;
        }
        if (mh.msg_controllen > 0)
                wire_conn_stash_fds(c, &mh);
        if (mh.msg_flags & MSG_CTRUNC) {
                /* Descriptors were lost: the session cannot be trusted. */
                mb_set_error("membrokerd sent more file descriptors than expected");
                return -EPROTO;
        }
        if (n == 0) {
                mb_set_error("membrokerd closed the connection");
                return -ECONNRESET;
        }
        c->rlen += (size_t) n;
        return 0;
}

int wire_conn_recv(struct wire_conn *c, bool block, Mb__Msg **ret) {
        for (;;) {
                size_t used;
                int r;

                if (c->rlen > 0) {
                        r = wire_frame_parse(c->rbuf, c->rlen, &used, ret);
                        if (r == 0) {
                                memmove(c->rbuf, c->rbuf + used, c->rlen - used);
                                c->rlen -= used;
                                return 0;
                        }
                        if (r != -EAGAIN) {
                                mb_set_error("membrokerd sent an invalid frame: %s", strerror(-r));
                                return -EPROTO;
                        }
                }
                r = wire_conn_fill(c, block);
                if (r < 0)
                        return r;
        }
}

int wire_conn_take_fds(struct wire_conn *c, int *ret, size_t n) {
        if (c->nfds != n) {
                wire_conn_close_fds(c);
                return -EBADMSG;
        }
        memcpy(ret, c->fds, n * sizeof(int));
        c->nfds = 0;
        return 0;
}

bool wire_conn_has_frame(const struct wire_conn *c) {
        uint32_t payload;

        return wire_frame_length(c->rbuf, c->rlen, &payload) == 0 && c->rlen >= WIRE_HEADER_BYTES + payload;
}
