/* SPDX-License-Identifier: MIT */
/*
 * rightsizer.c - MemoryPressureTarget= in the daemon (see rightsizer.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "log.h"
#include "macros.h"
#include "mb_size.h"
#include "psi.h"
#include "reclaim.h"
#include "rightsizer.h"
#include "tenant_state.h"

#define RIGHTSIZE_DEFAULT_INTERVAL_MSEC 1000u
/* psi_reading averages are hundredths of a percent. */
#define PPM_PER_PSI_AVG_UNIT 100u

struct rightsizer {
        struct broker *b;
        struct event *timer;
};

/* A step in flight: what its outcome needs to find the tenant again (it may
 * be removed meanwhile; the broker outlives the reclaimer). */
struct step_ctx {
        struct broker *b;
        char path[];
};

static unsigned interval_msec(const struct broker *b) {
        return b->config ? b->config->broker.rightsize_interval_msec : RIGHTSIZE_DEFAULT_INTERVAL_MSEC;
}

static void arm(struct rightsizer *z) {
        unsigned ms = interval_msec(z->b);
        struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

        if (event_add(z->timer, &tv) < 0)
                log_error("right-sizing: cannot arm its timer; MemoryPressureTarget= stops working");
}

/* The loop's limit as the tenant's right-sizing high. */
static void apply_high(struct tenant *t, uint64_t high_pages) {
        (void) page_counter_set_high_auto(&t->memory, (unsigned long) MB_MIN(high_pages, (uint64_t) PAGE_COUNTER_MAX));
}

static void log_state_change(struct broker *b, struct tenant *t, const struct rightsize *rs,
                             enum rightsize_state before) {
        char b_wse[MB_SIZE_FORMAT_MAX];

        if (rs->state == before)
                return;
        mb_size_format_pages(b_wse, sizeof(b_wse), rs->wse_pages, b->page_size, UINT64_MAX);
        if (rs->state == RIGHTSIZE_STATE_STOPPED)
                log_warning("tenant %s: right-sizing stopped: %u steps in a row got nothing back while clients "
                            "did not answer; its limit is dropped until MemoryPressureTarget= is set again "
                            "(working set estimate %s)",
                            t->path, rs->fruitless, b_wse);
        else
                log_debug("tenant %s: right-sizing %s -> %s (pressure %u ppm, working set estimate %s)", t->path,
                          rightsize_state_to_string(before), rightsize_state_to_string(rs->state),
                          rs->last_pressure_ppm, b_wse);
}

static void step_done_cb(const struct reclaim_step_outcome *o, void *userdata) {
        struct step_ctx *ctx = userdata;
        struct broker *b = ctx->b;
        struct tenant *t = b->tree ? tenant_lookup(b->tree, ctx->path) : NULL;
        struct tenant_state *ts = t ? tenant_state_of(t) : NULL;

        if (ts && ts->rightsize_busy) {
                enum rightsize_state before = ts->rightsize.state;

                ts->rightsize_busy = false;
                rightsize_step_done(&ts->rightsize, o->reclaimed, o->unanswered, page_counter_read(&t->memory));
                if (ts->rightsize.state == RIGHTSIZE_STATE_STOPPED)
                        apply_high(t, RIGHTSIZE_HIGH_NONE);
                log_state_change(b, t, &ts->rightsize, before);
        }
        free(ctx);
}

/* The target as the files or the bus left it: (re)start the loop when it
 * was set again (changed, or set while the loop had stopped). */
static void sync_target(struct broker *b, struct tenant *t, struct tenant_state *ts) {
        char buf[RIGHTSIZE_TARGET_STRING_MAX];

        if (ts->rightsize_gen == t->pressure_target_gen)
                return;
        ts->rightsize_gen = t->pressure_target_gen;
        if (rightsize_target_equal(&ts->rightsize.target, &t->pressure_target) &&
            ts->rightsize.state != RIGHTSIZE_STATE_STOPPED)
                return;
        if (!t->pressure_target.enabled && !ts->rightsize.target.enabled)
                return;
        rightsize_set_target(&ts->rightsize, &t->pressure_target);
        apply_high(t, RIGHTSIZE_HIGH_NONE);
        log_info("tenant %s: MemoryPressureTarget=%s%s", t->path,
                 rightsize_target_format(&t->pressure_target, buf, sizeof(buf)),
                 t->pressure_target.enabled ? ": right-sizing" : ": right-sizing off");
}

static void tick_tenant(struct broker *b, struct tenant *t, struct tenant_state *ts) {
        struct rightsize *rs = &ts->rightsize;
        struct psi_reading rd;
        struct rightsize_input in;
        unsigned long emin, elow;
        enum rightsize_state before = rs->state;
        unsigned avg;
        uint64_t pages;
        struct step_ctx *ctx;
        size_t len;
        int r;

        tenant_pressure_read(t, rs->target.kind == RIGHTSIZE_FULL ? PSI_FULL : PSI_SOME, &rd);
        avg = rs->target.window == RIGHTSIZE_AVG10 ? rd.avg10 : rs->target.window == RIGHTSIZE_AVG60 ? rd.avg60 : rd.avg300;
        tenant_effective_protection(t, b->tree->recursive_protection, &emin, &elow);
        in = (struct rightsize_input) {
                .now_usec = psi_now_usec(),
                .stall_usec = rd.total_usec,
                .avg_ppm = avg * PPM_PER_PSI_AVG_UNIT,
                .usage_pages = page_counter_read(&t->memory),
                .floor_pages = MB_MAX(emin, elow),
        };
        pages = rightsize_tick(rs, &in);
        apply_high(t, rs->high_pages);
        log_state_change(b, t, rs, before);
        if (pages == 0)
                return;

        len = strlen(t->path) + 1;
        ctx = malloc(sizeof(*ctx) + len);
        if (!ctx)
                return;
        ctx->b = b;
        memcpy(ctx->path, t->path, len);
        r = reclaim_rightsize_step(b->reclaimer, t, pages, rs->high_pages, step_done_cb, ctx);
        if (r < 0) {
                free(ctx);
                return;
        }
        ts->rightsize_busy = true;
}

static int tick_cb(struct tenant *t, void *userdata) {
        struct broker *b = userdata;
        struct tenant_state *ts = tenant_state_of(t);

        if (!ts || !t->parent)
                return 0;
        sync_target(b, t, ts);
        if (ts->rightsize.target.enabled && ts->rightsize.state != RIGHTSIZE_STATE_STOPPED && !ts->rightsize_busy)
                tick_tenant(b, t, ts);
        return 0;
}

static void timer_cb(evutil_socket_t fd, short what, void *userdata) {
        struct rightsizer *z = userdata;

        (void) fd;
        (void) what;
        broker_assert_main_thread(z->b);
        if (z->b->tree)
                (void) tenant_walk(z->b->tree->root, tick_cb, z->b);
        arm(z);
}

int rightsizer_start(struct broker *b, struct event_base *base, struct rightsizer **ret) {
        struct rightsizer *z;

        broker_assert_main_thread(b);
        z = calloc(1, sizeof(*z));
        if (!z)
                return -ENOMEM;
        z->b = b;
        z->timer = evtimer_new(base, timer_cb, z);
        if (!z->timer) {
                free(z);
                return -ENOMEM;
        }
        arm(z);
        *ret = z;
        return 0;
}

void rightsizer_free(struct rightsizer *z) {
        if (!z)
                return;
        event_free(z->timer);
        free(z);
}

void rightsizer_tenant_status(struct broker *b, struct tenant *t, struct rightsizer_status *ret) {
        const struct tenant_state *ts = tenant_state_of(t);
        const struct rightsize *rs = ts ? &ts->rightsize : NULL;
        bool on = rs && rs->target.enabled;

        broker_assert_main_thread(b);
        *ret = (struct rightsizer_status) { .state = rightsize_state_to_string(RIGHTSIZE_STATE_OFF),
                                            .high_bytes = UINT64_MAX };
        rightsize_target_format(&t->pressure_target, ret->target, sizeof(ret->target));
        if (!on)
                return;
        ret->state = rightsize_state_to_string(rs->state);
        ret->working_set_bytes = rs->wse_pages * b->page_size;
        ret->step_bytes = rs->state == RIGHTSIZE_STATE_PROBING ? rs->step_pages * b->page_size : 0;
        ret->high_bytes = rs->high_pages == RIGHTSIZE_HIGH_NONE ? UINT64_MAX : rs->high_pages * b->page_size;
        ret->reclaimed_bytes = rs->reclaimed_pages * b->page_size;
        ret->pressure_ppm = rs->last_pressure_ppm;
}
