/* SPDX-License-Identifier: MIT */
/*
 * manager-dump.c - the state dump of SIGUSR1: every tenant's figures,
 * settings and right-sizing state, and the reclaimer's counters, one line
 * each: logged for the admin, and with --dump-file written to a file
 * (replaced whole by a rename, so a reader never sees half a dump) for tools
 * and tests, as systemd-oomd's `oomctl dump` serves its state to tools
 * rather than only to the journal.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "audit.h"
#include "guard.h"
#include "log.h"
#include "manager.h"
#include "mb_stats_abi.h"
#include "pressure.h"
#include "reclaim.h"
#include "tenant_state.h"

/* ---- state dump (SIGUSR1) ---- */

static void fmt_limit(char *buf, size_t size, unsigned long v) {
        if (v >= (unsigned long) PAGE_COUNTER_MAX)
                snprintf(buf, size, "max");
        else
                snprintf(buf, size, "%lu", v);
}

static int log_state_cb(struct tenant *t, void *userdata) {
        FILE *f = userdata;
        struct tenant_state *ts = tenant_state_of(t);
        char max[32], high[32];
        uint64_t backed = 0;

        if (ts && ts->arena)
                (void) arena_backed_bytes(ts->arena, &backed);
        fmt_limit(max, sizeof(max), page_counter_get_max(&t->memory));
        fmt_limit(high, sizeof(high), page_counter_get_high_setting(&t->memory));
        fprintf(f, "state: tenant=%s usage=%lu max=%s high=%s low=%lu min=%lu peak=%lu clients=%u children=%u "
                 "events=low:%" PRIu64 ",high:%" PRIu64 ",max:%" PRIu64 ",oom:%" PRIu64 ",oom_kill:%" PRIu64
                 ",overrun:%" PRIu64 ",oom_group_kill:%" PRIu64 " "
                 "events_local=low:%" PRIu64 ",high:%" PRIu64 ",max:%" PRIu64 ",oom:%" PRIu64 ",oom_kill:%" PRIu64
                 ",overrun:%" PRIu64 ",oom_group_kill:%" PRIu64 " "
                 "pages=%" PRId64 " stock=%" PRId64 " charge_requests=%" PRId64 " uncharge_requests=%" PRId64
                 " arena_used=%" PRIu64 " arena_backed=%" PRIu64 " unaccounted=%" PRIu64 " pgscan=%" PRId64
                 " pgsteal=%" PRId64 " throttle_usec=%" PRId64 " draining=%s resizable=%s\n",
                 t->path, page_counter_read(&t->memory), max, high, page_counter_get_low(&t->memory),
                 page_counter_get_min(&t->memory), atomic_load(&t->memory.watermark), atomic_load(&t->nclients),
                 t->nchildren, atomic_load(&t->events[MB_EVENT_LOW]), atomic_load(&t->events[MB_EVENT_HIGH]),
                 atomic_load(&t->events[MB_EVENT_MAX]), atomic_load(&t->events[MB_EVENT_OOM]),
                 atomic_load(&t->events[MB_EVENT_OOM_KILL]), atomic_load(&t->events[MB_EVENT_OVERRUN]),
                 atomic_load(&t->events[MB_EVENT_OOM_GROUP_KILL]),
                 atomic_load(&t->events_local[MB_EVENT_LOW]), atomic_load(&t->events_local[MB_EVENT_HIGH]),
                 atomic_load(&t->events_local[MB_EVENT_MAX]), atomic_load(&t->events_local[MB_EVENT_OOM]),
                 atomic_load(&t->events_local[MB_EVENT_OOM_KILL]), atomic_load(&t->events_local[MB_EVENT_OVERRUN]),
                 atomic_load(&t->events_local[MB_EVENT_OOM_GROUP_KILL]),
                 t->rstat.value[MB_STAT_PAGES], t->rstat.value[MB_STAT_STOCK],
                 t->rstat.value[MB_STAT_CHARGE_REQUESTS], t->rstat.value[MB_STAT_UNCHARGE_REQUESTS],
                 ts && ts->arena ? arena_used(ts->arena) : 0, backed, audit_tenant_unaccounted(t),
                 t->rstat.value[MB_STAT_PGSCAN], t->rstat.value[MB_STAT_PGSTEAL], t->rstat.value[MB_STAT_THROTTLE_USEC],
                 atomic_load(&t->draining) ? "yes" : "no",
                 /* an arena on a tmpfs instance that can grow or shrink with the limits */
                 ts && ts->arena && ts->arena->pick_fd >= 0 ? "yes" : "no");
        return 0;
}

/* What the arenas are made of (audit_choose_backing() decided it at the start). */
static const char *backing_name(const struct broker *b) {
        switch (b->config->broker.huge_pages) {
        case MB_HUGE_PAGES_THP:
                return "tmpfs-huge";
        case MB_HUGE_PAGES_HUGETLBFS:
                return b->arena_hugetlb_bounded ? "hugetlbfs" : "memfd-hugetlb";
        default:
                return b->arena_tmpfs ? "tmpfs" : "memfd";
        }
}

/* The host pressure source of PressureReclaim=yes: what is watched, or why
 * nothing is (the trigger, quoted, comes last: it holds spaces). */
static void log_pressure_state(struct manager *m, FILE *f) {
        const char *trigger;

        if (!m->b.config->broker.pressure_reclaim) {
                fprintf(f, "state: pressure watching=no\n");
                return;
        }
        if (!m->pressure) {
                const char *name = strerrorname_np(-m->pressure_error);

                fprintf(f, "state: pressure watching=no error=%s\n", name ? name : "unknown");
                return;
        }
        trigger = pressure_trigger(m->pressure);
        fprintf(f, "state: pressure watching=yes kind=%s source=%s", trigger ? "psi" : "fifo",
                pressure_path(m->pressure));
        if (trigger)
                fprintf(f, " trigger=\"%s\"", trigger);
        fputc('\n', f);
}

/* write @text to m->dump_path through a temporary file and a rename */
static void write_dump_file(struct manager *m, const char *text, size_t len) {
        char *tmp = NULL;
        ssize_t n = 0;
        int fd;

        if (asprintf(&tmp, "%s.tmp", m->dump_path) < 0) {
                log_warning("state: cannot write %s: %s", m->dump_path, strerror(ENOMEM));
                return;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd >= 0) {
                for (size_t off = 0; off < len; off += (size_t) n) {
                        n = write(fd, text + off, len - off);
                        if (n <= 0)
                                break;
                }
        }
        if (fd < 0 || n < 0 || close(fd) < 0 || rename(tmp, m->dump_path) < 0) {
                log_warning("state: cannot write %s: %s", m->dump_path, strerror(errno));
                (void) unlink(tmp);
        }
        free(tmp);
}

void manager_log_state(struct manager *m) {
        uint64_t n = ++m->state_dumps;
        struct reclaim_stats rs;
        char *text = NULL;
        size_t len = 0;
        FILE *f;

        f = open_memstream(&text, &len);
        if (!f) {
                log_warning("state: no memory for dump %" PRIu64, n);
                return;
        }
        manager_stats_refresh(m, m->b.tree->root, true);
        fprintf(f, "state: dump %" PRIu64 " begin: %u tenants, %u clients, page size %" PRIu64 "\n", n,
                m->b.tree->ntenants, manager_nclients(m), m->b.page_size);
        (void) tenant_walk(m->b.tree->root, log_state_cb, f);
        reclaim_get_stats(m->b.reclaimer, &rs);
        fprintf(f,
                "state: reclaim jobs=%" PRIu64 " rounds=%" PRIu64 " requests=%" PRIu64 " skipped=%" PRIu64
                " timeouts=%" PRIu64 " late_answers=%" PRIu64 " pressure_events=%" PRIu64 " oom_kills=%" PRIu64 "\n",
                rs.jobs, rs.rounds, rs.requests, rs.skipped, rs.timeouts, rs.late_answers, rs.pressure_events,
                rs.oom_kills);
        fprintf(f, "state: connections attached=%" PRIu64 " detached=%" PRIu64, atomic_load(&m->b.nattached),
                atomic_load(&m->b.ndetached));
        for (enum guard_event ev = 0; ev < _GUARD_EVENT_MAX; ev++)
                fprintf(f, " %s=%" PRIu64, guard_event_key(ev), guard_event_total(m->b.guard, ev));
        fprintf(f, "\nstate: config reloads=%" PRIu64 " reload_failures=%" PRIu64 " skipped_files=%u backing=%s\n",
                m->reloads.ok, m->reloads.failed, m->b.config->nskipped, backing_name(&m->b));
        if (m->reloads.last_error)
                fprintf(f, "state: config last_reload_error: %s\n", m->reloads.last_error);
        log_pressure_state(m, f);
        if (m->observer && m->observer->dump)
                m->observer->dump(m->observer_userdata, f);
        fprintf(f, "state: dump %" PRIu64 " end\n", n);
        if (fclose(f) != 0 || !text) {
                log_warning("state: no memory for dump %" PRIu64, n);
                free(text);
                return;
        }
        for (char *line = text, *nl; *line; line = nl + 1) {
                nl = strchr(line, '\n');
                if (!nl)
                        break;
                log_info("%.*s", (int) (nl - line), line);
        }
        if (m->dump_path)
                write_dump_file(m, text, len);
        free(text);
}
