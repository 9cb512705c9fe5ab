/* SPDX-License-Identifier: MIT */
/*
 * harness.c - see harness.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

extern char **environ;

static unsigned targets_met, targets_missed;

static uint64_t env_u64(const char *name, uint64_t def) {
        const char *s = getenv(name);
        char *end;
        unsigned long long v;

        if (!s || !*s)
                return def;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || *end)
                return def;
        return v;
}

void bench_opts_init(struct bench_opts *ret) {
        const char *q = getenv("MB_BENCH_QUICK");

        ret->quick = q && *q && strcmp(q, "0") != 0;
        ret->reps = (unsigned) env_u64("MB_BENCH_REPS", ret->quick ? 1 : BENCH_DEFAULT_REPS);
        if (ret->reps < 1)
                ret->reps = 1;
        if (ret->reps > BENCH_MAX_REPS)
                ret->reps = BENCH_MAX_REPS;
        ret->sample_ns = env_u64("MB_BENCH_SAMPLE_MS", ret->quick ? 1 : BENCH_DEFAULT_SAMPLE_MSEC) * 1000000ULL;
        setvbuf(stdout, NULL, _IOLBF, 0);
}

uint64_t bench_count(const struct bench_opts *o, uint64_t full, uint64_t quick) {
        return o->quick ? quick : full;
}

uint64_t bench_now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

void bench_stat_compute(const double *samples, unsigned n, struct bench_stat *ret) {
        double s[BENCH_MAX_REPS];

        *ret = (struct bench_stat) { .n = n };
        if (n == 0 || n > BENCH_MAX_REPS)
                return;
        memcpy(s, samples, n * sizeof(double));
        qsort(s, n, sizeof(double), cmp_double);
        ret->min = s[0];
        ret->max = s[n - 1];
        ret->median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* Double the count until one call takes an eighth of the wanted sample time,
 * then scale to the sample time.  The calls also warm the case up. */
static void calibrate(struct bench_case *c, const struct bench_opts *o) {
        uint64_t iters = c->min_iters ? c->min_iters : 1;
        uint64_t cap = c->max_iters ? c->max_iters : UINT64_MAX / 4;

        for (;;) {
                uint64_t t0 = bench_now_ns();
                double r = c->run(c->ctx, iters);
                uint64_t dt = bench_now_ns() - t0;

                if (r < 0) {
                        c->skip = true;
                        return;
                }
                if (c->ns_per_iter)
                        dt = (uint64_t) (r * (double) iters);
                if (dt >= o->sample_ns / 8 || iters >= cap) {
                        double want = (double) iters * (double) o->sample_ns / (double) (dt ? dt : 1);
                        if (want > (double) cap)
                                want = (double) cap;
                        c->iters = want < (double) iters ? iters : (uint64_t) want;
                        if (c->iters < 1)
                                c->iters = 1;
                        return;
                }
                iters *= 2;
                if (iters > cap)
                        iters = cap;
        }
}

void bench_run(struct bench_case *cases, size_t n, const struct bench_opts *o) {
        for (size_t i = 0; i < n; i++) {
                struct bench_case *c = &cases[i];

                c->nsamples = 0;
                if (c->skip)
                        continue;
                if (c->iters == 0)
                        calibrate(c, o);
                else if (c->run(c->ctx, c->iters) < 0) /* warm-up */
                        c->skip = true;
        }

        for (unsigned r = 0; r < o->reps; r++)
                for (size_t k = 0; k < n; k++) {
                        struct bench_case *c = &cases[(k + r) % n];
                        double v;

                        if (c->skip)
                                continue;
                        v = c->run(c->ctx, c->iters);
                        if (v < 0) {
                                c->skip = true;
                                continue;
                        }
                        if (c->aux)
                                c->aux_samples[c->nsamples] = *c->aux;
                        c->samples[c->nsamples++] = v;
                }

        for (size_t i = 0; i < n; i++)
                if (!cases[i].skip) {
                        bench_stat_compute(cases[i].samples, cases[i].nsamples, &cases[i].stat);
                        if (cases[i].aux)
                                bench_stat_compute(cases[i].aux_samples, cases[i].nsamples, &cases[i].aux_stat);
                }
}

void bench_table_begin(const char *title, const char *question) {
        printf("\n## %s\n\n", title);
        if (question && *question)
                printf("%s\n\n", question);
}

static void print_cells(const char *first, va_list ap) {
        fputs("|", stdout);
        for (const char *s = first; s; s = va_arg(ap, const char *))
                printf(" %s |", s);
        fputs("\n", stdout);
}

void bench_table_columns(const char *first, ...) {
        va_list ap;
        unsigned n = 0;

        va_start(ap, first);
        print_cells(first, ap);
        va_end(ap);

        va_start(ap, first);
        for (const char *s = first; s; s = va_arg(ap, const char *))
                n++;
        va_end(ap);
        fputs("|", stdout);
        for (unsigned i = 0; i < n; i++)
                fputs(i == 0 ? " --- |" : " ---: |", stdout);
        fputs("\n", stdout);
}

void bench_table_cells(const char *first, ...) {
        va_list ap;

        va_start(ap, first);
        print_cells(first, ap);
        va_end(ap);
}

const char *bench_fmt(char *buf, size_t size, double v) {
        double a = fabs(v);

        if (a >= 1e7)
                snprintf(buf, size, "%.3g", v);
        else if (a >= 100 || a == 0)
                snprintf(buf, size, "%.0f", v);
        else if (a >= 10)
                snprintf(buf, size, "%.1f", v);
        else if (a >= 1)
                snprintf(buf, size, "%.2f", v);
        else
                snprintf(buf, size, "%.3g", v);
        return buf;
}

const char *bench_fmt_ratio(char *buf, size_t size, double r) {
        if (!isfinite(r))
                snprintf(buf, size, "n/a");
        else if (r >= 100)
                snprintf(buf, size, "%.0f×", r);
        else if (r >= 10)
                snprintf(buf, size, "%.1f×", r);
        else if (r >= 0.1 || r == 0)
                snprintf(buf, size, "%.2f×", r);
        else
                snprintf(buf, size, "%.2g×", r);
        return buf;
}

void bench_table_row(const struct bench_case *c, const struct bench_case *base) {
        char med[32], lo[32], hi[32], spread[80], ratio[96];

        if (c->skip) {
                char reason[256];
                snprintf(reason, sizeof reason, "skipped: %s", c->skip_reason ? c->skip_reason : "failed");
                bench_table_cells(c->name, reason, "", "", NULL);
                return;
        }
        bench_fmt(med, sizeof med, c->stat.median);
        snprintf(spread, sizeof spread, "%s–%s", bench_fmt(lo, sizeof lo, c->stat.min),
                 bench_fmt(hi, sizeof hi, c->stat.max));
        if (!base)
                snprintf(ratio, sizeof ratio, "—");
        else if (base == c)
                snprintf(ratio, sizeof ratio, "1.00× (base)");
        else if (base->skip || base->stat.median == 0)
                snprintf(ratio, sizeof ratio, "n/a");
        else
                bench_fmt_ratio(ratio, sizeof ratio, c->stat.median / base->stat.median);
        bench_table_cells(c->name, med, spread, ratio, NULL);
}

void bench_note(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        fputs("\n", stdout);
}

void bench_target(bool met, const char *target, const char *fmt, ...) {
        va_list ap;

        printf("- target \"%s\": **%s** (", target, met ? "met" : "MISSED");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        fputs(")\n", stdout);
        if (met)
                targets_met++;
        else
                targets_missed++;
}

int bench_finish(void) {
        fflush(stdout);
        return 0;
}

/* ---- Threads ---- */

unsigned bench_ncpus(void) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (unsigned) n : 1;
}

struct thread_arg {
        void (*fn)(void *arg, unsigned tid, uint64_t iters);
        void *arg;
        unsigned tid;
        uint64_t iters;
        bool pin;
        pthread_barrier_t *barrier;
        uint64_t end_ns;
        uint64_t cpu_ns;
};

uint64_t bench_thread_cpu_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static void *thread_main(void *p) {
        struct thread_arg *a = p;
        uint64_t c0;

        if (a->pin) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(a->tid % bench_ncpus(), &set);
                (void) pthread_setaffinity_np(pthread_self(), sizeof set, &set);
        }
        pthread_barrier_wait(a->barrier);
        c0 = bench_thread_cpu_ns();
        a->fn(a->arg, a->tid, a->iters);
        a->cpu_ns = bench_thread_cpu_ns() - c0;
        a->end_ns = bench_now_ns();
        return NULL;
}

static double run_threads(unsigned nthreads, void (*fn)(void *arg, unsigned tid, uint64_t iters), void *arg,
                          uint64_t iters, bool pin, bool wall) {
        pthread_barrier_t barrier;
        pthread_t th[64];
        struct thread_arg ta[64];
        uint64_t start, end = 0, cpu = 0;

        if (nthreads < 1 || nthreads > 64)
                return -EINVAL;
        pthread_barrier_init(&barrier, NULL, nthreads + 1);
        for (unsigned i = 0; i < nthreads; i++) {
                ta[i] = (struct thread_arg) { fn, arg, i, iters, pin, &barrier, 0, 0 };
                if (pthread_create(&th[i], NULL, thread_main, &ta[i]) != 0) {
                        fprintf(stderr, "bench: pthread_create failed\n");
                        abort();
                }
        }
        start = bench_now_ns();
        pthread_barrier_wait(&barrier);
        for (unsigned i = 0; i < nthreads; i++) {
                pthread_join(th[i], NULL);
                if (ta[i].end_ns > end)
                        end = ta[i].end_ns;
                cpu += ta[i].cpu_ns;
        }
        pthread_barrier_destroy(&barrier);
        return wall ? (double) (end - start) : (double) cpu / nthreads;
}

double bench_threads(unsigned nthreads, void (*fn)(void *arg, unsigned tid, uint64_t iters), void *arg,
                     uint64_t iters, bool pin) {
        return run_threads(nthreads, fn, arg, iters, pin, false);
}

double bench_threads_wall(unsigned nthreads, void (*fn)(void *arg, unsigned tid, uint64_t iters), void *arg,
                          uint64_t iters, bool pin) {
        return run_threads(nthreads, fn, arg, iters, pin, true);
}

/* ---- Child processes ---- */

static double spawn_env(char *const argv[], char *const envp[], char *out, size_t size);

double bench_spawn(char *const argv[], char *out, size_t size) {
        return spawn_env(argv, environ, out, size);
}

const struct bench_peer bench_peers[BENCH_NPEERS] = {
        { "tcmalloc", "libtcmalloc_minimal.so.4", "tc_malloc" },
        { "jemalloc", "libjemalloc.so.2", "mallocx" },
        { "mimalloc", "libmimalloc.so.2", "mi_malloc" },
};

double bench_spawn_preload(const char *preload, char *const argv[], char *out, size_t size) {
        size_t n = 0, k = 0;
        char **envp, *var;
        double r;

        while (environ[n])
                n++;
        envp = calloc(n + 2, sizeof(*envp));
        if (asprintf(&var, "LD_PRELOAD=%s", preload) < 0)
                var = NULL;
        if (!envp || !var) {
                free(envp);
                free(var);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
                        envp[k++] = environ[i];
        envp[k++] = var;
        envp[k] = NULL;
        r = spawn_env(argv, envp, out, size);
        free(envp);
        free(var);
        return r;
}

static void pin_to(unsigned cpu) {
        cpu_set_t set;

        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        (void) sched_setaffinity(0, sizeof(set), &set);
}

double bench_round_trip_ns(unsigned *ret_cpu_a, unsigned *ret_cpu_b) {
        enum { WARM = 1000, ROUNDS = 2000, SAMPLES = 5 };
        unsigned cpus[2] = { 0, 0 }, found = 0;
        double samples[SAMPLES];
        struct bench_stat st;
        cpu_set_t old, online;
        int sv[2];
        pid_t pid;
        char b = 0;

        if (sched_getaffinity(0, sizeof(old), &old) < 0)
                return -errno;
        online = old;
        for (unsigned i = 0; i < CPU_SETSIZE && found < 2; i++)
                if (CPU_ISSET(i, &online))
                        cpus[found++] = i;
        if (found < 2)
                return -ENODEV;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                close(sv[0]);
                close(sv[1]);
                return -errno;
        }
        if (pid == 0) {
                /* The echo side, on the second CPU. */
                close(sv[0]);
                pin_to(cpus[1]);
                while (read(sv[1], &b, 1) == 1)
                        if (write(sv[1], &b, 1) != 1)
                                break;
                _exit(0);
        }
        close(sv[1]);
        pin_to(cpus[0]);
        for (unsigned s = 0; s <= SAMPLES; s++) {
                unsigned n = s == 0 ? WARM : ROUNDS;
                uint64_t t0 = bench_now_ns();

                for (unsigned i = 0; i < n; i++)
                        if (write(sv[0], &b, 1) != 1 || read(sv[0], &b, 1) != 1)
                                break;
                if (s > 0)
                        samples[s - 1] = (double) (bench_now_ns() - t0) / n;
        }
        close(sv[0]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        (void) sched_setaffinity(0, sizeof(old), &old);
        bench_stat_compute(samples, SAMPLES, &st);
        if (ret_cpu_a)
                *ret_cpu_a = cpus[0];
        if (ret_cpu_b)
                *ret_cpu_b = cpus[1];
        return st.median;
}

void bench_note_round_trip(void) {
        unsigned a, b;
        double rtt = bench_round_trip_ns(&a, &b);
        char buf[32];

        if (rtt < 0)
                bench_note("Cross-CPU round trip of this run: not measured (%s).",
                           rtt == -ENODEV ? "fewer than two CPUs" : strerror((int) -rtt));
        else
                bench_note("Cross-CPU round trip of this run: %s µs (unix socketpair ping-pong between two "
                           "processes pinned to CPUs %u and %u, median of 5 × 2,000).",
                           bench_fmt(buf, sizeof buf, rtt / 1000.0), a, b);
}

static double spawn_env(char *const argv[], char *const envp[], char *out, size_t size) {
        posix_spawn_file_actions_t fa;
        int pfd[2] = { -1, -1 };
        size_t len = 0;
        uint64_t t0, t1;
        pid_t pid;
        int r, status;

        if (out && pipe2(pfd, O_CLOEXEC) < 0)
                return -errno;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        if (out)
                posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
        else
                posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);

        t0 = bench_now_ns();
        r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        if (out)
                close(pfd[1]);
        if (r != 0) {
                if (out)
                        close(pfd[0]);
                return -r;
        }
        if (out) {
                for (;;) {
                        ssize_t k;
                        char sink[4096];

                        if (len + 1 < size)
                                k = read(pfd[0], out + len, size - 1 - len);
                        else
                                k = read(pfd[0], sink, sizeof sink);
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k <= 0)
                                break;
                        if (len + 1 < size)
                                len += (size_t) k;
                }
                out[len] = 0;
                close(pfd[0]);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        t1 = bench_now_ns();
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -ECHILD;
        return (double) (t1 - t0);
}

uint64_t bench_raise_nofile(uint64_t want) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 0;
        if (rl.rlim_cur < want) {
                rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
                (void) getrlimit(RLIMIT_NOFILE, &rl);
        }
        return rl.rlim_cur;
}

int64_t bench_proc_status_kb(int pid, const char *field) {
        char path[64], line[256];
        size_t flen = strlen(field);
        int64_t v = -ENOENT;
        FILE *f;

        if (pid)
                snprintf(path, sizeof path, "/proc/%d/status", pid);
        else
                snprintf(path, sizeof path, "/proc/self/status");
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof line, f))
                if (strncmp(line, field, flen) == 0 && line[flen] == ':') {
                        v = strtoll(line + flen + 1, NULL, 10);
                        break;
                }
        fclose(f);
        return v;
}
