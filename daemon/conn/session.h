/* SPDX-License-Identifier: MIT */
/*
 * session.h - the parts of a Hello that need no connection state
 * (daemon/conn/conn.c runs the Hello): the client's name as the logs show it,
 * the tenant "auto" picks, and the client's stats region.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "mb_stats_abi.h"
#include "tenant.h"

struct tenant_state;

/* Copy @src (the Hello's client_name, may be NULL) into @dst of @size bytes,
 * printable ASCII only ('?' for the rest); "unnamed" when empty. */
void session_client_name(char *dst, size_t size, const char *src);

/* Tenant "auto": the tenant whose Cgroup= is the longest prefix of @cgroup
 * (at a '/' boundary), NULL when none.  The tree lock is held. */
struct tenant *session_auto_tenant(struct tenant *root, const char *cgroup);

/**
 * session_stats_region_new - a sealed memfd holding a client's stats region
 * of @nslots slots, header written, mapped read/write into the daemon.
 * Returns 0 with the fd (close-on-exec), the mapping and its size, or a
 * negative errno.
 */
int session_stats_region_new(unsigned nslots, int *ret_fd, struct mb_stats_region **ret_map, size_t *ret_bytes);

/* A client of @uid was admitted to the tenant of @ts: the first time the
 * tenant has clients of two uids, log a notice that they share its arena
 * (one trust domain).  Any worker. */
void session_note_uid(struct tenant_state *ts, uid_t uid);
