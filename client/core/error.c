/* SPDX-License-Identifier: MIT */
/*
 * error.c - the thread's last error message (mb_last_error()), set by
 * every part of the library where a call fails (mb_set_error()).  It
 * depends on nothing, so every part may use it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/mb_internal.h"
#include "membroker.h"

static __thread char error_message[MB_ERROR_MESSAGE_BYTES];

void mb_set_error(const char *fmt, ...) {
        char buf[MB_ERROR_MESSAGE_BYTES];
        va_list ap;

        /* Through a copy, so that an argument may be mb_last_error(). */
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        memcpy(error_message, buf, sizeof(buf));
}

const char *mb_last_error(void) {
        return error_message;
}
