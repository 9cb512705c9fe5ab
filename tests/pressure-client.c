/* SPDX-License-Identifier: MIT */
/*
 * pressure-client.c - a scriptable real client for the pressure tests.
 *
 *   pressure-client --socket PATH --tenant PATH [--no-thread] [--name NAME]
 *                   [--exit-delay-ms MS] [--shrink-skip N] [--shrink-max N]
 *                   [--cpu N] [--no-shrinker]
 *
 * Reads one command per line from stdin (a FIFO the test writes to) and
 * answers one line per command on stdout:
 *
 *   alloc N     allocate N pages one by one and write a pattern into each
 *               -> "alloc ok N" | "alloc ENOMEM K <reason>" (K pages got)
 *   allocnw N   the same with mb_page_alloc_flags(MB_ALLOC_NOWAIT)
 *               -> "allocnw ok N" | "allocnw EAGAIN K <reason>"
 *   allocnr N   the same with mb_page_alloc_flags(MB_ALLOC_NORETRY)
 *   bulknw N    N pages in one mb_page_alloc_bulk_flags(MB_ALLOC_NOWAIT)
 *               -> "bulknw ok N" | "bulknw EAGAIN 0 <reason>"
 *   free N      free N of the pages it holds -> "free ok N"
 *   cache N     put N more pages into its cache (a shrinker can free them)
 *               -> "cache ok N" | "cache ENOMEM K <reason>"
 *   report      -> "report app=P cache=C stock=S scans=N scanned=M freed=F
 *                   events=E high=H max=X oom=O requests=R"
 *               (pages; stock from its stats slots; shrinker calls, pages
 *               asked, pages freed; events received by the callback; the
 *               daemon's Reclaim and Drain requests answered)
 *   trigger SPEC  mb_pressure_trigger(SPEC, e.g. "some 50000 1000000")
 *               -> "trigger ok FD" | "trigger ERRNO <reason>"
 *   events FD   read the trigger's eventfd without blocking
 *               -> "events N" (events since the last read; 0: none)
 *   untrigger FD  mb_pressure_trigger_close() -> "untrigger ok" | "untrigger ERRNO"
 *   quit        verify every page, close -> "bye verify=ok|FAILED"
 *
 * The cache is a list of pages behind a shrinker (count = cache size, scan =
 * free the oldest; with --shrink-skip N, its first N calls free nothing, like
 * a shrinker whose objects are busy at first; with --shrink-max N, a call
 * frees at most N pages, like a slow shrinker; with --no-shrinker it is not
 * registered: the client has nothing a reclaim can free but its stock).  --cpu N pins the client to
 * CPU N, so that one per-CPU stock serves every allocation.  With --no-thread the client is built with
 * MB_CONNECT_NO_THREAD and polls mb_get_fd() next to stdin, calling
 * mb_process(); otherwise the library's thread answers the daemon.
 *
 * With --exit-delay-ms the client exits slowly, like a process whose exit
 * takes time to tear its memory down: a child traces it with
 * PTRACE_O_TRACEEXIT and holds it in its exit stop (before its files and
 * memory go) for MS milliseconds, even after SIGKILL.  The ready line says
 * traced=1 when that works, traced=0 when ptrace is not permitted.
 */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/mb_internal.h"
#include "membroker.h"

struct page {
        void *p;
        uint64_t key;
};

static mb_client *client;
static size_t page_size;
static uint64_t next_key = 1;

static struct page *app;
static size_t napp, app_alloc;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct page *cache; /* oldest first */
static size_t ncache, cache_alloc;
static unsigned long scans, scanned, freed;
static unsigned long shrink_skip; /* scan calls left that free nothing */
static unsigned long shrink_max;  /* pages a scan call frees at most; 0: no cap */
static unsigned long verify_errors;

static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long nevents, ev_high, ev_max, ev_oom;

static void fill(struct page *pg) {
        uint64_t *w = pg->p;

        for (size_t i = 0; i < page_size / sizeof(uint64_t); i++)
                w[i] = pg->key * UINT64_C(0x9E3779B97F4A7C15) + i;
}

static void check(const struct page *pg) {
        const uint64_t *w = pg->p;

        for (size_t i = 0; i < page_size / sizeof(uint64_t); i++)
                if (w[i] != pg->key * UINT64_C(0x9E3779B97F4A7C15) + i) {
                        if (verify_errors++ == 0)
                                fprintf(stderr, "pressure-client: page %p holds the wrong data\n", pg->p);
                        return;
                }
}

static int push(struct page **v, size_t *n, size_t *alloc, struct page pg) {
        if (*n == *alloc) {
                size_t a = *alloc ? *alloc * 2 : 256;
                struct page *nv = realloc(*v, a * sizeof(*nv));

                if (!nv)
                        return -ENOMEM;
                *v = nv;
                *alloc = a;
        }
        (*v)[(*n)++] = pg;
        return 0;
}

static unsigned long cache_count(void *userdata) {
        unsigned long n;

        pthread_mutex_lock(&cache_lock);
        n = ncache;
        pthread_mutex_unlock(&cache_lock);
        return n;
}

static unsigned long cache_scan(void *userdata, unsigned long nr) {
        unsigned long done = 0;

        pthread_mutex_lock(&cache_lock);
        scans++;
        scanned += nr;
        if (shrink_skip > 0) {
                shrink_skip--;
                nr = 0;
        }
        if (shrink_max > 0 && nr > shrink_max)
                nr = shrink_max;
        while (done < nr && ncache > 0) {
                check(&cache[0]);
                if (mb_page_free(client, cache[0].p) < 0)
                        fprintf(stderr, "pressure-client: shrinker free: %s\n", mb_last_error());
                memmove(cache, cache + 1, (ncache - 1) * sizeof(*cache));
                ncache--;
                done++;
        }
        freed += done;
        pthread_mutex_unlock(&cache_lock);
        return done;
}

static const struct mb_shrinker shrinker = { .count = cache_count, .scan = cache_scan };

static void on_event(mb_client *c, const char *event, uint64_t count, void *userdata) {
        pthread_mutex_lock(&ev_lock);
        nevents++;
        if (strcmp(event, "high") == 0)
                ev_high++;
        else if (strcmp(event, "max") == 0)
                ev_max++;
        else if (strcmp(event, "oom") == 0)
                ev_oom++;
        pthread_mutex_unlock(&ev_lock);
}

static int64_t stock_pages(void) {
        const struct mb_stats_region *r = mb_client_stats_region(client);
        int64_t sum = 0;

        for (uint32_t i = 0; i < r->nslots; i++)
                sum += __atomic_load_n(&r->slot[i].v[MB_STAT_STOCK], __ATOMIC_RELAXED);
        return sum;
}

/* Allocate @n pages into the app list or the cache, with MB_ALLOC_*
 * @flags (the command's name is @what). */
static void cmd_alloc(const char *what, unsigned long n, bool to_cache, unsigned flags) {
        unsigned long got = 0;

        for (; got < n; got++) {
                struct page pg = { .p = flags ? mb_page_alloc_flags(client, flags) : mb_page_alloc(client),
                                   .key = next_key++ };

                if (!pg.p) {
                        printf("%s %s %lu %s\n", what,
                               errno == ENOMEM ? "ENOMEM" : errno == EAGAIN ? "EAGAIN" : strerror(errno), got,
                               mb_last_error());
                        return;
                }
                fill(&pg);
                /* Never hold the cache lock while allocating: the shrinker
                 * may run meanwhile (on the library's thread). */
                if (to_cache) {
                        pthread_mutex_lock(&cache_lock);
                        (void) push(&cache, &ncache, &cache_alloc, pg);
                        pthread_mutex_unlock(&cache_lock);
                } else
                        (void) push(&app, &napp, &app_alloc, pg);
        }
        printf("%s ok %lu\n", what, got);
}

static void cmd_bulk_nowait(unsigned long n) {
        void **v = calloc(n ? n : 1, sizeof(void *));
        int r;

        if (!v) {
                printf("bulknw ENOMEM 0 out of memory\n");
                return;
        }
        r = mb_page_alloc_bulk_flags(client, v, n, MB_ALLOC_NOWAIT);
        if (r < 0)
                printf("bulknw %s 0 %s\n", r == -EAGAIN ? "EAGAIN" : strerror(-r), mb_last_error());
        else {
                for (unsigned long i = 0; i < n; i++) {
                        struct page pg = { .p = v[i], .key = next_key++ };

                        fill(&pg);
                        (void) push(&app, &napp, &app_alloc, pg);
                }
                printf("bulknw ok %lu\n", n);
        }
        free(v);
}

static void cmd_free(unsigned long n) {
        unsigned long done = 0;

        while (done < n && napp > 0) {
                struct page *pg = &app[--napp];

                check(pg);
                if (mb_page_free(client, pg->p) < 0) {
                        printf("free failed %s\n", mb_last_error());
                        return;
                }
                done++;
        }
        printf("free ok %lu\n", done);
}

static void cmd_report(void) {
        size_t nc;
        unsigned long sc, sd, fr;

        pthread_mutex_lock(&cache_lock);
        nc = ncache;
        sc = scans;
        sd = scanned;
        fr = freed;
        pthread_mutex_unlock(&cache_lock);
        pthread_mutex_lock(&ev_lock);
        printf("report app=%zu cache=%zu stock=%" PRId64 " scans=%lu scanned=%lu freed=%lu events=%lu high=%lu max=%lu "
               "oom=%lu requests=%" PRIu64 "\n",
               napp, nc, stock_pages(), sc, sd, fr, nevents, ev_high, ev_max, ev_oom,
               mb_client_reclaim_requests(client));
        pthread_mutex_unlock(&ev_lock);
}

static void verify_all(void) {
        for (size_t i = 0; i < napp; i++)
                check(&app[i]);
        pthread_mutex_lock(&cache_lock);
        for (size_t i = 0; i < ncache; i++)
                check(&cache[i]);
        pthread_mutex_unlock(&cache_lock);
}

static void cmd_trigger(const char *spec) {
        int fd = mb_pressure_trigger(client, spec);

        if (fd < 0)
                printf("trigger %s %s\n", strerrorname_np(-fd), mb_last_error());
        else
                printf("trigger ok %d\n", fd);
}

static void cmd_events(int fd) {
        eventfd_t v = 0;

        if (eventfd_read(fd, &v) < 0 && errno != EAGAIN)
                printf("events %s\n", strerrorname_np(errno));
        else
                printf("events %llu\n", (unsigned long long) v);
}

static void cmd_untrigger(int fd) {
        int r = mb_pressure_trigger_close(client, fd);

        if (r < 0)
                printf("untrigger %s\n", strerrorname_np(-r));
        else
                printf("untrigger ok\n");
}

static bool handle_line(char *line) {
        unsigned long n = 0;
        char cmd[32];

        line[strcspn(line, "\n")] = 0;
        if (sscanf(line, "%31s %lu", cmd, &n) < 1)
                return true;
        if (strcmp(cmd, "alloc") == 0)
                cmd_alloc(cmd, n, false, 0);
        else if (strcmp(cmd, "allocnw") == 0)
                cmd_alloc(cmd, n, false, MB_ALLOC_NOWAIT);
        else if (strcmp(cmd, "allocnr") == 0)
                cmd_alloc(cmd, n, false, MB_ALLOC_NORETRY);
        else if (strcmp(cmd, "bulknw") == 0)
                cmd_bulk_nowait(n);
        else if (strcmp(cmd, "cache") == 0)
                cmd_alloc(cmd, n, true, 0);
        else if (strcmp(cmd, "free") == 0)
                cmd_free(n);
        else if (strcmp(cmd, "report") == 0)
                cmd_report();
        else if (strcmp(cmd, "trigger") == 0)
                cmd_trigger(strchr(line, ' ') ? strchr(line, ' ') + 1 : "");
        else if (strcmp(cmd, "events") == 0)
                cmd_events((int) n);
        else if (strcmp(cmd, "untrigger") == 0)
                cmd_untrigger((int) n);
        else if (strcmp(cmd, "quit") == 0)
                return false;
        else
                printf("error unknown command %s\n", cmd);
        fflush(stdout);
        return true;
}

/* The tracer: hold @parent in its exit stop for @delay_ms, pass every
 * other signal on.  Never returns. */
_Noreturn static void tracer_run(pid_t parent, unsigned delay_ms, int ready_fd) {
        char ok = 1;

        if (ptrace(PTRACE_SEIZE, parent, NULL, (void *) (long) PTRACE_O_TRACEEXIT) < 0)
                ok = 0;
        (void) !write(ready_fd, &ok, 1);
        close(ready_fd);
        if (!ok)
                _exit(0);
        for (;;) {
                int st, sig = 0;

                if (waitpid(parent, &st, __WALL) < 0 || WIFEXITED(st) || WIFSIGNALED(st))
                        _exit(0);
                if (!WIFSTOPPED(st))
                        continue;
                if ((st >> 16) == PTRACE_EVENT_EXIT) {
                        usleep(delay_ms * 1000u);
                        (void) ptrace(PTRACE_DETACH, parent, NULL, NULL);
                        _exit(0);
                }
                if ((st >> 16) == 0)
                        sig = WSTOPSIG(st); /* a signal-delivery-stop: deliver it */
                (void) ptrace(PTRACE_CONT, parent, NULL, (void *) (long) sig);
        }
}

/* Start the tracer of --exit-delay-ms; true when it traces us. */
static bool exit_delay_start(unsigned delay_ms) {
        pid_t parent = getpid(), pid;
        int p[2];
        char ok = 0;

        if (pipe(p) < 0)
                return false;
        pid = fork();
        if (pid < 0)
                return false;
        if (pid == 0) {
                close(p[0]);
                tracer_run(parent, delay_ms, p[1]);
        }
        close(p[1]);
        (void) prctl(PR_SET_PTRACER, pid, 0, 0, 0); /* Yama, where present */
        if (read(p[0], &ok, 1) != 1)
                ok = 0;
        close(p[0]);
        return ok;
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "socket", required_argument, NULL, 's' },
                { "tenant", required_argument, NULL, 't' },
                { "no-thread", no_argument, NULL, 'n' },
                { "exit-delay-ms", required_argument, NULL, 'd' },
                { "shrink-skip", required_argument, NULL, 'k' },
                { "shrink-max", required_argument, NULL, 'm' },
                { "cpu", required_argument, NULL, 'c' },
                { "no-shrinker", no_argument, NULL, 'S' },
                {}
        };
        const char *socket_path = NULL, *tenant = NULL;
        unsigned flags = 0, exit_delay_ms = 0;
        bool traced = false, with_shrinker = true;
        char line[256];
        size_t len = 0;
        int c, r;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                switch (c) {
                case 's':
                        socket_path = optarg;
                        break;
                case 't':
                        tenant = optarg;
                        break;
                case 'n':
                        flags |= MB_CONNECT_NO_THREAD;
                        break;
                case 'd':
                        exit_delay_ms = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'k':
                        shrink_skip = strtoul(optarg, NULL, 10);
                        break;
                case 'm':
                        shrink_max = strtoul(optarg, NULL, 10);
                        break;
                case 'S':
                        with_shrinker = false;
                        break;
                case 'c': {
                        cpu_set_t set;

                        CPU_ZERO(&set);
                        CPU_SET(atoi(optarg), &set);
                        if (sched_setaffinity(0, sizeof(set), &set) < 0) {
                                perror("pressure-client: sched_setaffinity");
                                return 2;
                        }
                        break;
                }
                default:
                        return 2;
                }
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (exit_delay_ms > 0)
                traced = exit_delay_start(exit_delay_ms);

        r = mb_connect_ex(socket_path, tenant, flags, &client);
        if (r < 0) {
                fprintf(stderr, "pressure-client: cannot connect: %s\n", mb_last_error());
                return 2;
        }
        page_size = mb_page_size(client);
        if ((with_shrinker && mb_register_shrinker(client, &shrinker) < 0) || mb_set_event_callback(client, on_event, NULL) < 0) {
                fprintf(stderr, "pressure-client: %s\n", mb_last_error());
                return 2;
        }
        printf("ready client=%" PRIu64 " batch=%u traced=%d\n", mb_client_id(client), mb_charge_batch(client),
               traced);

        for (;;) {
                struct pollfd pfd[2] = {
                        { .fd = STDIN_FILENO, .events = POLLIN },
                        { .fd = (flags & MB_CONNECT_NO_THREAD) ? mb_get_fd(client) : -1, .events = POLLIN },
                };
                ssize_t n;
                char *nl;

                if (poll(pfd, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (pfd[1].revents) {
                        r = mb_process(client);
                        if (r < 0) {
                                fprintf(stderr, "pressure-client: mb_process: %s\n", mb_last_error());
                                break;
                        }
                }
                if (!pfd[0].revents)
                        continue;
                n = read(STDIN_FILENO, line + len, sizeof(line) - 1 - len);
                if (n <= 0)
                        break;
                len += (size_t) n;
                line[len] = 0;
                while ((nl = strchr(line, '\n'))) {
                        size_t used = (size_t) (nl - line) + 1;
                        char one[256];

                        memcpy(one, line, used);
                        one[used] = 0;
                        memmove(line, line + used, len - used + 1);
                        len -= used;
                        if (!handle_line(one))
                                goto done;
                }
                if (len == sizeof(line) - 1)
                        len = 0; /* a line too long: dropped */
        }
done:
        verify_all();
        if (with_shrinker)
                mb_unregister_shrinker(client, &shrinker);
        printf("bye verify=%s\n", verify_errors ? "FAILED" : "ok");
        mb_close(client);
        return verify_errors ? 1 : 0;
}
