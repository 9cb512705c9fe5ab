/* SPDX-License-Identifier: MIT */
/*
 * rightsize.h - automatic right-sizing of a tenant from its memory
 * pressure (MemoryPressureTarget=), as pure code.
 *
 * The kernel leaves this to user space: Meta's senpai reads a cgroup's
 * memory.pressure every few seconds and, while the pressure stays below a
 * target, makes the cgroup a little smaller (it lowers memory.high, or
 * writes memory.reclaim); when the pressure rises above the target it backs
 * off and lets the cgroup grow again.  The cgroup's size converges to the
 * memory it really uses (its working set) at a bounded cost in stalls.
 *
 * This controller is that loop for one tenant, senpai's memory.high
 * variant: it keeps a limit of its own (high_pages, obeyed like memory.high
 * beside the one written: page_counter_set_high_auto()) and lowers it in
 * steps, so that a tenant that needs pages back after a step stalls on the
 * high throttle, which is what raises its pressure.  The daemon calls
 * rightsize_tick() every interval with the tenant's cumulative stall time
 * and its average pressure in the target's window, its usage and its
 * protection floor (the larger of its effective min and low); the answer is
 * how many pages to reclaim now down to the new limit (memory_reclaim() of
 * the tenant's subtree).  When that reclaim ends the daemon reports what it
 * got with rightsize_step_done().  Nothing here knows about clients, timers
 * or the bus.
 *
 * The loop:
 *  - pressure of an interval = max(stall delta / interval, the window's
 *    average): a burst of stalls or a raised average both count;
 *  - below the target: lower the limit to the usage less a step of
 *    RIGHTSIZE_STEP_MIN_PPM of the usage, doubled after every interval that
 *    stays below the target (at most RIGHTSIZE_STEP_MAX_PPM), scaled by
 *    senpai's ((target - p) / target)^2 so that the steps get small as the
 *    pressure nears the target, at least one page, never below the floor,
 *    and reclaim what is above it;
 *  - above the target ("backoff"): no reclaim, the limit goes up to at
 *    least the usage plus up to RIGHTSIZE_STEP_MAX_PPM of it (in proportion
 *    to how far above the target the pressure is, as senpai's
 *    max_backoff), so that a tenant pressing on it grows by that much
 *    every interval, and the step starts small again;
 *  - the working set estimate is the lowest usage reached with the
 *    pressure below the target, reset to the usage at which the pressure
 *    came back to the target after a back-off (what the tenant grew back to
 *    once it stopped stalling), or the usage when nothing more can be
 *    reclaimed;
 *  - RIGHTSIZE_STOP_STEPS steps in a row that got nothing back while some
 *    client left its request unanswered stop the controller ("stopped")
 *    until the target is set again: a tenant whose clients do not answer
 *    is not asked forever.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Pressure figures are parts per million of wall time (100% = 1000000). */
#define RIGHTSIZE_PPM_MAX 1000000u
/* The first step after a back-off, and the largest: fractions of the usage
 * in ppm (1% and 10%). */
#define RIGHTSIZE_STEP_MIN_PPM 10000u
#define RIGHTSIZE_STEP_MAX_PPM 100000u
/* Fruitless steps with an unanswered request before the controller stops. */
#define RIGHTSIZE_STOP_STEPS 3u
/* No limit of its own (off, stopped, or not probed yet). */
#define RIGHTSIZE_HIGH_NONE UINT64_MAX
/* Longest text of rightsize_target_format(), NUL included. */
#define RIGHTSIZE_TARGET_STRING_MAX 32u

/* PSI's "some" (at least one client stalled) or "full" (all of them). */
enum rightsize_kind {
        RIGHTSIZE_SOME = 0,
        RIGHTSIZE_FULL,
};

/* The average the target applies to: avg10, avg60 or avg300. */
enum rightsize_window {
        RIGHTSIZE_AVG10 = 0,
        RIGHTSIZE_AVG60,
        RIGHTSIZE_AVG300,
};

/* MemoryPressureTarget=: "some avg10 0.1%"; off when !enabled. */
struct rightsize_target {
        bool enabled;
        enum rightsize_kind kind;
        enum rightsize_window window;
        uint32_t ppm; /* 1 .. RIGHTSIZE_PPM_MAX */
};

enum rightsize_state {
        RIGHTSIZE_STATE_OFF = 0,  /* no target */
        RIGHTSIZE_STATE_PROBING,  /* pressure below the target: reclaiming steps */
        RIGHTSIZE_STATE_BACKOFF,  /* pressure above the target: not reclaiming */
        RIGHTSIZE_STATE_IDLE,     /* nothing to reclaim: usage at the floor, or the clients gave nothing */
        RIGHTSIZE_STATE_STOPPED,  /* the clients did not answer: stopped until the target is set again */
};

/* One tenant's controller: rightsize_set_target() starts it (off). */
struct rightsize {
        struct rightsize_target target;
        enum rightsize_state state;
        bool primed;                /* last_* hold a reading */
        bool was_above;             /* the last interval was above the target */
        uint64_t last_now_usec, last_stall_usec;
        uint32_t last_pressure_ppm; /* of the last interval */
        uint32_t step_ppm;          /* the next step below the target, before scaling */
        uint64_t step_pages;        /* the step last asked (0 while backing off) */
        uint64_t high_pages;        /* the limit; RIGHTSIZE_HIGH_NONE: none */
        uint64_t wse_pages;         /* working set estimate, 0 before any */
        uint64_t reclaimed_pages;   /* total got back by the steps */
        unsigned fruitless;         /* steps in a row that got nothing with a request unanswered */
};

/* What the daemon reads for one tick. */
struct rightsize_input {
        uint64_t now_usec;         /* CLOCK_MONOTONIC */
        uint64_t stall_usec;       /* cumulative stall time of the target's kind */
        uint32_t avg_ppm;          /* the average of the target's kind and window */
        uint64_t usage_pages;
        uint64_t floor_pages;      /* max(effective min, effective low): never reclaimed */
};

/**
 * rightsize_target_parse - parse MemoryPressureTarget=: "some|full
 * avg10|avg60|avg300 P%" (words separated by blanks, P a decimal number of
 * at most 4 decimals, 0 < P <= 100), or "no" / "" for off.  Returns 0, or
 * -EINVAL with a static reason in *@ret_reason (may be NULL).
 */
int rightsize_target_parse(const char *s, struct rightsize_target *ret, const char **ret_reason);

/* The target as MemoryPressureTarget= writes it ("some avg10 0.1%", "no")
 * into @buf of RIGHTSIZE_TARGET_STRING_MAX bytes; returns @buf. */
char *rightsize_target_format(const struct rightsize_target *t, char *buf, size_t size);

/* The target as one number, for the layers of limits set over D-Bus
 * (daemon/service/state.h): 0 is off; never MB_LIMIT_UNSET.  Unpacking refuses
 * what packing cannot give (-EINVAL). */
uint64_t rightsize_target_pack(const struct rightsize_target *t);
int rightsize_target_unpack(uint64_t v, struct rightsize_target *ret);

/* Whether two targets are the same setting. */
bool rightsize_target_equal(const struct rightsize_target *a, const struct rightsize_target *b);

/* "off", "probing", "backoff", "idle", "stopped". */
const char *rightsize_state_to_string(enum rightsize_state s);

/**
 * rightsize_set_target - (re)start @rs with @target: the readings, the step,
 * the estimate and a stop start over; off when !@target->enabled.
 */
void rightsize_set_target(struct rightsize *rs, const struct rightsize_target *target);

/**
 * rightsize_tick - one interval of the loop with the readings @in: the
 * number of pages to reclaim now from the tenant's subtree (0: none), never
 * more than @in->usage_pages - @in->floor_pages; rs->high_pages is the
 * limit to apply from now on (never below the floor).  The first tick after
 * rightsize_set_target() only takes the readings.  The caller does not tick
 * while a step's reclaim is running.
 */
uint64_t rightsize_tick(struct rightsize *rs, const struct rightsize_input *in);

/**
 * rightsize_step_done - the reclaim of a step ended: @reclaimed_pages came
 * back, and @unanswered requests were not answered in time.  A step that
 * got nothing makes the tenant idle; RIGHTSIZE_STOP_STEPS of them in a row
 * with requests unanswered stop the controller and drop its limit.
 * @usage_pages is the usage now (the estimate when nothing came back).
 */
void rightsize_step_done(struct rightsize *rs, uint64_t reclaimed_pages, unsigned unanswered,
                         uint64_t usage_pages);
