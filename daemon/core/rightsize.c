/* SPDX-License-Identifier: MIT */
/*
 * rightsize.c - the right-sizing loop (see rightsize.h).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macros.h"
#include "rightsize.h"

#define PPM_PER_PERCENT 10000u
#define PERCENT_MAX_DECIMALS 4u

static const char *const kind_names[] = { "some", "full" };
static const char *const window_names[] = { "avg10", "avg60", "avg300" };

/* Find @word in @names; its index or -1. */
static int lookup(const char *word, size_t len, const char *const *names, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (strlen(names[i]) == len && strncmp(word, names[i], len) == 0)
                        return (int) i;
        return -1;
}

/* "0.1%" -> 1000 ppm: digits, an optional fraction of at most
 * PERCENT_MAX_DECIMALS digits, '%'. */
static int parse_percent_ppm(const char *s, size_t len, uint32_t *ret) {
        uint64_t whole = 0, frac = 0;
        unsigned decimals = 0;
        size_t i = 0;
        bool digits = false;

        if (len < 2 || s[len - 1] != '%')
                return -EINVAL;
        len--;
        for (; i < len && isdigit((unsigned char) s[i]); i++) {
                whole = whole * 10 + (uint64_t) (s[i] - '0');
                if (whole > 100)
                        return -ERANGE;
                digits = true;
        }
        if (i < len && s[i] == '.') {
                for (i++; i < len && isdigit((unsigned char) s[i]); i++) {
                        if (++decimals > PERCENT_MAX_DECIMALS)
                                return -EINVAL;
                        frac = frac * 10 + (uint64_t) (s[i] - '0');
                        digits = true;
                }
        }
        if (i != len || !digits)
                return -EINVAL;
        for (; decimals < PERCENT_MAX_DECIMALS; decimals++)
                frac *= 10;
        whole = whole * PPM_PER_PERCENT + frac;
        if (whole == 0 || whole > RIGHTSIZE_PPM_MAX)
                return -ERANGE;
        *ret = (uint32_t) whole;
        return 0;
}

int rightsize_target_parse(const char *s, struct rightsize_target *ret, const char **ret_reason) {
        const char *w[4];
        size_t wlen[4], n = 0;
        struct rightsize_target t = { .enabled = true };
        const char *reason = NULL;
        int k;

        for (const char *p = s;;) {
                while (*p == ' ' || *p == '\t')
                        p++;
                if (!*p)
                        break;
                if (n == ELEMENTSOF(w)) {
                        reason = "too many words (expected \"some|full avg10|avg60|avg300 PERCENT%\")";
                        goto fail;
                }
                w[n] = p;
                while (*p && *p != ' ' && *p != '\t')
                        p++;
                wlen[n] = (size_t) (p - w[n]);
                n++;
        }
        if (n == 0 || (n == 1 && wlen[0] == 2 && strncmp(w[0], "no", 2) == 0)) {
                *ret = (struct rightsize_target) { .enabled = false };
                return 0;
        }
        if (n != 3) {
                reason = "expected \"some|full avg10|avg60|avg300 PERCENT%\", or \"no\"";
                goto fail;
        }
        k = lookup(w[0], wlen[0], kind_names, ELEMENTSOF(kind_names));
        if (k < 0) {
                reason = "the first word must be \"some\" or \"full\"";
                goto fail;
        }
        t.kind = (enum rightsize_kind) k;
        k = lookup(w[1], wlen[1], window_names, ELEMENTSOF(window_names));
        if (k < 0) {
                reason = "the second word must be \"avg10\", \"avg60\" or \"avg300\"";
                goto fail;
        }
        t.window = (enum rightsize_window) k;
        if (parse_percent_ppm(w[2], wlen[2], &t.ppm) < 0) {
                reason = "the third word must be a percentage above 0% and at most 100%, with at most 4 "
                         "decimals (\"0.1%\")";
                goto fail;
        }
        *ret = t;
        return 0;
fail:
        if (ret_reason)
                *ret_reason = reason;
        return -EINVAL;
}

char *rightsize_target_format(const struct rightsize_target *t, char *buf, size_t size) {
        uint32_t whole, frac;
        unsigned decimals = PERCENT_MAX_DECIMALS;

        if (!t->enabled) {
                snprintf(buf, size, "no");
                return buf;
        }
        whole = t->ppm / PPM_PER_PERCENT;
        frac = t->ppm % PPM_PER_PERCENT;
        while (decimals > 0 && frac % 10 == 0) {
                frac /= 10;
                decimals--;
        }
        if (decimals == 0)
                snprintf(buf, size, "%s %s %u%%", kind_names[t->kind], window_names[t->window], whole);
        else
                snprintf(buf, size, "%s %s %u.%0*u%%", kind_names[t->kind], window_names[t->window], whole,
                         (int) decimals, frac);
        return buf;
}

#define PACK_ON_BIT (UINT64_C(1) << 40)
#define PACK_KIND_SHIFT 36
#define PACK_WINDOW_SHIFT 32
#define PACK_PPM_MASK UINT64_C(0xffffffff)

uint64_t rightsize_target_pack(const struct rightsize_target *t) {
        if (!t->enabled)
                return 0;
        return PACK_ON_BIT | (uint64_t) t->kind << PACK_KIND_SHIFT | (uint64_t) t->window << PACK_WINDOW_SHIFT | t->ppm;
}

int rightsize_target_unpack(uint64_t v, struct rightsize_target *ret) {
        uint64_t kind = (v >> PACK_KIND_SHIFT) & 0xf, window = (v >> PACK_WINDOW_SHIFT) & 0xf, ppm = v & PACK_PPM_MASK;

        if (v == 0) {
                *ret = (struct rightsize_target) { .enabled = false };
                return 0;
        }
        if ((v & ~(PACK_ON_BIT | (UINT64_C(0xff) << PACK_WINDOW_SHIFT) | PACK_PPM_MASK)) != 0 || !(v & PACK_ON_BIT) ||
            kind > RIGHTSIZE_FULL || window > RIGHTSIZE_AVG300 || ppm == 0 || ppm > RIGHTSIZE_PPM_MAX)
                return -EINVAL;
        *ret = (struct rightsize_target) { .enabled = true, .kind = (enum rightsize_kind) kind,
                                           .window = (enum rightsize_window) window, .ppm = (uint32_t) ppm };
        return 0;
}

bool rightsize_target_equal(const struct rightsize_target *a, const struct rightsize_target *b) {
        if (!a->enabled || !b->enabled)
                return a->enabled == b->enabled;
        return a->kind == b->kind && a->window == b->window && a->ppm == b->ppm;
}

const char *rightsize_state_to_string(enum rightsize_state s) {
        static const char *const names[] = {
                [RIGHTSIZE_STATE_OFF] = "off",         [RIGHTSIZE_STATE_PROBING] = "probing",
                [RIGHTSIZE_STATE_BACKOFF] = "backoff", [RIGHTSIZE_STATE_IDLE] = "idle",
                [RIGHTSIZE_STATE_STOPPED] = "stopped",
        };

        return (unsigned) s < ELEMENTSOF(names) ? names[s] : "unknown";
}

void rightsize_set_target(struct rightsize *rs, const struct rightsize_target *target) {
        *rs = (struct rightsize) {
                .target = *target,
                .state = target->enabled ? RIGHTSIZE_STATE_PROBING : RIGHTSIZE_STATE_OFF,
                .step_ppm = RIGHTSIZE_STEP_MIN_PPM,
                .high_pages = RIGHTSIZE_HIGH_NONE,
        };
}

/* Stall time over an interval, in ppm of it (at most 100%). */
static uint32_t interval_pressure_ppm(uint64_t stall_delta_usec, uint64_t interval_usec) {
        unsigned __int128 p = (unsigned __int128) stall_delta_usec * RIGHTSIZE_PPM_MAX / interval_usec;

        return p > RIGHTSIZE_PPM_MAX ? RIGHTSIZE_PPM_MAX : (uint32_t) p;
}

uint64_t rightsize_tick(struct rightsize *rs, const struct rightsize_input *in) {
        uint64_t interval, room, step, err, target = rs->target.ppm;
        uint32_t p;
        unsigned __int128 scaled;

        if (!rs->target.enabled || rs->state == RIGHTSIZE_STATE_STOPPED)
                return 0;
        if (!rs->primed || in->now_usec <= rs->last_now_usec) {
                if (!rs->primed) {
                        rs->primed = true;
                        rs->last_now_usec = in->now_usec;
                        rs->last_stall_usec = in->stall_usec;
                }
                return 0;
        }
        interval = in->now_usec - rs->last_now_usec;
        p = interval_pressure_ppm(in->stall_usec >= rs->last_stall_usec ? in->stall_usec - rs->last_stall_usec : 0,
                                  interval);
        p = MB_MAX(p, MB_MIN(in->avg_ppm, RIGHTSIZE_PPM_MAX));
        rs->last_now_usec = in->now_usec;
        rs->last_stall_usec = in->stall_usec;
        rs->last_pressure_ppm = p;

        if (p > target) {
                /* senpai's back-off: stop shrinking, raise the limit in
                 * proportion to the excess pressure, let it grow. */
                if (rs->high_pages != RIGHTSIZE_HIGH_NONE) {
                        uint64_t over = MB_MIN((uint64_t) p - target, target), up;

                        /* Room to grow by up to RIGHTSIZE_STEP_MAX_PPM of the
                         * usage above the usage: a tenant that presses on
                         * the limit gets that much more every interval. */
                        up = (uint64_t) ((unsigned __int128) in->usage_pages * RIGHTSIZE_STEP_MAX_PPM * over /
                                         ((uint64_t) RIGHTSIZE_PPM_MAX * target));
                        rs->high_pages = MB_MAX(rs->high_pages, in->usage_pages + MB_MAX(up, (uint64_t) 1));
                }
                rs->state = RIGHTSIZE_STATE_BACKOFF;
                rs->was_above = true;
                rs->step_ppm = RIGHTSIZE_STEP_MIN_PPM;
                rs->step_pages = 0;
                return 0;
        }
        if (rs->was_above) {
                /* What it grew back to once it stopped stalling. */
                rs->wse_pages = in->usage_pages;
                rs->was_above = false;
        } else if (rs->wse_pages == 0 || in->usage_pages < rs->wse_pages)
                rs->wse_pages = in->usage_pages;

        room = in->usage_pages > in->floor_pages ? in->usage_pages - in->floor_pages : 0;
        if (room == 0) {
                rs->state = RIGHTSIZE_STATE_IDLE;
                rs->step_pages = 0;
                rs->high_pages = MB_MAX(MB_MIN(rs->high_pages, in->usage_pages), in->floor_pages);
                return 0;
        }
        /* step_ppm x ((target - p) / target)^2 of the usage. */
        err = target - p;
        scaled = (unsigned __int128) in->usage_pages * rs->step_ppm * err * err;
        step = (uint64_t) (scaled / ((unsigned __int128) RIGHTSIZE_PPM_MAX * target * target));
        step = MB_MIN(MB_MAX(step, (uint64_t) 1), room);
        rs->step_ppm = MB_MIN(rs->step_ppm * 2, RIGHTSIZE_STEP_MAX_PPM);
        rs->state = RIGHTSIZE_STATE_PROBING;
        rs->step_pages = step;
        /* The limit follows the usage down: from whichever is lower. */
        rs->high_pages = MB_MIN(rs->high_pages, in->usage_pages);
        rs->high_pages = rs->high_pages > in->floor_pages + step ? rs->high_pages - step : in->floor_pages;
        return in->usage_pages - rs->high_pages;
}

void rightsize_step_done(struct rightsize *rs, uint64_t reclaimed_pages, unsigned unanswered,
                         uint64_t usage_pages) {
        if (!rs->target.enabled || rs->state == RIGHTSIZE_STATE_STOPPED)
                return;
        rs->reclaimed_pages += reclaimed_pages;
        if (reclaimed_pages > 0) {
                rs->fruitless = 0;
                return;
        }
        /* Nothing came back: small steps again. */
        rs->step_ppm = RIGHTSIZE_STEP_MIN_PPM;
        rs->step_pages = 0;
        if (unanswered == 0) {
                /* Everyone answered and gave nothing: as small as it goes. */
                rs->fruitless = 0;
                rs->state = RIGHTSIZE_STATE_IDLE;
                rs->wse_pages = usage_pages;
                return;
        }
        if (++rs->fruitless >= RIGHTSIZE_STOP_STEPS) {
                rs->state = RIGHTSIZE_STATE_STOPPED;
                rs->high_pages = RIGHTSIZE_HIGH_NONE;
        } else
                rs->state = RIGHTSIZE_STATE_IDLE;
}
