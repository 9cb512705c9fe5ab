/* SPDX-License-Identifier: MIT */
/*
 * ctl-util.h - pure helpers of membrokerctl: sizes out (sizes in are
 * parsed by common/mb_size.h), JSON and OpenMetrics escaping, tenant path
 * ordering.  No sd-bus here, so the unit test links them alone
 * (tests/test-ctl-util.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mb_limits.h"

#define CTL_FORMAT_BYTES_MAX 32  /* buffer size for ctl_format_bytes() */

/* Parse a plain unsigned decimal number (no sign, no suffix). */
int ctl_parse_u64(const char *s, uint64_t *ret);

/**
 * ctl_format_bytes - human size into @buf (CTL_FORMAT_BYTES_MAX bytes):
 * "512B", "4.0K", "1.5G"; "max" for MB_LIMIT_MAX.  With @exact, the plain
 * number of bytes (still "max" for MB_LIMIT_MAX).  Returns @buf.
 */
const char *ctl_format_bytes(char *buf, uint64_t bytes, bool exact);

/* Write @s as a JSON string literal (quoted, escaped) to @f. */
/* A limit as a JSON value: the string "max" for MB_LIMIT_MAX (no limit),
 * else the number of bytes. */
void ctl_json_limit(FILE *f, uint64_t v);

void ctl_json_string(FILE *f, const char *s);

/* Write @s as an OpenMetrics label value (quoted; \\, \" and \n escaped). */
void ctl_openmetrics_label(FILE *f, const char *s);

/* Order of tenant paths in a tree listing: the root "/" first, then
 * parents before children, siblings by name (strcmp-like result). */
int ctl_path_compare(const char *a, const char *b);

/* Depth of a tenant path: "/" 0, "a" 1, "a/b" 2. */
unsigned ctl_path_depth(const char *path);

/* The parent path of @path into @buf (@size bytes): "a/b" -> "a", "a" -> "/".
 * -EINVAL for the root, -ENOBUFS when @buf is too small. */
int ctl_path_parent(const char *path, char *buf, size_t size);

/* Last component of a path ("/" for the root). */
const char *ctl_path_name(const char *path);
