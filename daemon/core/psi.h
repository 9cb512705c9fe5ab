/* SPDX-License-Identifier: MIT */
/*
 * psi.h - pressure stall information of a tenant, as the kernel's
 * kernel/sched/psi.c keeps it for a cgroup (memory.pressure).
 *
 * A psi_group counts its members (connected clients, the kernel's non-idle
 * tasks) and how many of them are stalled on memory (a client whose
 * application thread waits for a charge the daemon holds: a reclaim round,
 * a wait at max, the high throttle).  On every change the time spent in the
 * state that ends is added to the totals (psi_group_change() /
 * record_times()):
 *
 *   SOME  while nr_stalled > 0
 *   FULL  while nr_stalled == nr_members > 0
 *
 * Every PSI_PERIOD_USEC (2 s) the growth of each total over the period is
 * folded into three exponentially decaying averages, with the kernel's
 * fixed-point arithmetic (update_averages(), calc_avgs(): EXP_10s, EXP_60s,
 * EXP_300s), lazily when the group is read or touched, so an idle group
 * costs nothing and still decays correctly (missed periods count as 0 %).
 *
 * Triggers are the kernel's psi_trigger: a threshold of stall within a
 * sliding window (500 ms .. 10 s); window_update() interpolates the
 * previous window's growth, and an event fires at most once per window
 * while the growth stays above the threshold (update_triggers()).
 *
 * Times are CLOCK_MONOTONIC microseconds given by the caller, so the logic
 * runs on synthetic clocks in tests.  Each group has its own mutex (a leaf
 * lock); readers and writers may be on any thread.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The averaging period (the kernel's psi_period, PSI_FREQ = 2 s). */
#define PSI_PERIOD_USEC 2000000ULL
/* Trigger windows (the kernel's WINDOW_MIN_US, WINDOW_MAX_US). */
#define PSI_WINDOW_MIN_USEC 500000ULL
#define PSI_WINDOW_MAX_USEC 10000000ULL
/* Longest text of psi_format(): two lines of
 * "some avg10=100.00 avg60=100.00 avg300=100.00 total=18446744073709551615\n". */
#define PSI_TEXT_MAX_BYTES 160

enum psi_kind {
        PSI_SOME = 0,
        PSI_FULL,
        _PSI_KIND_NR,
};

/* One line of memory.pressure. */
struct psi_reading {
        uint64_t total_usec; /* cumulative stall time */
        /* avg10, avg60, avg300 in hundredths of a percent (0..10000), as
         * the kernel prints them: LOAD_INT.LOAD_FRAC. */
        unsigned avg10, avg60, avg300;
};

struct psi_group {
        pthread_mutex_t lock;
        unsigned nr_members; /* connected clients (non-idle tasks) */
        unsigned nr_stalled; /* of which stalled on memory */
        uint64_t state_start_usec; /* when the counts last changed */
        uint64_t total_usec[_PSI_KIND_NR];

        /* update_averages(): the part of total already sampled, and the
         * averages in FIXED_1 fixed point ([kind][10s, 60s, 300s]). */
        uint64_t avg_total_usec[_PSI_KIND_NR];
        uint64_t avg_last_update_usec;
        uint64_t avg_next_update_usec;
        unsigned long avg[_PSI_KIND_NR][3];
};

/* A monotonic clock in microseconds (CLOCK_MONOTONIC). */
uint64_t psi_now_usec(void);

/* An empty group whose clocks start at @now_usec.  Returns 0 or -errno
 * (the mutex could not be set up). */
int psi_group_init(struct psi_group *g, uint64_t now_usec);
/* Release what psi_group_init() set up; the group is unused by then. */
void psi_group_destroy(struct psi_group *g);

/**
 * psi_group_change - psi_group_change(): record the time spent in the state
 * that ends at @now_usec, then add @d_members members and @d_stalled
 * stalled members (negative: remove).  A member leaves unstalled: a caller
 * removing a stalled member passes d_stalled = -1 with d_members = -1.
 * Counts never go below zero, nr_stalled never above nr_members (a
 * mismatch is clamped: tolerated, not trusted).  Thread-safe.
 */
void psi_group_change(struct psi_group *g, int d_members, int d_stalled, uint64_t now_usec);

/**
 * psi_group_read - one line of memory.pressure at @now_usec: the total,
 * including the state still in progress, and the averages, updated first
 * when a period has passed (psi_show() -> update_averages()).  Thread-safe.
 */
void psi_group_read(struct psi_group *g, enum psi_kind kind, uint64_t now_usec, struct psi_reading *ret);

/* Both totals at @now_usec, the state in progress included (what the
 * kernel's poll side aggregates for its triggers).  Thread-safe. */
void psi_group_totals(struct psi_group *g, uint64_t now_usec, uint64_t ret[_PSI_KIND_NR]);

/* "some" / "full"; NULL when out of range. */
const char *psi_kind_to_string(enum psi_kind kind);

/**
 * psi_format - the text of memory.pressure for @some and @full, exactly the
 * kernel's layout:
 *   "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
 *   "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
 * into @buf of @size bytes (PSI_TEXT_MAX_BYTES always suffices).  Returns
 * the length, or -ENOBUFS when it does not fit.
 */
int psi_format(const struct psi_reading *some, const struct psi_reading *full, char *buf, size_t size);

/* ---- triggers ---- */

struct psi_trigger {
        enum psi_kind kind;
        uint64_t threshold_usec;
        uint64_t window_usec;
        /* struct psi_window */
        uint64_t win_start_usec;
        uint64_t win_start_value_usec;
        uint64_t win_prev_growth_usec;
        uint64_t last_total_usec;   /* the total seen by the last update */
        uint64_t last_event_usec;   /* 0: never fired */
        bool pending_event;
};

/**
 * psi_trigger_parse - psi_trigger_create()'s syntax: "some|full THRESHOLD
 * WINDOW" in microseconds, WINDOW in PSI_WINDOW_MIN_USEC ..
 * PSI_WINDOW_MAX_USEC and 0 < THRESHOLD <= WINDOW.  Returns 0 or -EINVAL.
 */
int psi_trigger_parse(const char *spec, enum psi_kind *ret_kind, uint64_t *ret_threshold_usec,
                      uint64_t *ret_window_usec);

/* Arm @tr at @now_usec with the group's current @total_usec of @kind (the
 * window starts now, nothing is pending). */
void psi_trigger_init(struct psi_trigger *tr, enum psi_kind kind, uint64_t threshold_usec, uint64_t window_usec,
                      uint64_t total_usec, uint64_t now_usec);

/**
 * psi_trigger_update - update_triggers() for one trigger: @total_usec is
 * the group's current total of @tr's kind at @now_usec (non-decreasing
 * calls).  Returns true when an event is to be delivered now: the growth
 * within the window (window_update(), the previous window's growth
 * interpolated over the part not yet elapsed) reached the threshold, and
 * no event fired within the last window (a breach seen meanwhile is kept
 * pending and delivered once the window since the last event has passed:
 * events are rate-limited, not dropped).
 */
bool psi_trigger_update(struct psi_trigger *tr, uint64_t total_usec, uint64_t now_usec);
