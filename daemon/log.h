/* SPDX-License-Identifier: MIT */
/*
 * log.h - membrokerd's logging: one line per message on stderr, with a
 * "<N>" syslog priority prefix when stderr is the journal (JOURNAL_STREAM is
 * set, the way systemd's sd-daemon(3) "<N>" convention expects), plain text
 * otherwise.  Thread-safe: each line is written with a single write(2).
 */
#pragma once

#include <stdarg.h>
#include <syslog.h>

#include "macros.h"

/* Decide the output format from the environment; call once at start-up. */
void log_setup(void);

/* Messages above @level (LOG_DEBUG > LOG_INFO ...) are dropped. */
void log_set_max_level(int level);
int log_get_max_level(void);

/* Log at @level; returns @error (a negative errno, or 0) so that callers can
 * write `return log_error_errno(r, "...: %m")`-style code.  "%m" is expanded
 * with strerror(-error) when @error != 0, else with strerror(errno). */
int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) _printf_(5, 6);

#define log_full_errno(level, error, ...) log_internal(level, error, __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_ERR, error, __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_WARNING, error, __VA_ARGS__)
#define log_debug_errno(error, ...) log_full_errno(LOG_DEBUG, error, __VA_ARGS__)
