/* SPDX-License-Identifier: MIT */
/*
 * preload.h - what the files of libmembroker-preload.so share (not
 * installed):
 *
 *   preload.c   malloc() and friends, fork(), the constructor
 *   mmap.c      private anonymous mmap/munmap/mremap/mprotect charged to
 *               the tenant as pages outside the arena
 *   report.c    what the tenant refused, said on stderr (membroker-run(1))
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/client.h"
#include "preload/tcache.h"

#define EXPORT __attribute__((visibility("default")))

extern mb_client *shim_client;
extern bool shim_forked;   /* a fork() child: broker blocks are a private copy */
extern bool shim_lost;     /* the session is over */
/* Calls made inside libmembroker (raised around them) go to glibc; in the
 * per-thread cache's TLS block, so that a fast path reads one. */
#define shim_depth (shim_tc.depth)

/* Whether this call may allocate from the broker. */
static inline bool shim_active(void) {
        return shim_client && !shim_depth && !shim_lost && !shim_forked && !mb_library_thread;
}

/* After a failure other than ENOMEM: is the session over? (preload.c) */
void shim_check_lost(void);

/* mmap.c: read the settings once the session is up (shim_init()). */
void shim_mmap_init(mb_client *c);

/* report.c: read the settings (shim_init()). */
void shim_report_init(void);

/**
 * shim_report_refused - the tenant refused @bytes to @what ("malloc",
 * "mmap", ...): mb_last_error() says which limit.  Counted for the line at
 * exit; said at once with $MEMBROKER_RUN_VERBOSE=1.  Keeps errno.
 */
void shim_report_refused(const char *what, size_t bytes);
