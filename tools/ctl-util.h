/* SPDX-License-Identifier: MIT */
/*
 * ctl-util.h - pure helpers of membrokerctl: sizes in and out, JSON and
 * OpenMetrics escaping, tenant path ordering.  No sd-bus here, so the unit
 * test links them alone (tests/test-ctl-util.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CTL_LIMIT_MAX UINT64_MAX /* "infinity" / "max": no limit */
#define CTL_FORMAT_BYTES_MAX 32  /* buffer size for ctl_format_bytes() */

/**
 * ctl_parse_size - parse a size as `membrokerctl set` takes it: "4096",
 * "4K", "1.5G" (K/M/G/T/P/E are powers of 1024, case-insensitive; a
 * trailing "B" is not accepted), "infinity" or "max" (CTL_LIMIT_MAX), or
 * "N%" / "N.N%" of @percent_base (-EINVAL when @percent_base is 0, -ERANGE
 * above 100%).  Fractions are exact to the byte (rounded down once).
 * Returns 0, -EINVAL (not a size) or -ERANGE (does not fit in 64 bits, or
 * is CTL_LIMIT_MAX - 1, which the API reserves, or CTL_LIMIT_MAX spelt as a
 * number).
 */
int ctl_parse_size(const char *s, uint64_t percent_base, uint64_t *ret);

/* Parse a plain unsigned decimal number (no sign, no suffix). */
int ctl_parse_u64(const char *s, uint64_t *ret);

/**
 * ctl_format_bytes - human size into @buf (CTL_FORMAT_BYTES_MAX bytes):
 * "512B", "4.0K", "1.5G"; "max" for CTL_LIMIT_MAX.  With @exact, the plain
 * number of bytes (still "max" for CTL_LIMIT_MAX).  Returns @buf.
 */
const char *ctl_format_bytes(char *buf, uint64_t bytes, bool exact);

/* Write @s as a JSON string literal (quoted, escaped) to @f. */
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

/* Unit of a memory.stat key as the daemon reports it. */
enum ctl_stat_unit {
        CTL_UNIT_BYTES,
        CTL_UNIT_COUNT,
        CTL_UNIT_USEC,
        CTL_UNIT_UNKNOWN,
};
enum ctl_stat_unit ctl_stat_key_unit(const char *key);
