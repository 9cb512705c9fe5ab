/* SPDX-License-Identifier: MIT */
/*
 * mb_size.h - the one parser of sizes, for the configuration (Capacity=,
 * MemoryMax=, PageSize= ...), membrokerctl (set, create, reclaim) and
 * membroker-load (--hold, --cache).  Pure: no allocation, no I/O.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* What a caller accepts beyond "digits[.digits][K|M|G|T]". */
enum mb_size_flags {
        MB_SIZE_PERCENT = 1u << 0,   /* "N%" / "N.N%" of the base, at most 100% */
        MB_SIZE_INFINITY = 1u << 1,  /* "infinity" and "max": MB_LIMIT_MAX */
        MB_SIZE_BYTE_UNIT = 1u << 2, /* "B" after a number or "B"/"iB" after K..T: "4096B", "64KB", "64KiB" */
};

/**
 * mb_size_parse - parse the size @s.  "4096", "4K", "1.5G": K, M, G, T
 * (either case) are powers of 1024, a fraction needs a suffix and is
 * rounded down to the byte.  With MB_SIZE_PERCENT, "25%" or "12.5%" of
 * @percent_base, rounded down once (0 when @percent_base is 0).  With
 * MB_SIZE_INFINITY, "infinity" and "max" give MB_LIMIT_MAX.  No sign, no
 * spaces, nothing after the suffix but what MB_SIZE_BYTE_UNIT allows.
 *
 * Returns 0 and *@ret; -EINVAL when @s is not a size this caller accepts;
 * -ERANGE above 100% or when the value does not fit below MB_LIMIT_MAX
 * (which only the words spell).  *@ret is untouched on error.
 */
int mb_size_parse(const char *s, uint64_t percent_base, unsigned flags, uint64_t *ret);

/* Room for what mb_size_format() and mb_size_format_pages() write. */
#define MB_SIZE_FORMAT_MAX 64

/**
 * mb_size_format - @bytes for people, exactly: in the largest of KiB, MiB,
 * GiB ... that divides it ("64 MiB", "12 KiB"), else "N bytes"; "max" for
 * MB_LIMIT_MAX.  Writes at most @size bytes (MB_SIZE_FORMAT_MAX is enough)
 * to @buf and returns @buf.
 */
const char *mb_size_format(char *buf, size_t size, uint64_t bytes);

/**
 * mb_size_format_pages - @pages of @page_size bytes for messages and logs:
 * the bytes first, the pages in parentheses ("64 MiB (16384 pages)"); "max"
 * when @pages is at least @max_pages (the page counter's "no limit").
 * Returns @buf.
 */
const char *mb_size_format_pages(char *buf, size_t size, uint64_t pages, uint64_t page_size, uint64_t max_pages);
