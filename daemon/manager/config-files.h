/* SPDX-License-Identifier: MIT */
/*
 * config-files.h - the configuration as files: DIR/membroker.conf and
 * DIR/tenants.d/ *.conf read from disk, user and group names resolved with
 * NSS, then parsed by the pure parser of daemon/core/config.h.
 */
#pragma once

#include <stdint.h>

#include "core/config.h" /* not the autoconf config.h */

/**
 * mb_config_load - read @dir/membroker.conf (optional: defaults when absent,
 * as when @dir itself is absent) and @dir/tenants.d/ *.conf in lexical
 * (byte) order.  Names starting with '.' and names not ending in ".conf"
 * are ignored without a word; a symbolic link loop, a dangling link, a
 * directory, a FIFO, a socket or a device named *.conf is skipped with a
 * warning naming it (never opened in blocking mode); a link to a regular
 * file is read.  On error returns a negative errno (-EINVAL for a bad
 * file, the read error otherwise), sets *@ret_error to a malloc'ed
 * "file:line: reason" ("file: reason" when no line applies) and returns no
 * configuration.  Any thread: it touches nothing but the files and NSS.
 */
int mb_config_load(const char *dir, struct mb_config **ret, char **ret_error);

/* This machine: physical RAM, the system page size, NSS lookups of
 * AllowUsers=/AllowGroups= names (getpwnam_r(), getgrnam_r()). */
void mb_config_env_system(struct mb_config_env *ret);

/* Physical RAM in bytes (sysconf). */
uint64_t mb_physical_memory(void);
