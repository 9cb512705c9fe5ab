/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "arena.h"
#include "audit.h"
#include "log.h"
#include "macros.h"
#include "mb_size.h"
#include "reclaim.h"
#include "tenant_state.h"

struct audit {
        struct broker *b;
        struct event *timer;
};

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

#define AUDIT_SHMEM_THP_PATH "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
#define AUDIT_HUGETLB_2M_DIR "/sys/kernel/mm/hugepages/hugepages-2048kB"

/* *ret_error = the formatted message (NULL when out of memory). */
static void set_error(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static void set_error(char **ret_error, const char *fmt, ...) {
        va_list ap;

        if (!ret_error)
                return;
        va_start(ap, fmt);
        if (vasprintf(ret_error, fmt, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
}

/* The first line of @path into @buf (newline cut): 0 or -errno. */
static int read_line(const char *path, char *buf, size_t size) {
        ssize_t n;
        int fd;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, size - 1);
        close(fd);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        return 0;
}

/* HugePages=thp: a tmpfs instance mounted huge=always must be possible.
 * The kernel's shmem_enabled setting governs the internal shm mount and
 * memfds only, except "deny", which refuses huge pages to every tmpfs
 * (shmem_allowable_huge_orders()); without transparent huge pages the file
 * is missing and fsconfig() refuses huge=.  0 or -errno with *ret_error. */
static int audit_check_thp(char **ret_error) {
        char buf[128];
        int r;

        r = read_line(AUDIT_SHMEM_THP_PATH, buf, sizeof(buf));
        if (r < 0) {
                set_error(ret_error, "HugePages=thp: the kernel has no shmem transparent huge pages (%s: %s)",
                          AUDIT_SHMEM_THP_PATH, strerror(-r));
                return r;
        }
        if (strstr(buf, "[deny]")) {
                set_error(ret_error, "HugePages=thp: %s is 'deny': the kernel gives no tmpfs huge pages",
                          AUDIT_SHMEM_THP_PATH);
                return -EOPNOTSUPP;
        }
        r = arena_tmpfs_probe(true);
        if (r < 0) {
                set_error(ret_error, "HugePages=thp: no tmpfs instance can be made with huge=always: %s",
                          strerror(-r));
                return r;
        }
        return 0;
}

/* HugePages=hugetlbfs: 2 MiB hugetlb pages in the pool (reserved, or
 * allowed as surplus) and memfds of them; *@ret_instance: whether bounded
 * hugetlbfs instances can be made too.  Only the pool is checked, not
 * how many pages are free: those a previous daemon's arenas hold are in
 * use.  0 or -errno with *ret_error. */
static int audit_check_hugetlb(bool *ret_instance, char **ret_error) {
        char nr[32] = "", overcommit[32] = "";
        int r;

        r = read_line(AUDIT_HUGETLB_2M_DIR "/nr_hugepages", nr, sizeof(nr));
        if (r < 0) {
                set_error(ret_error, "HugePages=hugetlbfs: the kernel has no 2 MiB hugetlb pages (%s: %s)",
                          AUDIT_HUGETLB_2M_DIR, strerror(-r));
                return r;
        }
        (void) read_line(AUDIT_HUGETLB_2M_DIR "/nr_overcommit_hugepages", overcommit, sizeof(overcommit));
        if (strtoull(nr, NULL, 10) == 0 && strtoull(overcommit, NULL, 10) == 0) {
                set_error(ret_error, "HugePages=hugetlbfs: no 2 MiB pages reserved (vm.nr_hugepages=0, "
                                     "vm.nr_overcommit_hugepages=0)");
                return -ENOMEM;
        }
        r = arena_hugetlb_probe(ret_instance);
        if (r < 0) {
                set_error(ret_error, "HugePages=hugetlbfs: no memfd of 2 MiB hugetlb pages can be made "
                                     "(memfd_create(MFD_HUGETLB)): %s",
                          strerror(-r));
                return r;
        }
        if (*ret_instance)
                log_info("arena backing: 2 MiB hugetlb pages (%s of them reserved), a detached hugetlbfs instance "
                         "per tenant, its size fixed when made to the tenant's limit + 2 x ChargeBatch pages",
                         nr);
        else
                log_warning("arena backing: a sealed memfd of 2 MiB hugetlb pages per tenant (%s of them reserved): "
                            "no hugetlbfs instance can be made, so only the audit and the pool bound what clients "
                            "back or reserve",
                            nr);
        return 0;
}

int audit_choose_backing(struct broker *b, char **ret_error) {
        enum mb_arena_backing want = b->config->broker.arena_backing;
        enum mb_huge_pages huge = b->config->broker.huge_pages;
        int r;

        broker_assert_main_thread(b);
        /* Never a silent fall-back to 4 KiB pages. */
        if (huge == MB_HUGE_PAGES_THP) {
                if (want == MB_ARENA_BACKING_MEMFD) {
                        set_error(ret_error, "HugePages=thp needs a tmpfs instance per tenant, not ArenaBacking=memfd");
                        return -EINVAL;
                }
                r = audit_check_thp(ret_error);
                if (r < 0)
                        return r;
                b->arena_tmpfs = true;
                log_info("arena backing: tmpfs with huge=always (a detached instance per tenant, sized to its "
                         "charge + up to 2 x ChargeBatch pages, in 2 MiB transparent huge pages)");
                return 0;
        }
        if (huge == MB_HUGE_PAGES_HUGETLBFS) {
                if (want == MB_ARENA_BACKING_TMPFS) {
                        set_error(ret_error, "HugePages=hugetlbfs makes hugetlbfs arenas, not "
                                             "ArenaBacking=tmpfs");
                        return -EINVAL;
                }
                r = audit_check_hugetlb(&b->arena_hugetlb_bounded, ret_error);
                if (r < 0)
                        return r;
                b->arena_tmpfs = false;
                return 0;
        }
        if (want == MB_ARENA_BACKING_MEMFD) {
                b->arena_tmpfs = false;
                log_info("arena backing: memfd (ArenaBacking=memfd): only the audit bounds what clients back");
                return 0;
        }
        r = arena_tmpfs_probe(false);
        if (r < 0) {
                if (want == MB_ARENA_BACKING_TMPFS) {
                        if (ret_error && asprintf(ret_error,
                                                  "ArenaBacking=tmpfs, but no tmpfs instance can be made "
                                                  "(fsopen/fsmount): %s",
                                                  strerror(-r)) < 0)
                                *ret_error = NULL;
                        return r;
                }
                b->arena_tmpfs = false;
                log_warning_errno(r, "arena backing: memfd (a tmpfs instance cannot be made: %m): only the audit "
                                  "bounds what clients back");
                return 0;
        }
        b->arena_tmpfs = true;
        log_info("arena backing: tmpfs (a detached instance per tenant, sized to its charge + up to 2 x "
                 "ChargeBatch pages%s)",
                 arena_tmpfs_in_userns() ? ", made in a user namespace of the daemon's own" : "");
        return 0;
}

/* memcg_memory_event() for an overrun found on the main thread. */
static void audit_count(struct broker *b, struct tenant *t) {
        broker_memory_event(b, t, MB_EVENT_OVERRUN);
}

/* OverrunPolicy=kill: every connected client of the tenant. */
static void audit_kill(struct broker *b, struct tenant_state *ts) {
        pthread_mutex_lock(&ts->lock);
        for (struct reclaim_client *rc = ts->clients; rc; rc = rc->next) {
                int k;

                if (atomic_load(&rc->gone) || rc->killed)
                        continue;
                k = reclaimer_kill_client(b->reclaimer, rc);
                rc->killed = true;
                if (k < 0)
                        log_error_errno(k, "tenant %s: cannot kill client %" PRIu64 " (pid %d): %m",
                                        ts->tenant->path, rc->client_id, (int) rc->pid);
                else
                        log_warning("tenant %s: killed client %" PRIu64 " (%s, pid %d) after an overrun "
                                    "(OverrunPolicy=kill)",
                                    ts->tenant->path, rc->client_id, rc->name, (int) rc->pid);
        }
        pthread_mutex_unlock(&ts->lock);
}

static void audit_overrun(struct broker *b, struct tenant_state *ts, const struct arena_audit *res) {
        struct tenant *t = ts->tenant;
        uint64_t now = now_usec();

        audit_count(b, t);
        ts->overrun_pages_unlogged += res->overrun_pages;
        if (now - ts->overrun_logged_usec >= AUDIT_LOG_INTERVAL_USEC || ts->overrun_logged_usec == 0) {
                char buf[MB_SIZE_FORMAT_MAX];

                log_struct(LOG_WARNING, LOG_MESSAGE_OVERRUN, t->path, 0,
                           "tenant %s: overrun: %s of its arena were backed though no client held them%s; punched "
                           "(%" PRIu64 " overrun events)",
                           t->path,
                           mb_size_format_pages(buf, sizeof(buf), ts->overrun_pages_unlogged, b->page_size, UINT64_MAX),
                           res->size_restored ? ", and a client had resized the arena (size restored)" : "",
                           tenant_event_count(t, MB_EVENT_OVERRUN, true));
                ts->overrun_logged_usec = now;
                ts->overrun_pages_unlogged = 0;
        }
        if (t->overrun_policy == MB_OVERRUN_KILL)
                audit_kill(b, ts);
}

static void audit_timer_cb(evutil_socket_t fd, short what, void *userdata) {
        struct audit *a = userdata;
        struct broker *b = a->b;
        struct tenant_state **found = NULL;
        struct arena_audit *results = NULL;
        size_t n = 0, alloc = 0;

        (void) fd;
        (void) what;
        broker_assert_main_thread(b);
        pthread_mutex_lock(&b->stats_lock);
        for (struct tenant_state *ts = b->active; ts; ts = ts->active_next) {
                struct arena_audit res;
                uint64_t charged;

                if (!ts->arena || arena_audit(ts->arena, &res) < 0)
                        continue;
                /* What this audit found beyond the charge (punched now). */
                charged = arena_used(ts->arena) * b->page_size;
                ts->unaccounted_bytes = res.found_bytes > charged ? res.found_bytes - charged : 0;
                if (res.overrun_pages == 0 && !res.size_restored)
                        continue;
                if (n == alloc) {
                        size_t na = MB_MAX(alloc * 2, (size_t) 4);
                        struct tenant_state **f = reallocarray(found, na, sizeof(*f));
                        struct arena_audit *rr = f ? reallocarray(results, na, sizeof(*rr)) : NULL;

                        if (f)
                                found = f;
                        if (rr)
                                results = rr;
                        if (!rr) {
                                /* Out of memory: count it at least (the
                                 * pages are punched already). */
                                audit_count(b, ts->tenant);
                                continue;
                        }
                        alloc = na;
                }
                found[n] = ts;
                results[n++] = res;
        }
        pthread_mutex_unlock(&b->stats_lock);

        /* Outside stats_lock: the kill takes the tenant's lock.  The
         * tenants stay: they are removed on this thread only. */
        for (size_t i = 0; i < n; i++)
                audit_overrun(b, found[i], &results[i]);
        free(found);
        free(results);
}

int audit_start(struct broker *b, struct event_base *base, struct audit **ret) {
        struct timeval tv = { .tv_sec = 0, .tv_usec = AUDIT_INTERVAL_USEC };
        struct audit *a;

        broker_assert_main_thread(b);
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->b = b;
        a->timer = event_new(base, -1, EV_PERSIST, audit_timer_cb, a);
        if (!a->timer || event_add(a->timer, &tv) < 0) {
                audit_free(a);
                return -ENOMEM;
        }
        *ret = a;
        return 0;
}

void audit_free(struct audit *a) {
        if (!a)
                return;
        if (a->timer)
                event_free(a->timer);
        free(a);
}

uint64_t audit_tenant_unaccounted(const struct tenant *t) {
        const struct tenant_state *ts = tenant_state_of(t);

        return ts && ts->arena ? ts->unaccounted_bytes : 0;
}
