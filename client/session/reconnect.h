/* SPDX-License-Identifier: MIT */
/*
 * reconnect.h - how a client survives a restart of membrokerd (docs/design.md,
 * daemon/service/restart.h).
 *
 * The library remembers which pages of the arena are charged to it (granted
 * and not yet returned: the pages the application holds and those in the
 * stocks) in a bitmap, one bit per arena page, changed only on the slow
 * paths (Grant, Uncharge).  When the daemon goes away (end of the
 * connection) the library connects again with backoff and sends
 * Hello{tenant (the resolved path), client_token (from the first Welcome),
 * held (the bitmap as extents), held_more}; when the extents do not fit in
 * one frame the rest follows in Claim messages, each answered by an Ack.
 * The daemon passes the same arena memfd (the library checks its inode),
 * so the application's pointers stay valid and the data intact; only the
 * stats region is new.
 *
 * Not thread-safe; the caller serialises (connect_again() holds send_lock).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/client.h"
#include "session/wire_conn.h"
#include "membroker.pb-c.h"

/* $MEMBROKER_RECONNECT_TIMEOUT_SEC: how long to try (default below); 0
 * disables reconnecting (the session ends with the connection). */
#define MB_RECONNECT_TIMEOUT_ENV "MEMBROKER_RECONNECT_TIMEOUT_SEC"
#define MB_RECONNECT_DEFAULT_TIMEOUT_SEC 60u
#define MB_RECONNECT_FIRST_DELAY_MSEC 10u
#define MB_RECONNECT_MAX_DELAY_MSEC 1000u

/* The bitmap is struct reconnect_held, part of the client (core/client.h). */

int reconnect_held_init(struct reconnect_held *h, uint64_t npages);
void reconnect_held_done(struct reconnect_held *h);
/* Mark [start, start+count) charged / returned (clipped to the arena). */
void reconnect_held_set(struct reconnect_held *h, uint64_t start, uint64_t count);
void reconnect_held_clear(struct reconnect_held *h, uint64_t start, uint64_t count);

/* What the new session needs from the old one. */
struct reconnect_info {
        const char *socket_path;
        const char *tenant;       /* the path the first Welcome resolved */
        const char *client_name;
        uint64_t token;           /* Welcome.client_token */
        dev_t arena_dev;          /* identity of the arena memfd */
        ino_t arena_ino;
        unsigned timeout_sec;
        const bool *cancel;       /* if set and true (read atomically): give up */
};

/* The timeout from $MEMBROKER_RECONNECT_TIMEOUT_SEC (or the default). */
unsigned reconnect_timeout_sec(void);

/**
 * reconnect_session - connect again and re-claim every page in @held (see
 * above), trying with exponential backoff (10 ms up to 1 s) until
 * @info->timeout_sec passed.  On success returns 0, the new connection in
 * *@ret_conn, the Welcome in *@ret_msg (free with
 * mb__msg__free_unpacked()), and the new stats region descriptor in
 * *@ret_stats_fd.  *@ret_arena_fd is -1 when the daemon passed the same
 * arena (the usual case: checked by inode, then closed); a client that holds
 * no page accepts a new arena, passed in *@ret_arena_fd to be mapped.
 * Errors (with mb_set_error()): -ETIMEDOUT (no daemon came back), -ESTALE
 * (the daemon came back without this client's memory: a different arena,
 * or it has no record of the token), or the daemon's refusal.
 */
int reconnect_session(const struct reconnect_info *info, const struct reconnect_held *held, struct wire_conn **ret_conn,
                      Mb__Msg **ret_msg, int *ret_stats_fd, int *ret_arena_fd);
