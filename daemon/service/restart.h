/* SPDX-License-Identifier: MIT */
/*
 * restart.h - a restart of membrokerd that keeps every page (docs/design.md).
 *
 * What the fd store holds (service.h), by FDNAME=:
 *   mb-arena-ID    a tenant's arena memfd (the clients' memory itself);
 *   mb-owners-ID   the same tenant's owner table: a memfd with a header
 *                  (magic, page size, arena size, tenant path), the client
 *                  token of every arena-local owner id, and the arena's
 *                  owner[] array (one uint32_t per page), which the arena
 *                  maps and updates in place (arena_new_shared());
 *   mb-state-a/b   the runtime layer of tenant limits and the tenants made
 *                  with CreateTenant (state.h), written alternately with a
 *                  generation number and a checksum, so that a crash in the
 *                  middle of a write leaves the other one valid;
 *   mb-listen      the listening socket, so that clients that connect while
 *                  the daemon restarts wait in its backlog.
 * Arenas and owner tables are stored when created and removed with their
 * tenant; everything in them is updated in place as it changes, so a
 * SIGKILL loses nothing: the owner of every page is in owner[], the token
 * of every owner in the table.
 *
 * At start the daemon takes the store back ($LISTEN_FDS), re-creates the
 * tenants, maps the owner tables, rebuilds each arena's free-page pool from
 * owner[] and charges every held page to its tenant again: usage is exactly
 * what it was.  A client that reconnects sends Hello{client_token, held}
 * (and Claim messages when its extents do not fit in one frame); the pages
 * it names move to its new session, the pages its old session held but it
 * no longer names (a Charge granted while the daemon died, an Uncharge sent
 * meanwhile) are returned at once.  Pages whose client does not come back
 * within RestartGraceSec= are hole-punched and returned.
 *
 * On SIGTERM, when the fd store is in use, the daemon keeps every page (it
 * does not release what its clients hold): a restart by the service
 * manager then looks to the clients exactly like a crash, minus the loss.
 * Without a service manager ($NOTIFY_SOCKET unset) nothing is stored: a
 * stop ends every session and its accounting, but punches no page a client
 * holds (conn_free()): the client still reads its bytes, as after a crash.
 *
 * Threading: restart_client_*(), restart_arena_new() and restart_claim()
 * run on workers; the rest on the main thread.  A mutex serialises claims
 * with the grace timer.
 *
 * The module knows the manager only through what it is handed at creation
 * (struct restart_params) and the callbacks of struct restart_ops: it makes
 * tenants again through the manager, which owns the tree's life cycle.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"

struct event_base;
struct state;
struct tenant;
struct tenant_state;
struct tenant_tree;
struct restart;

/* Where the arena's owner[] starts in the owner-table memfd; the bytes before
 * it hold the header and the token table. */
#define RESTART_OWNERS_OFFSET_BYTES (1024u * 1024u)
/* The default of RestartGraceSec=. */
#define RESTART_DEFAULT_GRACE_SEC 30u

/* What the restart module works with, fixed for the daemon's life. */
struct restart_params {
        struct event_base *base;   /* the main loop (grace timer, state saves) */
        struct tenant_tree *tree;  /* tenants looked up by path (main thread) */
        struct state *state;       /* the runtime layer it keeps in the fd store */
        uint64_t page_size;        /* bytes */
        bool arena_tmpfs;          /* new arenas on a tmpfs instance each */
        bool arena_memfd_fallback; /* ... or a memfd when no instance can be made */
        bool arena_huge;           /* ... mounted huge=always (HugePages=thp) */
        bool arena_hugetlb;        /* hugetlb pages (HugePages=hugetlbfs) ... */
        bool arena_hugetlb_bounded; /* ... on a hugetlbfs instance each (else memfds) */
        unsigned grace_sec;        /* RestartGraceSec= */
};

/* What the restart module asks of its creator (the manager). */
struct restart_ops {
        /* Make tenant @path at run time (it is not in the tree): 0 with
         * *@ret, or a negative errno.  Main thread. */
        int (*tenant_create)(void *userdata, const char *path, struct tenant **ret);
        /* The broker's charge batch now, in pages (a new arena's slack).
         * Any thread, no lock. */
        unsigned (*charge_batch)(void *userdata);
        /* The grace period is over: the restored pages no client claimed
         * were returned (STATUS= changes).  Main thread. */
        void (*grace_over)(void *userdata);
};

/**
 * restart_new - the restart module for @params (copied; what it points to
 * must outlive the module) with @ops (static storage, every member required)
 * called with @userdata.  0 or -ENOMEM.
 */
int restart_new(const struct restart_params *params, const struct restart_ops *ops, void *userdata,
                struct restart **ret);
/* Free; NULL is a no-op.  Main thread, before the event base goes. */
void restart_free(struct restart *r);

/**
 * restart_restore - take what the previous daemon left in the fd store
 * ($LISTEN_FDS): the runtime state (applied to the state and the tree:
 * tenants made at run time are made again through ops->tenant_create()),
 * then every arena with its owner table (tenants made when missing; held
 * pages charged again).  Call after the tree and the persisted limits are in
 * place, before listening.  Descriptors it does not know are dropped from
 * the store.  Returns 0, or a negative errno with *@ret_error set (then
 * start-up fails).
 */
int restart_restore(struct restart *r, char **ret_error);

/* The listening socket the previous daemon stored for @path, or -1 (the
 * caller owns it; also without @r).  Main thread, before listening. */
int restart_take_listener(struct restart *r, const char *path);
/* Store the listening socket (replacing a stored one).  Main thread. */
void restart_store_listener(struct restart *r, int fd);

/* Arm the grace timer for the restored pages (after READY=1).  0 or
 * -ENOMEM.  Main thread. */
int restart_start_grace(struct restart *r);

/**
 * restart_arena_new - create @ts's arena (@npages pages) with its owner
 * table in a memfd, and hand both to the fd store.  @r is required.  Worker
 * thread, with ts->lock held.  0 or a negative errno.
 */
int restart_arena_new(struct restart *r, struct tenant_state *ts, uint64_t npages, struct arena **ret);

/* @ts is being removed: drop its arena and owner table from the fd store.
 * Main thread. */
void restart_arena_forget(struct restart *r, struct tenant_state *ts);

/**
 * restart_client_attach - record @token (0: make a new random one) as the
 * identity of arena-local @owner of @a, so that it survives a crash.
 * Returns the token.  Worker thread.
 */
uint64_t restart_client_attach(struct restart *r, struct arena *a, uint32_t owner, uint64_t token);
/* @owner left (its pages are released): forget its token.  Not while
 * preserving (restart_preserving()).  Worker thread. */
void restart_client_detach(struct restart *r, struct arena *a, uint32_t owner);

/**
 * restart_claim - a reconnecting client with @token, now arena-local @owner
 * of @ts's arena, claims the pages of @n extents it held before the restart.
 * Every page must have been held by that client (checked before anything
 * changes); they move to @owner.  When @more is false the claim is complete
 * and every page the client held before but did not claim is returned.
 * *@ret_pages is the number of pages moved.  Returns 0; -ESTALE when the
 * daemon has no record of @token in @ts (it restarted without the fd store,
 * or the grace period is over) and pages are claimed; -EINVAL with
 * *@ret_bad_page for a page the client did not hold.  Worker thread.
 */
int restart_claim(struct restart *r, struct tenant_state *ts, uint64_t token, uint32_t owner,
                  const struct arena_extent *extents, size_t n, bool more, uint64_t *ret_pages,
                  uint64_t *ret_bad_page);

/* The runtime layer of the state changed: write it to the fd store at the
 * end of this turn of the main loop.  Main thread. */
void restart_state_changed(struct restart *r);

/**
 * restart_prepare_exit - the daemon stops (SIGTERM/SIGINT).  When the fd
 * store holds its memory, write the runtime state now and start preserving:
 * from here on no client's pages are released, so that the next daemon
 * finds them.  Main thread.
 */
void restart_prepare_exit(struct restart *r);

/* True while stopping with the memory handed to the fd store: disconnects
 * do not release pages.  False without @r.  Any thread. */
bool restart_preserving(const struct restart *r);

/* How many pages and clients were restored at start and not yet claimed
 * (for logs and STATUS=; 0 without @r).  Main thread. */
void restart_pending(struct restart *r, uint64_t *ret_pages, uint64_t *ret_clients);
