/* SPDX-License-Identifier: MIT */
/*
 * harness.h - timing, repetition and Markdown tables for the benchmarks.
 *
 * Every benchmark program measures a few *cases* side by side: each case is
 * calibrated (which also warms it up), then all cases are measured in turn,
 * repetition after repetition, with the starting case rotated so that the
 * machine's drift and noise spread over all of them alike.  The median of the
 * repetitions is reported with the spread (min-max), and every row carries
 * the ratio to the row it is compared with (its value divided by that row's
 * value), so that noise that hits a whole run cancels in the ratio.
 *
 * Time is CLOCK_MONOTONIC (no TSC assumptions).
 *
 * Environment:
 *   MB_BENCH_QUICK=1   tiny counts and one repetition (CI: does it still run?)
 *   MB_BENCH_REPS=N    repetitions (default 7, at most BENCH_MAX_REPS)
 *   MB_BENCH_SAMPLE_MS wanted duration of one sample (default 20)
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_REPS 31
#define BENCH_DEFAULT_REPS 7
#define BENCH_DEFAULT_SAMPLE_MSEC 20

struct bench_opts {
        bool quick;          /* MB_BENCH_QUICK: tiny counts */
        unsigned reps;       /* measured repetitions per case */
        uint64_t sample_ns;  /* wanted duration of one sample */
};

/* Read the environment into @ret (see above). */
void bench_opts_init(struct bench_opts *ret);

/* Scale a count for quick mode: @full normally, @quick with MB_BENCH_QUICK. */
uint64_t bench_count(const struct bench_opts *o, uint64_t full, uint64_t quick);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID) in nanoseconds:
 * for single-threaded in-process loops, which should not be charged for the
 * time other processes of a shared machine took the CPU. */
uint64_t bench_thread_cpu_ns(void);

/* Keep the compiler from optimising @p (and what it points to) away. */
static inline void bench_clobber(const void *p) {
        __asm__ volatile("" : : "r"(p) : "memory");
}

struct bench_stat {
        double median;
        double min;
        double max;
        unsigned n;
};

/* Median, min and max of @n samples (n >= 1); @samples is not changed. */
void bench_stat_compute(const double *samples, unsigned n, struct bench_stat *ret);

/*
 * A case: run(ctx, iters) does @iters operations and returns the figure of
 * one sample (e.g. ns per operation, or pages per second).  The harness
 * times each call itself for calibration only.  A case may set `skip` (and
 * `skip_reason`) before bench_run(), or its run() may return a negative
 * value to skip from then on.
 */
struct bench_case {
        const char *name;
        double (*run)(void *ctx, uint64_t iters);
        void *ctx;
        uint64_t iters;      /* 0: calibrate to opts->sample_ns */
        uint64_t min_iters;  /* calibration starts here (default 1) */
        uint64_t max_iters;  /* calibration stops here (0: no cap) */
        bool ns_per_iter;    /* run() returns ns per iteration: calibrate on
                              * value × iters instead of the wall time of the
                              * call (for samples measured in a child process,
                              * whose start-up must not count) */
        bool skip;
        const char *skip_reason;
        const double *aux;   /* optional second figure that run() leaves here
                              * (e.g. CPU time per page); recorded with every
                              * measured sample into aux_stat */

        double samples[BENCH_MAX_REPS];
        double aux_samples[BENCH_MAX_REPS];
        unsigned nsamples;
        struct bench_stat stat;
        struct bench_stat aux_stat;
};

/* Calibrate and warm up every case, then measure them interleaved,
 * opts->reps times each, and fill in `stat`. */
void bench_run(struct bench_case *cases, size_t n, const struct bench_opts *o);

/* ---- Markdown output (stdout) ---- */

/* "## @title" and the question the table answers. */
void bench_table_begin(const char *title, const char *question);

/* A header row and its separator; NULL-terminated list of column names. */
void bench_table_columns(const char *first, ...) __attribute__((sentinel));

/* One row; NULL-terminated list of cells. */
void bench_table_cells(const char *first, ...) __attribute__((sentinel));

/* The common row: name | median | min-max | ratio to @base ("1.00× (base)"
 * for the base itself; the table's header says which row is the base).  @base may be NULL (no ratio).  A skipped case prints its
 * reason instead. */
void bench_table_row(const struct bench_case *c, const struct bench_case *base);

/* A free-text line under the table (notes, what a figure means). */
void bench_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A target of BENCHMARKS.md: prints "- target ...: met|MISSED (detail)"
 * and remembers the outcome for bench_finish(). */
void bench_target(bool met, const char *target, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* End of the program's output; returns the exit status (0). */
int bench_finish(void);

/* Number formatting with a precision that suits the magnitude. */
const char *bench_fmt(char *buf, size_t size, double v);
const char *bench_fmt_ratio(char *buf, size_t size, double r);

/* ---- Threads ---- */

/*
 * Run @fn(@arg, tid, @iters) in @nthreads threads released together by a
 * barrier; with @pin, thread i is pinned to online CPU i mod ncpus.  Returns
 * the CPU time (CLOCK_THREAD_CPUTIME_ID) the threads spent in @fn, averaged
 * over the threads, in ns: on a small shared machine, time a thread spends
 * preempted by other processes is noise, while cache-line transfers,
 * stalls and spinning (what a contention benchmark is after) are CPU time.
 */
double bench_threads(unsigned nthreads, void (*fn)(void *arg, unsigned tid, uint64_t iters), void *arg,
                     uint64_t iters, bool pin);

/* Same as bench_threads(), but the wall time from the release to the last
 * thread's end. */
double bench_threads_wall(unsigned nthreads, void (*fn)(void *arg, unsigned tid, uint64_t iters), void *arg,
                          uint64_t iters, bool pin);

/* Online CPUs. */
unsigned bench_ncpus(void);

/* ---- Child processes ---- */

/*
 * Run @argv (PATH lookup) with stdin from /dev/null; its stdout goes to
 * @out (NUL-terminated, truncated to @size) when @out is not NULL, else to
 * /dev/null.  Returns the wall time in ns, or a negative errno; a child that
 * did not exit 0 gives -ECHILD.
 */
double bench_spawn(char *const argv[], char *out, size_t size);

/*
 * The general-purpose allocators measured beside the library's: each is
 * preloaded (LD_PRELOAD=@soname) into a child process of its own, which
 * checks that @symbol, one only that allocator defines, resolves (the
 * preload took effect).
 */
struct bench_peer {
        const char *name;
        const char *soname;
        const char *symbol;
};
#define BENCH_NPEERS 3
extern const struct bench_peer bench_peers[BENCH_NPEERS];

/* bench_spawn() with LD_PRELOAD=@preload in the child's environment. */
double bench_spawn_preload(const char *preload, char *const argv[], char *out, size_t size);

/*
 * The cross-CPU round trip of this moment: a one-byte ping-pong over a unix
 * socketpair between this process and a child, pinned to the first two
 * allowed CPUs (their numbers in *@ret_cpu_a, *@ret_cpu_b).  Median ns per
 * round trip, or a negative errno (-ENODEV: fewer than two CPUs).  The
 * host's wake-up cost moves a lot over a day; tables print it beside their
 * figures (bench_note_round_trip()).
 */
double bench_round_trip_ns(unsigned *ret_cpu_a, unsigned *ret_cpu_b);
void bench_note_round_trip(void);

/* Raise RLIMIT_NOFILE's soft limit to at least @want (up to the hard
 * limit).  Returns the new soft limit. */
uint64_t bench_raise_nofile(uint64_t want);

/* A /proc/PID/status field in kB ("VmRSS", "RssAnon", "VmPTE", ...); pid 0 is
 * the caller.  Negative errno when absent. */
int64_t bench_proc_status_kb(int pid, const char *field);
