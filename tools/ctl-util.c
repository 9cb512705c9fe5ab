/* SPDX-License-Identifier: MIT */
/*
 * ctl-util.c - pure helpers of membrokerctl (see ctl-util.h).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl-util.h"

int ctl_parse_u64(const char *s, uint64_t *ret) {
        uint64_t v = 0;

        if (!s || !*s)
                return -EINVAL;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                if (v > (UINT64_MAX - (uint64_t) (*s - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t) (*s - '0');
        }
        *ret = v;
        return 0;
}

/* a * b / c without overflow for the values we see (b < c or small). */
static int mul_div(uint64_t a, uint64_t b, uint64_t c, uint64_t *ret) {
        unsigned __int128 x = (unsigned __int128) a * b / c;

        if (x > UINT64_MAX)
                return -ERANGE;
        *ret = (uint64_t) x;
        return 0;
}

int ctl_parse_size(const char *s, uint64_t percent_base, uint64_t *ret) {
        static const char suffixes[] = "KMGTPE";
        uint64_t whole = 0, frac = 0, frac_den = 1, unit = 1, v;
        const char *p = s;
        int r;

        if (!s || !*s)
                return -EINVAL;
        if (strcmp(s, "infinity") == 0 || strcmp(s, "max") == 0) {
                *ret = CTL_LIMIT_MAX;
                return 0;
        }

        if (!isdigit((unsigned char) *p))
                return -EINVAL;
        for (; isdigit((unsigned char) *p); p++) {
                if (whole > (UINT64_MAX - (uint64_t) (*p - '0')) / 10)
                        return -ERANGE;
                whole = whole * 10 + (uint64_t) (*p - '0');
        }
        if (*p == '.') {
                p++;
                if (!isdigit((unsigned char) *p))
                        return -EINVAL;
                for (; isdigit((unsigned char) *p); p++) {
                        /* 18 fractional digits are more than any unit needs. */
                        if (frac_den < UINT64_C(1000000000000000000)) {
                                frac = frac * 10 + (uint64_t) (*p - '0');
                                frac_den *= 10;
                        }
                }
        }

        if (*p == '%') {
                if (p[1] != '\0' || percent_base == 0)
                        return -EINVAL;
                if (whole > 100 || (whole == 100 && frac > 0))
                        return -ERANGE;
                /* Millionths of a percent are plenty; one rounding, down. */
                while (frac_den > 1000000) {
                        frac /= 10;
                        frac_den /= 10;
                }
                unsigned __int128 x = (unsigned __int128) percent_base * (whole * frac_den + frac) /
                                      (frac_den * 100);
                v = (uint64_t) x;
        } else {
                if (*p) {
                        const char *u = strchr(suffixes, toupper((unsigned char) *p));
                        if (!u || p[1] != '\0')
                                return -EINVAL;
                        for (const char *q = suffixes; q <= u; q++)
                                unit *= 1024;
                }
                if (whole > UINT64_MAX / unit)
                        return -ERANGE;
                v = whole * unit;
                if (frac > 0) {
                        uint64_t extra;
                        r = mul_div(frac, unit, frac_den, &extra);
                        if (r < 0)
                                return r;
                        if (v > UINT64_MAX - extra)
                                return -ERANGE;
                        v += extra;
                }
        }
        /* UINT64_MAX is "max" (only spelt so), UINT64_MAX - 1 is reserved by
         * the API for "unchanged". */
        if (v >= UINT64_MAX - 1)
                return -ERANGE;
        *ret = v;
        return 0;
}

const char *ctl_format_bytes(char *buf, uint64_t bytes, bool exact) {
        static const char units[] = "KMGTPE";
        uint64_t div = 1024;
        size_t i = 0;

        if (bytes == CTL_LIMIT_MAX) {
                snprintf(buf, CTL_FORMAT_BYTES_MAX, "max");
                return buf;
        }
        if (exact || bytes < 1024) {
                snprintf(buf, CTL_FORMAT_BYTES_MAX, exact ? "%" PRIu64 : "%" PRIu64 "B", bytes);
                return buf;
        }
        /* The largest unit that leaves at least 1. */
        while (i + 1 < sizeof units - 1 && bytes / div >= 1024) {
                div *= 1024;
                i++;
        }
        /* One decimal, rounded down, as systemd's format_bytes() shows it. */
        snprintf(buf, CTL_FORMAT_BYTES_MAX, "%" PRIu64 ".%" PRIu64 "%c", bytes / div,
                 (uint64_t) ((unsigned __int128) (bytes % div) * 10 / div), units[i]);
        return buf;
}

void ctl_json_string(FILE *f, const char *s) {
        fputc('"', f);
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;
                switch (c) {
                case '"':
                        fputs("\\\"", f);
                        break;
                case '\\':
                        fputs("\\\\", f);
                        break;
                case '\n':
                        fputs("\\n", f);
                        break;
                case '\t':
                        fputs("\\t", f);
                        break;
                case '\r':
                        fputs("\\r", f);
                        break;
                default:
                        if (c < 0x20)
                                fprintf(f, "\\u%04x", c);
                        else
                                fputc(c, f);
                }
        }
        fputc('"', f);
}

void ctl_openmetrics_label(FILE *f, const char *s) {
        fputc('"', f);
        for (; *s; s++) {
                if (*s == '\\')
                        fputs("\\\\", f);
                else if (*s == '"')
                        fputs("\\\"", f);
                else if (*s == '\n')
                        fputs("\\n", f);
                else
                        fputc(*s, f);
        }
        fputc('"', f);
}

int ctl_path_compare(const char *a, const char *b) {
        bool ra = strcmp(a, "/") == 0, rb = strcmp(b, "/") == 0;

        if (ra || rb)
                return rb - ra;
        /* '/' sorts before every name character, so "a/b" < "a.b" and a
         * parent comes right before its subtree. */
        for (;; a++, b++) {
                unsigned char ca = *a == '/' ? 1 : (unsigned char) *a;
                unsigned char cb = *b == '/' ? 1 : (unsigned char) *b;
                if (ca != cb || ca == 0)
                        return (int) ca - (int) cb;
        }
}

unsigned ctl_path_depth(const char *path) {
        unsigned n = 1;

        if (strcmp(path, "/") == 0)
                return 0;
        for (; *path; path++)
                if (*path == '/')
                        n++;
        return n;
}

int ctl_path_parent(const char *path, char *buf, size_t size) {
        const char *slash;
        size_t len;

        if (strcmp(path, "/") == 0)
                return -EINVAL;
        slash = strrchr(path, '/');
        if (!slash) {
                if (size < 2)
                        return -ENOBUFS;
                strcpy(buf, "/");
                return 0;
        }
        len = (size_t) (slash - path);
        if (len + 1 > size)
                return -ENOBUFS;
        memcpy(buf, path, len);
        buf[len] = '\0';
        return 0;
}

const char *ctl_path_name(const char *path) {
        const char *slash;

        if (strcmp(path, "/") == 0)
                return path;
        slash = strrchr(path, '/');
        return slash ? slash + 1 : path;
}

enum ctl_stat_unit ctl_stat_key_unit(const char *key) {
        static const char *const bytes[] = {
                "pages", "stock", "slab", "slab_reclaimable", "slab_unreclaimable", "unaccounted",
        };
        static const char *const counts[] = {
                "pgalloc", "pgfree", "charge_requests", "uncharge_requests", "pgscan", "pgsteal",
        };
        char base[64];
        size_t len = strlen(key);

        /* "X_local" has the unit of "X". */
        if (len > 6 && strcmp(key + len - 6, "_local") == 0 && len - 6 < sizeof base) {
                memcpy(base, key, len - 6);
                base[len - 6] = '\0';
                key = base;
        }
        for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++)
                if (strcmp(key, bytes[i]) == 0)
                        return CTL_UNIT_BYTES;
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
                if (strcmp(key, counts[i]) == 0)
                        return CTL_UNIT_COUNT;
        len = strlen(key);
        if (len > 5 && strcmp(key + len - 5, "_usec") == 0)
                return CTL_UNIT_USEC;
        if (len > 6 && strcmp(key + len - 6, "_bytes") == 0)
                return CTL_UNIT_BYTES;
        return CTL_UNIT_UNKNOWN;
}
