/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

#include "log.h"

#define LOG_LINE_MAX_BYTES 2048

static bool log_journal;        /* "<N>" prefixes: stderr goes to the journal */
static bool log_journal_native; /* stderr is exactly the stream JOURNAL_STREAM names */
static _Atomic int log_max_level = LOG_INFO;

void log_setup(void) {
        const char *e;

        /* systemd sets JOURNAL_STREAM when stderr is connected to the
         * journal; the "<N>" prefix then sets the priority of the line. */
        e = getenv("JOURNAL_STREAM");
        log_journal = e && *e;
        if (log_journal) {
                /* "DEVICE:INODE" of the stream systemd connected; it is
                 * still stderr unless stderr was redirected since. */
                unsigned long long dev, ino;
                struct stat st;

                log_journal_native = sscanf(e, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
                                     (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
        }

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

/* Format and write one line (errno already points at the error). */
_printf_(4, 0) static void log_write_line(int level, const char *file, int line, const char *fmt, va_list ap) {
        char buf[LOG_LINE_MAX_BYTES];
        size_t n = 0;
        int k;

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

        if (n < sizeof(buf)) {
                k = vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
                if (k > 0)
                        n += (size_t) k;
        }

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
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        int saved_errno = errno;
        va_list ap;

        if (level > log_max_level)
                return error;

        /* "%m" expands to strerror(errno): point errno at the error passed. */
        errno = error != 0 ? -error : saved_errno;
        va_start(ap, fmt);
        log_write_line(level, file, line, fmt, ap);
        va_end(ap);
        errno = saved_errno;
        return error;
}

int log_struct_internal(int level, const char *message_id, const char *tenant, int client_pid, const char *file,
                        int line, const char *func, const char *fmt, ...) {
        int saved_errno = errno;
        char message[LOG_LINE_MAX_BYTES], file_field[256], line_field[32];
        va_list ap;
        int r;

        if (level > log_max_level)
                return 0;
        if (!log_journal_native) {
                va_start(ap, fmt);
                log_write_line(level, file, line, fmt, ap);
                va_end(ap);
                errno = saved_errno;
                return 0;
        }

        va_start(ap, fmt);
        (void) vsnprintf(message, sizeof(message), fmt, ap);
        va_end(ap);
        snprintf(file_field, sizeof(file_field), "CODE_FILE=%s", file);
        snprintf(line_field, sizeof(line_field), "CODE_LINE=%d", line);
        /* sd_journal_send() takes fields up to the first NULL: CLIENT_PID=
         * goes last, only when there is a client. */
        r = sd_journal_send_with_location(file_field, line_field, func, "MESSAGE=%s", message, "PRIORITY=%d", level,
                                          "MESSAGE_ID=%s", message_id, "SYSLOG_IDENTIFIER=membrokerd",
                                          "TENANT=%s", tenant ? tenant : "", client_pid > 0 ? "CLIENT_PID=%d" : NULL,
                                          client_pid, NULL);
        if (r < 0) {
                /* No journal socket after all: the plain line. */
                va_start(ap, fmt);
                log_write_line(level, file, line, fmt, ap);
                va_end(ap);
        }
        errno = saved_errno;
        return 0;
}
