/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "macros.h"
#include "core/mb_internal.h"
#include "session/reconnect.h"
#include "wire.h"

/* Extents per frame: 3000 * at most 19 bytes plus a Hello with the longest
 * tenant path stays under WIRE_MAX_FRAME_BYTES. */
#define RECONNECT_EXTENTS_PER_FRAME 3000u
#define BITS_PER_WORD 64u
#define RECONNECT_CANCEL_SLICE_MSEC 20u

/* ---- the bitmap ---- */

int reconnect_held_init(struct reconnect_held *h, uint64_t npages) {
        size_t words = (size_t) DIV_ROUND_UP(npages, BITS_PER_WORD);
        void *p;

        *h = (struct reconnect_held) {};
        if (words == 0)
                return 0;
        p = mmap(NULL, words * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
                return negative_errno();
        h->bits = p;
        h->npages = npages;
        h->bytes = words * sizeof(uint64_t);
        return 0;
}

void reconnect_held_done(struct reconnect_held *h) {
        if (h->bits)
                munmap(h->bits, h->bytes);
        *h = (struct reconnect_held) {};
}

static uint64_t mask_of(unsigned shift, unsigned count) {
        uint64_t m = count >= BITS_PER_WORD ? ~UINT64_C(0) : (UINT64_C(1) << count) - 1;
        return m << shift;
}

static void held_change(struct reconnect_held *h, uint64_t start, uint64_t count, bool set) {
        if (!h->bits || start >= h->npages)
                return;
        count = MB_MIN(count, h->npages - start);
        while (count > 0) {
                uint64_t w = start / BITS_PER_WORD;
                unsigned shift = (unsigned) (start % BITS_PER_WORD);
                unsigned k = (unsigned) MB_MIN(count, (uint64_t) (BITS_PER_WORD - shift));
                uint64_t m = mask_of(shift, k), before = h->bits[w];

                if (set) {
                        h->bits[w] |= m;
                        h->count += (uint64_t) __builtin_popcountll(m & ~before);
                } else {
                        h->bits[w] &= ~m;
                        h->count -= (uint64_t) __builtin_popcountll(m & before);
                }
                start += k;
                count -= k;
        }
}

void reconnect_held_set(struct reconnect_held *h, uint64_t start, uint64_t count) {
        held_change(h, start, count, true);
}

void reconnect_held_clear(struct reconnect_held *h, uint64_t start, uint64_t count) {
        held_change(h, start, count, false);
}

/* The next run of set bits at or after *@pos; false when none. */
static bool held_next_run(const struct reconnect_held *h, uint64_t *pos, uint64_t *ret_start, uint64_t *ret_count) {
        uint64_t p = *pos, start;

        /* Find a set bit, a word at a time. */
        while (p < h->npages) {
                uint64_t w = h->bits[p / BITS_PER_WORD] >> (p % BITS_PER_WORD);

                if (w == 0) {
                        p = (p / BITS_PER_WORD + 1) * BITS_PER_WORD;
                        continue;
                }
                p += (uint64_t) __builtin_ctzll(w);
                break;
        }
        if (p >= h->npages)
                return false;
        start = p;
        /* ...and the first clear bit after it (bits shifted in from above
         * the word read as set, so a run goes on into the next word). */
        while (p < h->npages && p - start < UINT32_MAX) {
                uint64_t clear = ~h->bits[p / BITS_PER_WORD] >> (p % BITS_PER_WORD);

                if (clear == 0) {
                        p += BITS_PER_WORD - p % BITS_PER_WORD;
                        continue;
                }
                p += (uint64_t) __builtin_ctzll(clear);
                break;
        }
        p = MB_MIN(p, h->npages);
        p = MB_MIN(p, start + UINT32_MAX);
        *ret_start = start;
        *ret_count = p - start;
        *pos = p;
        return true;
}

/* Fill up to RECONNECT_EXTENTS_PER_FRAME extents from *@pos on; returns how
 * many, and *@ret_more when runs are left. */
static size_t held_fill(const struct reconnect_held *h, uint64_t *pos, Mb__Extent *ext, Mb__Extent **extp, bool *ret_more) {
        size_t n = 0;
        uint64_t start, count, save;

        while (n < RECONNECT_EXTENTS_PER_FRAME) {
                if (!held_next_run(h, pos, &start, &count))
                        break;
                mb__extent__init(&ext[n]);
                ext[n].start = start;
                ext[n].count = (uint32_t) count;
                extp[n] = &ext[n];
                n++;
        }
        save = *pos;
        *ret_more = held_next_run(h, &save, &start, &count);
        return n;
}

/* ---- reconnecting ---- */

unsigned reconnect_timeout_sec(void) {
        const char *e = getenv(MB_RECONNECT_TIMEOUT_ENV);
        char *end;
        unsigned long v;

        if (!e || !*e)
                return MB_RECONNECT_DEFAULT_TIMEOUT_SEC;
        errno = 0;
        v = strtoul(e, &end, 10);
        if (errno != 0 || *end != 0 || v > 86400)
                return MB_RECONNECT_DEFAULT_TIMEOUT_SEC;
        return (unsigned) v;
}

static uint64_t now_msec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

static void sleep_msec(unsigned ms) {
        struct timespec ts = { .tv_sec = ms / 1000u, .tv_nsec = (long) (ms % 1000u) * 1000000L };

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* The next frame, waiting until @deadline (ms, CLOCK_MONOTONIC). */
static int recv_until(struct wire_conn *c, uint64_t deadline, Mb__Msg **ret) {
        for (;;) {
                struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
                uint64_t now;
                int r = wire_conn_recv(c, false, ret);

                if (r != -EAGAIN)
                        return r;
                now = now_msec();
                if (now >= deadline) {
                        mb_set_error("membrokerd did not answer within the reconnect timeout");
                        return -ETIMEDOUT;
                }
                r = poll(&pfd, 1, (int) MB_MIN(deadline - now, (uint64_t) 1000));
                if (r < 0 && errno != EINTR)
                        return negative_errno();
        }
}

/* One attempt on a connected socket.  -EAGAIN: try again later. */
static int reconnect_once(const struct reconnect_info *info, const struct reconnect_held *held, struct wire_conn *c,
                          uint64_t deadline, Mb__Msg **ret_msg, int *ret_stats_fd, int *ret_arena_fd) {
        _cleanup_(freep) Mb__Extent *ext = NULL;
        _cleanup_(freep) Mb__Extent **extp = NULL;
        Mb__Hello hello = MB__HELLO__INIT;
        Mb__Msg msg = MB__MSG__INIT, *reply = NULL;
        uint64_t pos = 0;
        bool more = false;
        uint32_t seq = 0;
        int fds[2], r;
        struct stat st;

        ext = calloc(RECONNECT_EXTENTS_PER_FRAME, sizeof(*ext));
        extp = calloc(RECONNECT_EXTENTS_PER_FRAME, sizeof(*extp));
        if (!ext || !extp)
                return -ENOMEM;

        hello.version = WIRE_PROTOCOL_VERSION;
        hello.tenant = (char *) info->tenant;
        hello.client_name = (char *) info->client_name;
        hello.has_client_token = true;
        hello.client_token = info->token;
        hello.n_held = held->bits ? held_fill(held, &pos, ext, extp, &more) : 0;
        hello.held = extp;
        hello.has_held_more = more;
        hello.held_more = more;
        msg.body_case = MB__MSG__BODY_HELLO;
        msg.hello = &hello;
        r = wire_conn_send(c, &msg);
        if (r < 0)
                return -EAGAIN; /* the daemon went away again */

        r = recv_until(c, deadline, &reply);
        if (r == -ECONNRESET)
                return -EAGAIN;
        if (r < 0)
                return r;
        if (reply->body_case == MB__MSG__BODY_ERROR) {
                mb_set_error("membrokerd refused the reconnection: %s", reply->error->reason);
                r = reply->error->code > 0 ? -reply->error->code : -EPROTO;
                mb__msg__free_unpacked(reply, NULL);
                return r;
        }
        if (reply->body_case != MB__MSG__BODY_WELCOME) {
                mb_set_error("membrokerd answered the reconnection with %s", wire_msg_name(reply));
                mb__msg__free_unpacked(reply, NULL);
                return -EPROTO;
        }
        r = wire_conn_take_fds(c, fds, 2);
        if (r < 0) {
                mb__msg__free_unpacked(reply, NULL);
                mb_set_error("the Welcome of membrokerd did not carry the arena and stats descriptors");
                return -EPROTO;
        }
        /* The same memfd, or the memory is gone (which is fine only for a
         * client that holds nothing: it maps the new arena). */
        r = fstat(fds[0], &st) < 0 ? negative_errno() : 0;
        if (r >= 0 && st.st_dev == info->arena_dev && st.st_ino == info->arena_ino) {
                close(fds[0]);
                fds[0] = -1;
        } else if (r >= 0 && held->count > 0) {
                mb_set_error("membrokerd restarted without the memory of tenant %s (a new arena)", info->tenant);
                r = -ESTALE;
        }
        if (r >= 0 && strcmp(reply->welcome->tenant, info->tenant) != 0) {
                mb_set_error("membrokerd attached the reconnection to tenant %s instead of %s",
                             reply->welcome->tenant, info->tenant);
                r = -EPROTO;
        }
        if (r < 0) {
                if (fds[0] >= 0)
                        close(fds[0]);
                close(fds[1]);
                mb__msg__free_unpacked(reply, NULL);
                return r;
        }

        /* The extents that did not fit in the Hello. */
        while (more) {
                Mb__Claim claim = MB__CLAIM__INIT;
                Mb__Msg cm = MB__MSG__INIT, *ack = NULL;

                claim.seq = ++seq;
                claim.n_extents = held_fill(held, &pos, ext, extp, &more);
                claim.extents = extp;
                claim.has_more = true;
                claim.more = more;
                cm.body_case = MB__MSG__BODY_CLAIM;
                cm.claim = &claim;
                r = wire_conn_send(c, &cm);
                if (r >= 0)
                        r = recv_until(c, deadline, &ack);
                if (r >= 0 && ack->body_case == MB__MSG__BODY_ERROR) {
                        mb_set_error("membrokerd refused a claim: %s", ack->error->reason);
                        r = ack->error->code > 0 ? -ack->error->code : -EPROTO;
                } else if (r >= 0 && (ack->body_case != MB__MSG__BODY_ACK || ack->ack->seq != claim.seq)) {
                        mb_set_error("membrokerd answered a Claim with %s", wire_msg_name(ack));
                        r = -EPROTO;
                }
                if (ack)
                        mb__msg__free_unpacked(ack, NULL);
                if (r < 0) {
                        if (fds[0] >= 0)
                                close(fds[0]);
                        close(fds[1]);
                        mb__msg__free_unpacked(reply, NULL);
                        return r == -ECONNRESET ? -EAGAIN : r;
                }
        }

        *ret_msg = reply;
        *ret_stats_fd = fds[1];
        *ret_arena_fd = fds[0];
        return 0;
}

int reconnect_session(const struct reconnect_info *info, const struct reconnect_held *held, struct wire_conn **ret_conn,
                 Mb__Msg **ret_msg, int *ret_stats_fd, int *ret_arena_fd) {
        uint64_t deadline = now_msec() + (uint64_t) info->timeout_sec * 1000u;
        unsigned delay = MB_RECONNECT_FIRST_DELAY_MSEC;

        if (info->timeout_sec == 0 || info->token == 0)
                return -ECONNRESET;
        for (;;) {
                struct wire_conn *c = NULL;
                int r = wire_conn_open(info->socket_path, &c);

                if (r >= 0) {
                        r = reconnect_once(info, held, c, deadline, ret_msg, ret_stats_fd, ret_arena_fd);
                        if (r >= 0) {
                                *ret_conn = c;
                                return 0;
                        }
                        wire_conn_free(c);
                        if (r != -EAGAIN)
                                return r;
                } else if (r != -ECONNREFUSED && r != -ENOENT && r != -EAGAIN) {
                        return r;
                }
                if (now_msec() + delay >= deadline) {
                        mb_set_error("membrokerd did not come back within %u s", info->timeout_sec);
                        return -ETIMEDOUT;
                }
                /* Sleep in slices, so that mb_close() is not kept waiting
                 * for the daemon to come back. */
                for (unsigned slept = 0; slept < delay; slept += RECONNECT_CANCEL_SLICE_MSEC) {
                        if (info->cancel && __atomic_load_n(info->cancel, __ATOMIC_ACQUIRE)) {
                                mb_set_error("the client was closed while membrokerd was away");
                                return -ECANCELED;
                        }
                        sleep_msec(MB_MIN(RECONNECT_CANCEL_SLICE_MSEC, delay - slept));
                }
                delay = MB_MIN(delay * 2, MB_RECONNECT_MAX_DELAY_MSEC);
        }
}
