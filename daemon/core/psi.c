/* SPDX-License-Identifier: MIT */
/*
 * psi.c - pressure stall accounting of a group (see psi.h), after the
 * kernel's kernel/sched/psi.c.
 *
 * The kernel keeps per-CPU state and aggregates it; a tenant's members are
 * clients, each stalled or not, so one group-wide count under a mutex is
 * exact and cheap: a state changes only when a charge waits in the daemon
 * (a parked charge or a throttle), never on the fast path.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "psi.h"

/* include/linux/sched/loadavg.h: the load average's fixed point. */
#define PSI_FSHIFT 11
#define PSI_FIXED_1 (1UL << PSI_FSHIFT)
/* 1/exp(2s/10s), 1/exp(2s/60s), 1/exp(2s/300s) in that fixed point
 * (kernel/sched/psi.c: EXP_10s, EXP_60s, EXP_300s). */
#define PSI_EXP_10S 1677UL
#define PSI_EXP_60S 1981UL
#define PSI_EXP_300S 2034UL

static const unsigned long psi_exp[3] = { PSI_EXP_10S, PSI_EXP_60S, PSI_EXP_300S };

uint64_t psi_now_usec(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
}

int psi_group_init(struct psi_group *g, uint64_t now_usec) {
        int r;

        memset(g, 0, sizeof(*g));
        r = pthread_mutex_init(&g->lock, NULL);
        if (r != 0)
                return -r;
        g->state_start_usec = now_usec;
        g->avg_last_update_usec = now_usec;
        g->avg_next_update_usec = now_usec + PSI_PERIOD_USEC;
        return 0;
}

void psi_group_destroy(struct psi_group *g) {
        pthread_mutex_destroy(&g->lock);
}

/* record_times(): the state since state_start, up to @now_usec. */
static void psi_record_times(struct psi_group *g, uint64_t now_usec) {
        uint64_t delta;

        if (now_usec <= g->state_start_usec)
                return;
        delta = now_usec - g->state_start_usec;
        g->state_start_usec = now_usec;
        if (g->nr_stalled > 0) {
                g->total_usec[PSI_SOME] += delta;
                if (g->nr_stalled == g->nr_members)
                        g->total_usec[PSI_FULL] += delta;
        }
}

/* calc_load() of include/linux/sched/loadavg.h. */
static unsigned long psi_calc_load(unsigned long load, unsigned long exp, unsigned long active) {
        unsigned long newload = load * exp + active * (PSI_FIXED_1 - exp);

        if (active >= load)
                newload += PSI_FIXED_1 - 1;
        return newload / PSI_FIXED_1;
}

/* fixed_power_int(): @x ** @n in fixed point with @frac_bits. */
static unsigned long psi_fixed_power_int(unsigned long x, unsigned frac_bits, uint64_t n) {
        unsigned long result = 1UL << frac_bits;

        if (n) {
                for (;;) {
                        if (n & 1) {
                                result *= x;
                                result += 1UL << (frac_bits - 1);
                                result >>= frac_bits;
                        }
                        n >>= 1;
                        if (!n)
                                break;
                        x *= x;
                        x += 1UL << (frac_bits - 1);
                        x >>= frac_bits;
                }
        }
        return result;
}

/* calc_load_n(). */
static unsigned long psi_calc_load_n(unsigned long load, unsigned long exp, unsigned long active, uint64_t n) {
        return psi_calc_load(load, psi_fixed_power_int(exp, PSI_FSHIFT, n), active);
}

/* calc_avgs(): decay for the missed periods (no sample: 0 %), then fold in
 * the sample of the last one. */
static void psi_calc_avgs(unsigned long avg[3], uint64_t missed_periods, uint64_t time_usec, uint64_t period_usec) {
        unsigned long pct;

        if (missed_periods)
                for (int i = 0; i < 3; i++)
                        avg[i] = psi_calc_load_n(avg[i], psi_exp[i], 0, missed_periods);
        pct = period_usec ? (unsigned long) (time_usec * 100 / period_usec) : 0;
        pct *= PSI_FIXED_1;
        for (int i = 0; i < 3; i++)
                avg[i] = psi_calc_load(avg[i], psi_exp[i], pct);
}

/* update_averages(), when a period is over at @now_usec; the totals are
 * current (psi_record_times() ran). */
static void psi_update_averages(struct psi_group *g, uint64_t now_usec) {
        uint64_t expires = g->avg_next_update_usec, missed_periods = 0, period;

        if (now_usec < expires)
                return;
        if (now_usec - expires >= PSI_PERIOD_USEC)
                missed_periods = (now_usec - expires) / PSI_PERIOD_USEC;
        g->avg_next_update_usec = expires + (1 + missed_periods) * PSI_PERIOD_USEC;
        period = now_usec - (g->avg_last_update_usec + missed_periods * PSI_PERIOD_USEC);
        g->avg_last_update_usec = now_usec;

        for (int k = 0; k < _PSI_KIND_NR; k++) {
                uint64_t sample = g->total_usec[k] - g->avg_total_usec[k];

                /* The stall of the period can exceed it only through
                 * rounding of the clocks: clamp, as the kernel does. */
                if (sample > period)
                        sample = period;
                g->avg_total_usec[k] += sample;
                psi_calc_avgs(g->avg[k], missed_periods, sample, period);
        }
}

/*
 * Bring the group to @now_usec as if the kernel's psi_avgs_work() had run
 * at every period's end: the state has not changed since state_start, so
 * each period's stall is known exactly.  Without this, a group touched
 * after a long stall would carry the unsampled overage into later periods
 * (update_averages() punts what exceeds a period into the next) and show
 * 100 % long after the stall ended.  Periods with no stall and nothing
 * left to sample are folded at once (calc_load_n() over the missed
 * periods), so an idle group costs one step however long it slept; a
 * stalled one, one step per 2 s of the stall.
 */
static void psi_catch_up(struct psi_group *g, uint64_t now_usec) {
        while (now_usec >= g->avg_next_update_usec) {
                if (g->nr_stalled == 0 && g->total_usec[PSI_SOME] == g->avg_total_usec[PSI_SOME] &&
                    g->total_usec[PSI_FULL] == g->avg_total_usec[PSI_FULL])
                        break;
                psi_record_times(g, g->avg_next_update_usec);
                psi_update_averages(g, g->avg_next_update_usec);
        }
        psi_record_times(g, now_usec);
        psi_update_averages(g, now_usec);
}

void psi_group_change(struct psi_group *g, int d_members, int d_stalled, uint64_t now_usec) {
        long m, s;

        pthread_mutex_lock(&g->lock);
        psi_catch_up(g, now_usec);
        m = (long) g->nr_members + d_members;
        s = (long) g->nr_stalled + d_stalled;
        if (m < 0)
                m = 0;
        if (s < 0)
                s = 0;
        if (s > m)
                s = m;
        g->nr_members = (unsigned) m;
        g->nr_stalled = (unsigned) s;
        pthread_mutex_unlock(&g->lock);
}

/* LOAD_INT(x) * 100 + LOAD_FRAC(x): hundredths of a percent. */
static unsigned psi_avg_hundredths(unsigned long avg) {
        unsigned long whole = avg >> PSI_FSHIFT, frac = ((avg & (PSI_FIXED_1 - 1)) * 100) >> PSI_FSHIFT;

        return (unsigned) (whole * 100 + frac);
}

void psi_group_read(struct psi_group *g, enum psi_kind kind, uint64_t now_usec, struct psi_reading *ret) {
        pthread_mutex_lock(&g->lock);
        psi_catch_up(g, now_usec);
        ret->total_usec = g->total_usec[kind];
        ret->avg10 = psi_avg_hundredths(g->avg[kind][0]);
        ret->avg60 = psi_avg_hundredths(g->avg[kind][1]);
        ret->avg300 = psi_avg_hundredths(g->avg[kind][2]);
        pthread_mutex_unlock(&g->lock);
}

void psi_group_totals(struct psi_group *g, uint64_t now_usec, uint64_t ret[_PSI_KIND_NR]) {
        pthread_mutex_lock(&g->lock);
        psi_catch_up(g, now_usec);
        for (int k = 0; k < _PSI_KIND_NR; k++)
                ret[k] = g->total_usec[k];
        pthread_mutex_unlock(&g->lock);
}

const char *psi_kind_to_string(enum psi_kind kind) {
        switch (kind) {
        case PSI_SOME:
                return "some";
        case PSI_FULL:
                return "full";
        default:
                return NULL;
        }
}

int psi_format(const struct psi_reading *some, const struct psi_reading *full, char *buf, size_t size) {
        const struct psi_reading *r[_PSI_KIND_NR] = { some, full };
        size_t len = 0;

        for (int k = 0; k < _PSI_KIND_NR; k++) {
                /* psi_show(): "%s avg10=%lu.%02lu avg60=%lu.%02lu
                 * avg300=%lu.%02lu total=%llu\n". */
                int n = snprintf(buf + len, size - len, "%s avg10=%u.%02u avg60=%u.%02u avg300=%u.%02u total=%" PRIu64 "\n",
                                 psi_kind_to_string((enum psi_kind) k), r[k]->avg10 / 100, r[k]->avg10 % 100,
                                 r[k]->avg60 / 100, r[k]->avg60 % 100, r[k]->avg300 / 100, r[k]->avg300 % 100,
                                 r[k]->total_usec);

                if (n < 0 || (size_t) n >= size - len)
                        return -ENOBUFS;
                len += (size_t) n;
        }
        return (int) len;
}

/* ---- triggers ---- */

int psi_trigger_parse(const char *spec, enum psi_kind *ret_kind, uint64_t *ret_threshold_usec,
                      uint64_t *ret_window_usec) {
        unsigned long long threshold, window;
        enum psi_kind kind;
        char word[5];
        int end = 0;

        if (!spec || sscanf(spec, "%4s %llu %llu%n", word, &threshold, &window, &end) != 3)
                return -EINVAL;
        /* Nothing but blanks after the window. */
        for (const char *p = spec + end; *p; p++)
                if (*p != ' ' && *p != '\t' && *p != '\n')
                        return -EINVAL;
        if (strcmp(word, "some") == 0)
                kind = PSI_SOME;
        else if (strcmp(word, "full") == 0)
                kind = PSI_FULL;
        else
                return -EINVAL;
        /* psi_trigger_create(). */
        if (window < PSI_WINDOW_MIN_USEC || window > PSI_WINDOW_MAX_USEC)
                return -EINVAL;
        if (threshold == 0 || threshold > window)
                return -EINVAL;
        *ret_kind = kind;
        *ret_threshold_usec = threshold;
        *ret_window_usec = window;
        return 0;
}

void psi_trigger_init(struct psi_trigger *tr, enum psi_kind kind, uint64_t threshold_usec, uint64_t window_usec,
                      uint64_t total_usec, uint64_t now_usec) {
        *tr = (struct psi_trigger) {
                .kind = kind,
                .threshold_usec = threshold_usec,
                .window_usec = window_usec,
                .win_start_usec = now_usec,
                .win_start_value_usec = total_usec,
                .last_total_usec = total_usec,
        };
}

/* window_update(): the growth within the window; past its end the window
 * restarts and the growth becomes prev_growth, interpolated linearly over
 * the part of the next window not yet elapsed. */
static uint64_t psi_window_update(struct psi_trigger *tr, uint64_t now_usec, uint64_t value) {
        uint64_t elapsed = now_usec - tr->win_start_usec, growth = value - tr->win_start_value_usec;

        if (elapsed > tr->window_usec) {
                tr->win_start_usec = now_usec;
                tr->win_start_value_usec = value;
                tr->win_prev_growth_usec = growth;
        } else {
                uint64_t remaining = tr->window_usec - elapsed;

                growth += tr->win_prev_growth_usec * remaining / tr->window_usec;
        }
        return growth;
}

bool psi_trigger_update(struct psi_trigger *tr, uint64_t total_usec, uint64_t now_usec) {
        bool new_stall = total_usec != tr->last_total_usec;

        tr->last_total_usec = total_usec;
        if (!new_stall && !tr->pending_event)
                return false;
        if (new_stall) {
                uint64_t growth = psi_window_update(tr, now_usec, total_usec);

                if (!tr->pending_event) {
                        if (growth < tr->threshold_usec)
                                return false;
                        tr->pending_event = true;
                }
        }
        /* At most one event per window. */
        if (tr->last_event_usec != 0 && now_usec < tr->last_event_usec + tr->window_usec)
                return false;
        tr->last_event_usec = now_usec;
        tr->pending_event = false;
        return true;
}
