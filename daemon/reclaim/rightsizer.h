/* SPDX-License-Identifier: MIT */
/*
 * rightsizer.h - MemoryPressureTarget=: the right-sizing loop
 * (daemon/core/rightsize.h) run for every tenant that sets a target.
 *
 * Every RightSizeIntervalMSec= the main thread walks the tree; for each
 * tenant with a target it reads the tenant's memory.pressure
 * (tenant_pressure_read()), its usage and its effective min/low relative to
 * the root, runs one tick of the loop, applies the loop's limit as the
 * tenant's right-sizing high (page_counter_set_high_auto(): charges above it
 * are reclaimed and throttled as above memory.high, which is what makes an
 * over-reclaimed tenant stall), and reclaims the step down to that limit
 * through the reclaimer (reclaim_rightsize_step(), the cooperative reclaim
 * of memory_reclaim() that asks the clients with ReclaimTimeoutMSec=).  A
 * tenant is not ticked while its step's reclaim runs.  When the clients
 * stop answering the loop stops itself, drops its limit and says so in the
 * log and in RightSizeState; it starts again when the target is set again
 * (a reload that keeps or changes it).
 *
 * Main thread only.  Tenants without a target cost one test each per tick.
 */
#pragma once

#include <stdint.h>

#include "broker.h"

struct event_base;
struct rightsizer;

/* What the bus shows of one tenant's loop (org.membroker1.Tenant). */
struct rightsizer_status {
        char target[RIGHTSIZE_TARGET_STRING_MAX]; /* MemoryPressureTarget=, "no" when off */
        const char *state;            /* rightsize_state_to_string() */
        uint64_t working_set_bytes;   /* MemoryWorkingSetEstimate, 0 before any */
        uint64_t step_bytes;          /* RightSizeStep: the last step, 0 while not probing */
        uint64_t high_bytes;          /* RightSizeHigh: its limit, UINT64_MAX when none */
        uint64_t reclaimed_bytes;     /* RightSizeReclaimed: what the steps got back */
        uint32_t pressure_ppm;        /* the pressure of the last interval, ppm of wall time */
};

/**
 * rightsizer_start - run the loop on @base, the main thread's loop, every
 * b->config->broker.rightsize_interval_msec (read anew at every tick),
 * reclaiming through b->reclaimer.  Main thread.  0 or -ENOMEM.
 */
int rightsizer_start(struct broker *b, struct event_base *base, struct rightsizer **ret);

/* Stop the timer and free; NULL is a no-op.  Steps still running end with
 * the reclaimer (their outcome is then dropped).  Main thread. */
void rightsizer_free(struct rightsizer *z);

/* The state of @t's loop for the bus (main thread); a tenant without a
 * target reads "no" and "off". */
void rightsizer_tenant_status(struct broker *b, struct tenant *t, struct rightsizer_status *ret);
