/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX_BYTES 2048

static bool log_journal;
static _Atomic int log_max_level = LOG_INFO;

void log_setup(void) {
        const char *e;

        /* systemd sets JOURNAL_STREAM when stderr is connected to the
         * journal; the "<N>" prefix then sets the priority of the line. */
        e = getenv("JOURNAL_STREAM");
        log_journal = e && *e;

        e = getenv("MEMBROKER_LOG_LEVEL");
        if (e && strcmp(e, "debug") == 0)
                log_max_level = LOG_DEBUG;
}

void log_set_max_level(int level) {
        log_max_level = level;
}

int log_get_max_level(void) {
        return log_max_level;
}

static const char *level_name(int level) {
        switch (level) {
        case LOG_EMERG: case LOG_ALERT: case LOG_CRIT: return "critical";
        case LOG_ERR: return "error";
        case LOG_WARNING: return "warning";
        case LOG_NOTICE: return "notice";
        case LOG_INFO: return "info";
        default: return "debug";
        }
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        char buf[LOG_LINE_MAX_BYTES];
        int saved_errno = errno;
        size_t n = 0;
        va_list ap;
        int k;

        if (level > log_max_level)
                return error;

        /* "%m" expands to strerror(errno): point errno at the error passed. */
        errno = error != 0 ? -error : saved_errno;

        if (log_journal)
                k = snprintf(buf, sizeof(buf), "<%d>", level);
        else if (level <= LOG_WARNING || level == LOG_DEBUG)
                k = snprintf(buf, sizeof(buf), "%s: ", level_name(level));
        else
                k = 0;
        if (k > 0)
                n = (size_t) k;
        if (level == LOG_DEBUG && n < sizeof(buf)) {
                k = snprintf(buf + n, sizeof(buf) - n, "%s:%d: ", file, line);
                if (k > 0)
                        n += (size_t) k;
        }

        va_start(ap, fmt);
        if (n < sizeof(buf)) {
                k = vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
                if (k > 0)
                        n += (size_t) k;
        }
        va_end(ap);

        if (n >= sizeof(buf) - 1)
                n = sizeof(buf) - 2;
        buf[n++] = '\n';

        /* One write per line so that lines of different threads never mix. */
        for (size_t off = 0; off < n;) {
                ssize_t w = write(STDERR_FILENO, buf + off, n - off);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                off += (size_t) w;
        }

        errno = saved_errno;
        return error;
}
