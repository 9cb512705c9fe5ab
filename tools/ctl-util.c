/* SPDX-License-Identifier: MIT */
/*
 * ctl-util.c - pure helpers of membrokerctl (see ctl-util.h).
 */
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

const char *ctl_format_bytes(char *buf, uint64_t bytes, bool exact) {
        static const char units[] = "KMGTPE";
        uint64_t div = 1024;
        size_t i = 0;

        if (bytes == MB_LIMIT_MAX) {
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

void ctl_json_limit(FILE *f, uint64_t v) {
        if (v == MB_LIMIT_MAX)
                fputs("\"max\"", f);
        else
                fprintf(f, "%" PRIu64, v);
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
        if (!strpbrk(s, "\\\"\n")) { /* the common case: nothing to escape */
                fputs(s, f);
                fputc('"', f);
                return;
        }
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
