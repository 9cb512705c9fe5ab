/* SPDX-License-Identifier: MIT */
/*
 * mb_size.c - the size parser (see mb_size.h).  Arithmetic in 128 bits so
 * that the result is exact before the one rounding down.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "mb_limits.h"
#include "mb_size.h"

/* Fractional digits kept; later ones are ignored.  Below a byte of any
 * unit, and of a percentage below a byte of anything under 10 PB; with at
 * most 16 the product of a 64-bit base and a percentage (at most 10^18)
 * fits in 128 bits. */
#define SIZE_MAX_FRACTION_DIGITS 16

typedef unsigned __int128 u128;

/* The multiplier of a K/M/G/T suffix at *@p (advancing past it), else 1. */
static uint64_t size_unit(const char **p) {
        static const char units[] = "KMGT";
        const char *u = **p ? strchr(units, toupper((unsigned char) **p)) : NULL;

        if (!u)
                return 1;
        (*p)++;
        return UINT64_C(1) << (10 * (u - units + 1));
}

int mb_size_parse(const char *s, uint64_t percent_base, unsigned flags, uint64_t *ret) {
        u128 whole = 0, frac = 0, frac_div = 1, v;
        const char *p = s;
        uint64_t unit;
        bool percent = false;

        if (!s || !*s)
                return -EINVAL;
        if ((flags & MB_SIZE_INFINITY) && (strcmp(s, "infinity") == 0 || strcmp(s, "max") == 0)) {
                *ret = MB_LIMIT_MAX;
                return 0;
        }

        if (!isdigit((unsigned char) *p))
                return -EINVAL;
        for (; isdigit((unsigned char) *p); p++) {
                whole = whole * 10 + (unsigned) (*p - '0');
                if (whole > UINT64_MAX)
                        return -ERANGE;
        }
        if (*p == '.') {
                p++;
                if (!isdigit((unsigned char) *p))
                        return -EINVAL;
                for (int digits = 0; isdigit((unsigned char) *p); p++, digits++)
                        if (digits < SIZE_MAX_FRACTION_DIGITS) {
                                frac = frac * 10 + (unsigned) (*p - '0');
                                frac_div *= 10;
                        }
        }

        unit = size_unit(&p);
        if (unit == 1 && *p == '%' && (flags & MB_SIZE_PERCENT)) {
                percent = true;
                p++;
        } else if (flags & MB_SIZE_BYTE_UNIT) {
                if (unit > 1 && strcmp(p, "iB") == 0)
                        p += 2;
                else if (strcmp(p, "B") == 0)
                        p++;
        }
        if (*p != '\0')
                return -EINVAL;

        if (percent) {
                u128 num = whole * frac_div + frac, den = 100 * frac_div;

                if (num > den)
                        return -ERANGE;
                v = (u128) percent_base * num / den;
        } else {
                if (unit == 1 && frac_div > 1)
                        return -EINVAL; /* "1.5" bytes */
                v = whole * unit + frac * unit / frac_div;
        }
        if (v >= MB_LIMIT_MAX)
                return -ERANGE;
        *ret = (uint64_t) v;
        return 0;
}

const char *mb_size_format(char *buf, size_t size, uint64_t bytes) {
        static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        size_t i = 0;

        if (bytes == MB_LIMIT_MAX) {
                snprintf(buf, size, "max");
                return buf;
        }
        if (bytes == 0 || bytes % 1024 != 0) {
                snprintf(buf, size, "%" PRIu64 " bytes", bytes);
                return buf;
        }
        /* The largest unit that divides exactly: never rounded. */
        bytes /= 1024;
        while (i + 1 < sizeof(units) / sizeof(units[0]) && bytes % 1024 == 0) {
                bytes /= 1024;
                i++;
        }
        snprintf(buf, size, "%" PRIu64 " %s", bytes, units[i]);
        return buf;
}

const char *mb_size_format_pages(char *buf, size_t size, uint64_t pages, uint64_t page_size, uint64_t max_pages) {
        char b[MB_SIZE_FORMAT_MAX];

        if (pages >= max_pages)
                snprintf(buf, size, "max");
        else if (page_size != 0 && pages > MB_LIMIT_MAX / page_size)
                snprintf(buf, size, "%" PRIu64 " pages", pages);
        else
                snprintf(buf, size, "%s (%" PRIu64 " page%s)", mb_size_format(b, sizeof(b), pages * page_size),
                         pages, pages == 1 ? "" : "s");
        return buf;
}
