/* SPDX-License-Identifier: MIT */
/*
 * wire_conn.h - the library's end of a membrokerd connection: a Unix stream
 * socket carrying membroker.proto frames (proto/wire.h), file descriptors
 * received with SCM_RIGHTS.  Pure transport: no knowledge of stocks or
 * sessions.  Named apart from the daemon's struct conn (daemon/conn/conn.h), its
 * other end.  Not thread-safe; the caller serialises (session.c sends under
 * send_lock and reads only as the session's single reader).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

struct wire_conn {
        int fd;
        uint8_t *rbuf;            /* received bytes not yet parsed */
        size_t rlen;
        size_t rcap;
        int fds[WIRE_MAX_FDS];    /* descriptors received and not yet taken */
        size_t nfds;
};

/**
 * wire_conn_open - connect to the broker socket at @path.  Returns 0 and *@ret,
 * -ENAMETOOLONG for a path that does not fit sun_path, -ECONNREFUSED when
 * nothing listens there (also for a missing socket file), or another -errno.
 */
int wire_conn_open(const char *path, struct wire_conn **ret);

/* Close the socket and every descriptor still stashed; NULL is a no-op. */
void wire_conn_free(struct wire_conn *c);

static inline void wire_conn_freep(struct wire_conn **c) {
        wire_conn_free(*c);
}

/**
 * wire_conn_send - send @msg as one frame, all of it (retrying short writes and
 * EINTR).  -ECONNRESET when the daemon closed the connection, -EMSGSIZE
 * when the message exceeds WIRE_MAX_FRAME_BYTES.
 */
int wire_conn_send(struct wire_conn *c, const Mb__Msg *msg);

/**
 * wire_conn_recv - the next frame from the daemon.  With @block false returns
 * -EAGAIN when no complete frame is available yet.  -ECONNRESET at EOF,
 * -EPROTO (with @ret_reason) for an undecodable or oversized frame.
 * Descriptors that arrive are stashed; take them with wire_conn_take_fds().
 * On success *@ret is freed with mb__msg__free_unpacked(*ret, NULL).
 */
int wire_conn_recv(struct wire_conn *c, bool block, Mb__Msg **ret);

/**
 * wire_conn_take_fds - move exactly @n stashed descriptors into @ret (in arrival
 * order).  -EBADMSG when a different number arrived (all are closed then).
 */
int wire_conn_take_fds(struct wire_conn *c, int *ret, size_t n);

/* True when a whole frame waits in the receive buffer (wire_conn_recv() would
 * return it without reading the socket). */
bool wire_conn_has_frame(const struct wire_conn *c);

/* Close every stashed descriptor (they arrived with a frame that takes none). */
void wire_conn_close_fds(struct wire_conn *c);
