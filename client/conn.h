/* SPDX-License-Identifier: MIT */
/*
 * conn.h - the library's end of a membrokerd connection: a Unix stream
 * socket carrying membroker.proto frames (proto/wire.h), file descriptors
 * received with SCM_RIGHTS.  Pure transport: no knowledge of stocks or
 * sessions.  Not thread-safe; the caller serialises (client.c holds its
 * connection mutex around every call).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

struct conn {
        int fd;
        uint8_t *rbuf;            /* received bytes not yet parsed */
        size_t rlen;
        size_t rcap;
        int fds[WIRE_MAX_FDS];    /* descriptors received and not yet taken */
        size_t nfds;
};

/**
 * conn_open - connect to the broker socket at @path.  Returns 0 and *@ret,
 * -ENAMETOOLONG for a path that does not fit sun_path, -ECONNREFUSED when
 * nothing listens there (also for a missing socket file), or another -errno.
 */
int conn_open(const char *path, struct conn **ret);

/* Close the socket and every descriptor still stashed; NULL is a no-op. */
void conn_free(struct conn *c);

/**
 * conn_send - send @msg as one frame, all of it (retrying short writes and
 * EINTR).  -ECONNRESET when the daemon closed the connection, -EMSGSIZE
 * when the message exceeds WIRE_MAX_FRAME_BYTES.
 */
int conn_send(struct conn *c, const Mb__Msg *msg);

/**
 * conn_recv - the next frame from the daemon.  With @block false returns
 * -EAGAIN when no complete frame is available yet.  -ECONNRESET at EOF,
 * -EPROTO (with @ret_reason) for an undecodable or oversized frame.
 * Descriptors that arrive are stashed; take them with conn_take_fds().
 * On success *@ret is freed with mb__msg__free_unpacked(*ret, NULL).
 */
int conn_recv(struct conn *c, bool block, Mb__Msg **ret);

/**
 * conn_take_fds - move exactly @n stashed descriptors into @ret (in arrival
 * order).  -EBADMSG when a different number arrived (all are closed then).
 */
int conn_take_fds(struct conn *c, int *ret, size_t n);

/* True when a whole frame waits in the receive buffer (conn_recv() would
 * return it without reading the socket). */
bool conn_has_frame(const struct conn *c);

/* Close every stashed descriptor (they arrived with a frame that takes none). */
void conn_close_fds(struct conn *c);
