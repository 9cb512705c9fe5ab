/* SPDX-License-Identifier: MIT */
/*
 * conn-hello.c - admission of a client (see conn.h, conn-internal.h): the
 * Hello resolves the tenant and checks the peer under the tree lock, sets
 * up the tenant's arena and statistics at first use, makes the client's
 * stats region and reclaim handle, and answers with one Welcome carrying
 * the arena and the region; Claim re-claims pages held before a daemon
 * restart.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "conn-internal.h"
#include "guard.h"
#include "log.h"
#include "macros.h"
#include "mb_limits.h"
#include "reclaim.h"
#include "session.h"
#include "worker.h"

/* ---- Hello ---- */

/* The batch a client of a tenant with nothing limited may grow to (the
 * batch policy is the core's, see conn_charge_batch()). */
static unsigned conn_unlimited_batch(unsigned batch) {
        return MB_MIN(tenant_unlimited_charge_batch(batch), MB_CHARGE_MAX_PAGES);
}

static unsigned conn_base_batch(const struct broker *b, const struct tenant *t) {
        return tenant_charge_batch(t, atomic_load(&b->charge_batch));
}

/* Create the arena and the daemon's stats slots of @ts at first use.  Tree
 * lock held (read): the tenant stays. */
static int tenant_state_prepare(struct broker *b, struct tenant_state *ts) {
        int r;

        broker_assert_tree_locked(b);
        MB_LOCK_GUARD(&ts->lock);
        if (!ts->daemon_slots) {
                /* A whole stats region (header + slots) in the daemon's own
                 * memory, so that the workers maintain its dirty word like
                 * clients do and a poll of an idle tenant reads one word,
                 * not nworkers slots.  ts->daemon_slots points at the slots;
                 * mb_stats_region_of_slot(ts->daemon_slots, 0) is what to
                 * free. */
                size_t bytes = (size_t) mb_stats_region_bytes(b->nworkers);
                struct mb_stats_region *region = aligned_alloc(MB_CACHELINE_BYTES, bytes);

                if (!region)
                        return -ENOMEM;
                memset(region, 0, bytes);
                *region = (struct mb_stats_region) {
                        .magic = MB_STATS_MAGIC,
                        .version = MB_STATS_VERSION,
                        .nslots = b->nworkers,
                        .nitems = _MB_STAT_NR,
                };
                mb_stats_region_writer_attach(region);
                ts->daemon_slots = region->slot;
                ts->ndaemon_slots = b->nworkers;
        }
        if (!ts->arena) {
                unsigned long pages = page_counter_get_max(&b->tree->root->memory);

                /* With its owner table in a memfd, both in the fd store. */
                r = b->ops->arena_new(b, ts, pages, &ts->arena);
                if (r < 0)
                        return log_error_errno(r, "cannot create the arena of tenant %s (%lu pages): %m",
                                               ts->tenant->path, pages);
        }
        return 0;
}

/* ONE sendmsg carrying the Welcome frame and [arena, stats] (docs/protocol.md);
 * nothing else has been written to the connection yet, so the frame cannot
 * overtake or be overtaken by anything. */
static int conn_send_welcome(struct conn *c, const Mb__Msg *msg, int arena_fd, int stats_fd) {
        union {
                char buf[CMSG_SPACE(2 * sizeof(int))];
                struct cmsghdr align;
        } control;
        struct iovec iov;
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = sizeof(control.buf),
        };
        struct cmsghdr *cm;
        int fds[2] = { arena_fd, stats_fd };
        ssize_t n, sent;

        n = conn_pack(c, msg);
        if (n < 0)
                return (int) n;
        iov.iov_base = c->w->frame;
        iov.iov_len = (size_t) n;
        memset(&control, 0, sizeof(control));
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(fds));
        memcpy(CMSG_DATA(cm), fds, sizeof(fds));

        do
                sent = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (sent < 0 && errno == EINTR);
        if (sent < 0)
                return -errno;
        /* The fds went with the first byte; queue whatever did not fit. */
        if (sent < n && bufferevent_write(c->bev, c->w->frame + sent, (size_t) (n - sent)) < 0)
                return -ENOMEM;
        return 0;
}

/* Re-claim pages held before a daemon restart (Hello.held, Claim): they move
 * to this session (restart_claim(), through b->ops).  False after
 * conn_fail(). */
static bool conn_claim(struct conn *c, Mb__Extent *const *extents, size_t n, bool more, uint64_t *ret_pages) {
        struct arena_extent *e = c->w->extents;
        uint64_t bad = 0;
        int r;

        if (n > WORKER_MAX_UNCHARGE_EXTENTS) {
                conn_fail(c, false, 0, EINVAL, "too many extents");
                return false;
        }
        for (size_t i = 0; i < n; i++) {
                if (extents[i]->count == 0) {
                        conn_fail(c, false, 0, EINVAL, "extent at page %" PRIu64 " of 0 pages", extents[i]->start);
                        return false;
                }
                e[i] = (struct arena_extent) { .start = extents[i]->start, .count = extents[i]->count };
        }
        r = c->b->ops->claim(c->b, c->ts, c->token, c->owner, e, n, more, ret_pages, &bad);
        if (r == -ESTALE) {
                conn_fail(c, false, 0, ESTALE,
                          "membrokerd has no record of the pages of this client in tenant %s (it restarted without "
                          "its fd store, or the grace period is over)",
                          c->tenant->path);
                return false;
        }
        if (r == -EINVAL) {
                conn_fail(c, false, 0, EINVAL, "page %" PRIu64 " is not held by this client", bad);
                return false;
        }
        if (r < 0) {
                conn_fail(c, false, 0, -r, "cannot re-claim the pages: %s", strerror(-r));
                return false;
        }
        c->held += *ret_pages;
        if (c->rc)
                reclaim_client_set_held(c->rc, c->held);
        c->claiming = more;
        return true;
}

/* Claim{seq, extents, more}: the rest of a re-claim (Hello.held_more). */
void conn_claim_more(struct conn *c, const Mb__Claim *claim) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Ack ack = MB__ACK__INIT;
        uint64_t pages = 0;

        if (!c->claiming)
                return conn_fail(c, true, claim->seq, EPROTO, "Claim without Hello.held_more");
        if (!conn_claim(c, claim->extents, claim->n_extents, claim->has_more && claim->more, &pages))
                return;
        ack.seq = claim->seq;
        ack.pages = pages;
        msg.body_case = MB__MSG__BODY_ACK;
        msg.ack = &ack;
        if (conn_send(c, &msg) < 0)
                conn_fail(c, true, claim->seq, ENOMEM, "cannot queue the Ack");
}

/*
 * Resolve the tenant of the Hello (@path, or the one whose Cgroup= holds
 * @cgroup for "auto") and admit the client to it, under the tree lock
 * (read): counted there, the tenant cannot be removed (nor get children)
 * while it has clients.  Sets c->tenant, c->ts, c->arena, c->owner and
 * the batches the Welcome tells.  False after conn_fail().
 */
static bool conn_attach(struct conn *c, const char *path, const char *cgroup, unsigned *ret_batch,
                        unsigned *ret_batch_max, bool *ret_unlimited) {
        struct broker *b = c->b;
        _cleanup_(freep) char *reason = NULL;
        struct tenant_state *ts;
        struct tenant *t;
        int r;

        MB_RDLOCK_GUARD(&b->tree_lock);
        if (!path) {
                t = session_auto_tenant(b->tree->root, cgroup);
                if (!t) {
                        conn_fail(c, false, 0, ENOENT,
                                  "tenant \"auto\": no tenant's Cgroup= contains the client's cgroup %s", cgroup);
                        return false;
                }
        } else {
                t = tenant_lookup(b->tree, path);
                if (!t) {
                        conn_fail(c, false, 0, ENOENT, "no tenant %s", path);
                        return false;
                }
        }
        if (atomic_load(&t->draining)) {
                conn_fail(c, false, 0, ENOENT,
                          "tenant %s is draining: it is gone from the configuration files and admits no new clients",
                          t->path);
                return false;
        }
        if (t->nchildren > 0) {
                conn_fail(c, false, 0, EISDIR, "tenant %s has children; clients attach to leaves", t->path);
                return false;
        }
        r = auth_admit(&c->peer, t, &reason);
        if (r == -EACCES) {
                conn_fail(c, false, 0, EACCES, "%s", reason);
                return false;
        }
        if (r < 0) {
                conn_fail(c, false, 0, -r, "cannot check the client's credentials: %s", strerror(-r));
                return false;
        }
        ts = tenant_state_of(t);
        r = tenant_state_prepare(b, ts);
        if (r < 0) {
                conn_fail(c, false, 0, -r, "cannot set up tenant %s: %s", t->path, strerror(-r));
                return false;
        }
        r = arena_owner_new(ts->arena, &c->owner);
        if (r < 0) {
                conn_fail(c, false, 0, EUSERS, "too many clients in tenant %s", t->path);
                return false;
        }
        atomic_fetch_add(&t->nclients, 1);
        atomic_fetch_add(&b->nclients, 1);
        c->attached = true;
        /* Through its Hello: out of the bound on incomplete connections
         * (it stays in its user's cap). */
        if (c->guard.incomplete) {
                guard_hello_done(b->guard);
                c->guard.incomplete = false;
        }
        c->tenant = t;
        c->ts = ts;
        c->arena = ts->arena;
        *ret_batch = conn_charge_batch(b, t, 0);
        *ret_unlimited = tenant_is_unlimited(t);
        *ret_batch_max = *ret_unlimited ? conn_unlimited_batch(conn_base_batch(b, t)) : *ret_batch;
        return true;
}

/* Attach the client's stats region (and the tenant's daemon slots, at
 * first use) to rstat, and put the tenant on the active list.  0 or a
 * negative errno. */
static int conn_attach_stats(struct conn *c) {
        struct broker *b = c->b;
        struct tenant_state *ts = c->ts;
        struct tenant *t = c->tenant;
        int r = 0;

        MB_LOCK_GUARD(&b->stats_lock);
        if (!ts->daemon_src)
                r = rstat_source_attach_region(&t->rstat, mb_stats_region_of_slot(ts->daemon_slots, 0),
                                               ts->ndaemon_slots, &ts->daemon_src);
        if (r >= 0)
                r = rstat_source_attach_region(&t->rstat, c->stats, b->stats_slots, &c->stats_src);
        if (r >= 0 && !ts->active) {
                ts->active = true;
                ts->active_prev = NULL;
                ts->active_next = b->active;
                if (b->active)
                        b->active->active_prev = ts;
                b->active = ts;
        }
        return r;
}

void conn_hello(struct conn *c, const Mb__Hello *hello) {
        struct broker *b = c->b;
        _cleanup_(freep) char *path = NULL;
        _cleanup_(closep) int stats_fd = -1;
        const char *cgroup = NULL;
        struct tenant *t;
        struct tenant_state *ts;
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Welcome welcome = MB__WELCOME__INIT;
        unsigned batch, batch_max;
        bool unlimited;
        int r;

        session_client_name(c->name, sizeof(c->name), hello->client_name);
        if (guard_pidfd_exited(c->peer.pidfd))
                return conn_fail(c, false, 0, ESRCH, "the process that connected (pid %d) has exited",
                                 (int) c->peer.pid);
        if (hello->version != WIRE_PROTOCOL_VERSION)
                return conn_fail(c, false, 0, EPROTO, "protocol version %u is not supported (membrokerd speaks %u)",
                                 hello->version, WIRE_PROTOCOL_VERSION);

        if (strcmp(hello->tenant, "auto") == 0) {
                r = auth_peer_cgroup(&c->peer, &cgroup);
                if (r < 0)
                        return conn_fail(c, false, 0, -r, "cannot read the cgroup of pid %d for tenant \"auto\": %s",
                                         (int) c->peer.pid, strerror(-r));
        } else {
                r = tenant_path_normalize(hello->tenant, &path);
                if (r < 0)
                        return conn_fail(c, false, 0, EINVAL, "invalid tenant path \"%.64s\"", hello->tenant);
        }

        if (!conn_attach(c, path, cgroup, &batch, &batch_max, &unlimited))
                return;
        t = c->tenant;
        ts = c->ts;

        /* Its identity, kept in the owner table; after a daemon restart the
         * client brings it back with the pages it holds. */
        c->token = b->ops->client_attach(b, c->arena, c->owner, hello->has_client_token ? hello->client_token : 0);
        if (hello->has_client_token || hello->n_held > 0) {
                uint64_t pages = 0;

                if (!conn_claim(c, hello->held, hello->n_held, hello->has_held_more && hello->held_more, &pages))
                        return;
                log_info("client %" PRIu64 " (%s, pid %d) is back after a restart and re-claimed %" PRIu64
                         " pages of tenant %s",
                         c->client_id, c->name, (int) c->peer.pid, pages, t->path);
        }

        r = session_stats_region_new(b->stats_slots, &stats_fd, &c->stats, &c->stats_bytes);
        if (r < 0)
                return conn_fail(c, false, 0, -r, "cannot create the stats region: %s", strerror(-r));

        r = conn_attach_stats(c);
        if (r < 0)
                return conn_fail(c, false, 0, -r, "cannot attach the stats region: %s", strerror(-r));

        /* The reclaimer's handle: from now on Reclaim/Drain may reach it. */
        r = reclaim_client_attach(b->reclaimer, c->w->index, c, t, c->client_id, c->name, c->peer.pid, c->peer.pidfd, &c->rc);
        if (r < 0)
                return conn_fail(c, false, 0, -r, "cannot register the client for reclaim: %s", strerror(-r));
        reclaim_client_set_held(c->rc, c->held); /* pages re-claimed after a restart */

        welcome.version = WIRE_PROTOCOL_VERSION;
        welcome.tenant = t->path;
        welcome.page_size = b->page_size;
        welcome.charge_batch = batch;
        /* A client back after a restart keeps the batch its stocks were
         * made for and ignores this one: tell it again with the first
         * Grant. */
        c->told_batch = hello->has_client_token ? 0 : batch;
        welcome.arena_pages = c->arena->npages;
        welcome.stats_slots = b->stats_slots;
        welcome.client_id = c->client_id;
        welcome.has_unlimited = true;
        welcome.unlimited = unlimited;
        /* Room for the larger batch of a tenant with nothing limited, even
         * if the capacity withholds it now (conn_charge_batch()). */
        welcome.has_charge_batch_max = true;
        welcome.charge_batch_max = batch_max;
        welcome.has_pressure_triggers = true;
        welcome.pressure_triggers = true;
        welcome.has_outside_charges = true;
        welcome.outside_charges = true;
        welcome.has_client_token = true;
        welcome.client_token = c->token;
        msg.body_case = MB__MSG__BODY_WELCOME;
        msg.welcome = &welcome;

        r = conn_send_welcome(c, &msg, c->arena->fd, stats_fd);
        if (r < 0) {
                log_notice("client %" PRIu64 " (%s, pid %d): cannot send the Welcome: %s", c->client_id, c->name,
                           (int) c->peer.pid, strerror(-r));
                c->state = CONN_CLOSING;
                return;
        }

        c->state = CONN_READY;
        /* A member of the tenant's memory.pressure from now on. */
        c->psi.member = true;
        tenant_pressure_change(t, 1, 0);
        evtimer_del(c->guard.deadline); /* the pidfd stays: the session ends with its process */
        session_note_uid(ts, c->peer.uid);
        atomic_fetch_add(&c->b->nattached, 1);
        log_info("client %" PRIu64 " (%s, pid %d, uid %u) attached to tenant %s", c->client_id, c->name,
                 (int) c->peer.pid, (unsigned) c->peer.uid, t->path);
}

