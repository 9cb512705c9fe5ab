/* SPDX-License-Identifier: MIT */
/*
 * log.h - membrokerd's logging: one line per message on stderr, with a
 * "<N>" syslog priority prefix when stderr is the journal (JOURNAL_STREAM is
 * set, the way systemd's sd-daemon(3) "<N>" convention expects), plain text
 * otherwise.  Thread-safe: each line is written with a single write(2).
 *
 * Events an administrator looks for (an OOM kill, a tenant stuck above its
 * max, an overrun) are logged with log_struct(): when stderr is the journal
 * itself (JOURNAL_STREAM names stderr's device and inode), they go to the
 * journal directly with fields to match on -- MESSAGE_ID=, TENANT=, and
 * CLIENT_PID= where a client is concerned -- as systemd's own structured
 * messages do ("journalctl MESSAGE_ID=... TENANT=db/cache"); otherwise they
 * are ordinary lines.
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

/* MESSAGE_ID= of the structured messages (journalctl MESSAGE_ID=...). */
#define LOG_MESSAGE_OOM_KILL "1ca30b2942d447b5813cb231f2a7d69a" /* a client killed (OOMPolicy=kill) */
#define LOG_MESSAGE_OOM "4e7db44549604dc3a954646871cafcc2"      /* usage stays above max */
#define LOG_MESSAGE_OVERRUN "c647239db6e14a40ba40d905d287652d"  /* arena pages backed by no holder */

/**
 * log_struct_internal - log_internal() with journal fields: MESSAGE_ID=
 * @message_id (32 hex digits), TENANT= @tenant (may be NULL), CLIENT_PID=
 * @client_pid (when > 0).  Sent with sd_journal_send() when stderr is the
 * journal's stream, else (or when that fails) written as log_internal()
 * writes a line.  Returns 0.
 */
int log_struct_internal(int level, const char *message_id, const char *tenant, int client_pid, const char *file,
                        int line, const char *func, const char *fmt, ...) _printf_(8, 9);
#define log_struct(level, message_id, tenant, client_pid, ...) \
        log_struct_internal(level, message_id, tenant, client_pid, __FILE__, __LINE__, __func__, __VA_ARGS__)

#define log_full_errno(level, error, ...) log_internal(level, error, __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_ERR, error, __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_WARNING, error, __VA_ARGS__)
#define log_debug_errno(error, ...) log_full_errno(LOG_DEBUG, error, __VA_ARGS__)
