/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "macros.h"
#include "mb_size.h"
#include "restart.h"
#include "service.h"
#include "state.h"
#include "tenant_state.h"

#define OWNERS_MAGIC "MBOWNER1"
#define OWNERS_VERSION 1u
#define OWNERS_TOKENS_OFFSET_BYTES 8192u
#define OWNERS_MAX_TOKENS ((RESTART_OWNERS_OFFSET_BYTES - OWNERS_TOKENS_OFFSET_BYTES) / sizeof(uint64_t))

#define STATE_MAGIC "MBSTATE1"
#define STATE_HEADER_BYTES 64u
#define STATE_MAX_BYTES (256u * 1024u * 1024u)

#define FDNAME_ARENA "mb-arena-"
#define FDNAME_AROOT "mb-aroot-" /* the root of the arena's tmpfs instance */
#define FDNAME_OWNERS "mb-owners-"
#define FDNAME_LISTEN "mb-listen"
static const char *const fdname_state[2] = { "mb-state-a", "mb-state-b" };

/* The head of an owner-table memfd (see restart.h). */
struct owners_header {
        char magic[8];
        uint32_t version;
        uint32_t path_bytes;      /* without the NUL */
        uint64_t page_size;
        uint64_t npages;
        uint64_t store_id;        /* the ID in mb-arena-ID / mb-owners-ID */
        uint64_t tokens_offset;   /* uint64_t token[owner id] */
        uint64_t max_tokens;
        uint64_t owners_offset;   /* uint32_t owner[page] (the arena's) */
        char path[TENANT_PATH_MAX];
};
_Static_assert(sizeof(struct owners_header) <= OWNERS_TOKENS_OFFSET_BYTES, "owner table header");

struct state_header {
        char magic[8];
        uint64_t generation;
        uint64_t length;
        uint64_t hash; /* FNV-1a 64 of the text */
};
_Static_assert(sizeof(struct state_header) <= STATE_HEADER_BYTES, "state header");

/* A client of the previous daemon whose pages are not claimed yet. */
struct restored_owner {
        struct tenant_state *ts;
        uint64_t token;  /* 0: unknown (its pages go at the end of the grace period) */
        uint32_t owner;  /* arena-local id under which the pages still are */
        uint64_t pages;  /* still held under that id */
};

struct restart {
        struct restart_params p;
        const struct restart_ops *ops;
        void *userdata;
        bool enabled;                 /* a service manager keeps our descriptors */
        _Atomic bool preserve;        /* stopping: keep every page */
        _Atomic uint64_t next_store_id;
        _Atomic bool token_table_full_logged;

        pthread_mutex_t lock;         /* owners[]: claims vs. the grace timer */
        struct restored_owner *owners;
        size_t nowners;
        uint64_t restored_pages, restored_clients;

        int listen_fd;                /* stored listening socket, until taken */
        bool listen_stored;           /* ours is in the store */

        int state_fd[2];
        uint64_t state_generation;
        bool save_scheduled;

        struct event *grace_timer;
};

static uint64_t fnv1a(const void *p, size_t n) {
        const uint8_t *s = p;
        uint64_t h = UINT64_C(1469598103934665603);

        for (size_t i = 0; i < n; i++)
                h = (h ^ s[i]) * UINT64_C(1099511628211);
        return h;
}

int restart_new(const struct restart_params *params, const struct restart_ops *ops, void *userdata,
                struct restart **ret) {
        struct restart *r = calloc(1, sizeof(*r));

        if (!r)
                return -ENOMEM;
        r->p = *params;
        r->ops = ops;
        r->userdata = userdata;
        r->listen_fd = -1;
        r->state_fd[0] = r->state_fd[1] = -1;
        r->next_store_id = 1;
        pthread_mutex_init(&r->lock, NULL);
        *ret = r;
        return 0;
}

void restart_free(struct restart *r) {
        if (!r)
                return;
        if (r->grace_timer)
                event_free(r->grace_timer);
        if (r->listen_fd >= 0)
                close(r->listen_fd);
        for (int i = 0; i < 2; i++)
                if (r->state_fd[i] >= 0)
                        close(r->state_fd[i]);
        free(r->owners);
        pthread_mutex_destroy(&r->lock);
        free(r);
}

bool restart_preserving(const struct restart *r) {
        return r && atomic_load(&r->preserve);
}

void restart_pending(struct restart *r, uint64_t *ret_pages, uint64_t *ret_clients) {
        uint64_t pages = 0, clients = 0;

        if (r) {
                pthread_mutex_lock(&r->lock);
                for (size_t i = 0; i < r->nowners; i++) {
                        pages += r->owners[i].pages;
                        clients += r->owners[i].token != 0;
                }
                pthread_mutex_unlock(&r->lock);
        }
        *ret_pages = pages;
        *ret_clients = clients;
}

/* ---- tokens ---- */

static uint64_t token_new(void) {
        uint64_t t = 0;

        while (t == 0) {
                if (getrandom(&t, sizeof(t), 0) != (ssize_t) sizeof(t)) {
                        /* Cannot happen after boot; stay unique anyway. */
                        static _Atomic uint64_t fallback = 1;
                        t = ((uint64_t) getpid() << 32) ^ atomic_fetch_add(&fallback, 1) ^ (uint64_t) time(NULL);
                }
        }
        return t;
}

static void token_write(struct restart *r, struct arena *a, uint32_t owner, uint64_t token) {
        if (a->owner_fd < 0)
                return;
        if (owner >= OWNERS_MAX_TOKENS) {
                if (!atomic_exchange(&r->token_table_full_logged, true))
                        log_warning("more than %zu clients in one tenant: the identity of the others does not "
                                    "survive a restart of membrokerd (their pages are returned then)",
                                    (size_t) OWNERS_MAX_TOKENS);
                return;
        }
        /* One aligned 8-byte write: a crash sees the old or the new token. */
        if (pwrite(a->owner_fd, &token, sizeof(token), (off_t) (OWNERS_TOKENS_OFFSET_BYTES + owner * sizeof(token))) !=
            (ssize_t) sizeof(token))
                log_warning_errno(-errno, "cannot record the token of a client: %m");
}

uint64_t restart_client_attach(struct restart *r, struct arena *a, uint32_t owner, uint64_t token) {
        if (token == 0)
                token = token_new();
        if (r)
                token_write(r, a, owner, token);
        return token;
}

void restart_client_detach(struct restart *r, struct arena *a, uint32_t owner) {
        if (!r || restart_preserving(r))
                return;
        token_write(r, a, owner, 0);
}

/* ---- arenas ---- */

static void fdname(char *buf, size_t size, const char *prefix, uint64_t id) {
        snprintf(buf, size, "%s%" PRIu64, prefix, id);
}

int restart_arena_new(struct restart *r, struct tenant_state *ts, uint64_t npages, struct arena **ret) {
        _cleanup_(closep) int ofd = -1;
        struct owners_header *h = NULL;
        struct arena *a = NULL;
        struct arena_backing backing;
        char name[SERVICE_FDNAME_MAX + 1];
        uint64_t id;
        size_t plen = strlen(ts->tenant->path);
        int k;

        if (npages > (UINT64_MAX - RESTART_OWNERS_OFFSET_BYTES) / sizeof(uint32_t))
                return -EINVAL;
        ofd = memfd_create("membroker-owners", MFD_CLOEXEC);
        if (ofd < 0)
                return -errno;
        /* Sparse: untouched parts of the table cost nothing. */
        if (ftruncate(ofd, (off_t) (RESTART_OWNERS_OFFSET_BYTES + npages * sizeof(uint32_t))) < 0)
                return -errno;

        id = atomic_fetch_add(&r->next_store_id, 1);
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        memcpy(h->magic, OWNERS_MAGIC, sizeof(h->magic));
        h->version = OWNERS_VERSION;
        h->path_bytes = (uint32_t) plen;
        h->page_size = r->p.page_size;
        h->npages = npages;
        h->store_id = id;
        h->tokens_offset = OWNERS_TOKENS_OFFSET_BYTES;
        h->max_tokens = OWNERS_MAX_TOKENS;
        h->owners_offset = RESTART_OWNERS_OFFSET_BYTES;
        memcpy(h->path, ts->tenant->path, MB_MIN(plen, sizeof(h->path) - 1));
        k = pwrite(ofd, h, sizeof(*h), 0) == (ssize_t) sizeof(*h) ? 0 : -EIO;
        free(h);
        if (k < 0)
                return k;

        backing = (struct arena_backing) {
                .tmpfs = r->p.arena_tmpfs,
                .slack_pages = r->ops->charge_batch(r->userdata),
                .huge = r->p.arena_huge,
                .hugetlb = r->p.arena_hugetlb,
        };
        if (r->p.arena_hugetlb_bounded) {
                /* hugetlbfs cannot be resized: its size is the tenant's
                 * limit now (the lowest max on its path, as
                 * page_counter_try_charge() meets it) + 2 x ChargeBatch. */
                unsigned long max = ULONG_MAX;

                for (const struct tenant *t = ts->tenant; t; t = t->parent)
                        max = MB_MIN(max, page_counter_get_max(&t->memory));
                backing.hugetlb_size_pages =
                        MB_MIN(npages, (uint64_t) MB_MIN(max, (unsigned long) npages) + 2 * backing.slack_pages);
        }
        k = arena_new_shared(ts->tenant->path, npages, r->p.page_size, ofd, RESTART_OWNERS_OFFSET_BYTES, &backing,
                             &a);
        if (k < 0 && backing.tmpfs && r->p.arena_memfd_fallback) {
                log_warning_errno(k, "tenant %s: cannot make a tmpfs instance for its arena, using a memfd "
                                  "(only the audit bounds it): %m", ts->tenant->path);
                backing.tmpfs = false;
                k = arena_new_shared(ts->tenant->path, npages, r->p.page_size, ofd, RESTART_OWNERS_OFFSET_BYTES,
                                     &backing, &a);
        }
        if (k < 0)
                return k;
        a->owner_fd = TAKE_FD(ofd);

        if (r->enabled) {
                fdname(name, sizeof(name), FDNAME_ARENA, id);
                k = service_fdstore_add(a->fd, name);
                if (k >= 0) {
                        fdname(name, sizeof(name), FDNAME_OWNERS, id);
                        k = service_fdstore_add(a->owner_fd, name);
                }
                if (k >= 0 && a->root_fd >= 0) {
                        fdname(name, sizeof(name), FDNAME_AROOT, id);
                        k = service_fdstore_add(a->root_fd, name);
                }
                if (k < 0)
                        log_warning_errno(k, "tenant %s: cannot hand its arena to the fd store, its memory will "
                                          "not survive a restart: %m", ts->tenant->path);
        }
        *ret = a;
        return 0;
}

static int owners_read_header(int fd, struct owners_header *h) {
        ssize_t n = pread(fd, h, sizeof(*h), 0);

        if (n != (ssize_t) sizeof(*h))
                return -EBADMSG;
        if (memcmp(h->magic, OWNERS_MAGIC, sizeof(h->magic)) != 0 || h->version != OWNERS_VERSION ||
            h->path_bytes >= sizeof(h->path) || h->tokens_offset != OWNERS_TOKENS_OFFSET_BYTES ||
            h->owners_offset != RESTART_OWNERS_OFFSET_BYTES || h->max_tokens != OWNERS_MAX_TOKENS)
                return -EBADMSG;
        h->path[h->path_bytes] = 0;
        return 0;
}

void restart_arena_forget(struct restart *r, struct tenant_state *ts) {
        struct owners_header *h;
        char name[SERVICE_FDNAME_MAX + 1];

        if (!r || !r->enabled || !ts || !ts->arena || ts->arena->owner_fd < 0)
                return;
        h = malloc(sizeof(*h));
        if (!h)
                return;
        if (owners_read_header(ts->arena->owner_fd, h) >= 0) {
                fdname(name, sizeof(name), FDNAME_ARENA, h->store_id);
                (void) service_fdstore_remove(name);
                fdname(name, sizeof(name), FDNAME_OWNERS, h->store_id);
                (void) service_fdstore_remove(name);
                if (ts->arena->root_fd >= 0) {
                        fdname(name, sizeof(name), FDNAME_AROOT, h->store_id);
                        (void) service_fdstore_remove(name);
                }
        }
        free(h);
}

/* ---- claims and the grace period ---- */

/* Return what @o still holds and forget it.  r->lock held. */
static void owner_release_locked(struct restart *r, struct restored_owner *o) {
        struct arena *a = o->ts->arena;
        uint64_t released = 0;

        if (o->pages > 0) {
                released = arena_release_owner(a, o->owner, o->pages);
                page_counter_uncharge(&o->ts->tenant->memory, released);
        }
        token_write(r, a, o->owner, 0);
        arena_owner_free(a, o->owner);
        o->pages = 0;
}

static void owners_remove_released_locked(struct restart *r) {
        size_t k = 0;

        for (size_t i = 0; i < r->nowners; i++)
                if (r->owners[i].ts)
                        r->owners[k++] = r->owners[i];
        r->nowners = k;
}

#define CLAIM_MAX_OLD_OWNERS 8u

int restart_claim(struct restart *r, struct tenant_state *ts, uint64_t token, uint32_t owner,
                  const struct arena_extent *extents, size_t n, bool more, uint64_t *ret_pages,
                  uint64_t *ret_bad_page) {
        uint32_t from[CLAIM_MAX_OLD_OWNERS];
        uint64_t moved[CLAIM_MAX_OLD_OWNERS] = {};
        size_t idx[CLAIM_MAX_OLD_OWNERS];
        size_t nfrom = 0;
        uint64_t total = 0;
        int k;

        *ret_pages = 0;
        if (!r || token == 0)
                return n > 0 ? -ESTALE : 0;

        pthread_mutex_lock(&r->lock);
        /* A crash in the middle of a claim leaves the client's pages under
         * two ids with the same token: take them from either. */
        for (size_t i = 0; i < r->nowners && nfrom < CLAIM_MAX_OLD_OWNERS; i++)
                if (r->owners[i].ts == ts && r->owners[i].token == token) {
                        idx[nfrom] = i;
                        from[nfrom++] = r->owners[i].owner;
                }
        if (nfrom == 0) {
                pthread_mutex_unlock(&r->lock);
                return n > 0 ? -ESTALE : 0;
        }

        if (n > 0) {
                k = arena_transfer(ts->arena, from, nfrom, owner, extents, n, moved, ret_bad_page);
                if (k < 0) {
                        pthread_mutex_unlock(&r->lock);
                        return k;
                }
        }
        for (size_t j = 0; j < nfrom; j++) {
                struct restored_owner *o = &r->owners[idx[j]];

                o->pages -= MB_MIN(moved[j], o->pages);
                total += moved[j];
        }
        if (!more) {
                uint64_t left = 0;

                for (size_t j = 0; j < nfrom; j++) {
                        struct restored_owner *o = &r->owners[idx[j]];

                        left += o->pages;
                        owner_release_locked(r, o);
                        o->ts = NULL;
                }
                owners_remove_released_locked(r);
                if (left > 0) {
                        char b[MB_SIZE_FORMAT_MAX];

                        log_info("tenant %s: %s the reconnected client no longer holds were returned",
                                 ts->tenant->path,
                                 mb_size_format_pages(b, sizeof(b), left, r->p.page_size, UINT64_MAX));
                }
        }
        pthread_mutex_unlock(&r->lock);
        *ret_pages = total;
        return 0;
}

static void grace_cb(evutil_socket_t fd, short what, void *userdata) {
        struct restart *r = userdata;
        uint64_t pages = 0, clients = 0;
        char b[MB_SIZE_FORMAT_MAX];

        pthread_mutex_lock(&r->lock);
        for (size_t i = 0; i < r->nowners; i++) {
                struct restored_owner *o = &r->owners[i];

                pages += o->pages;
                clients++;
                log_notice("tenant %s: a client of the previous membrokerd (token %016" PRIx64 ") did not come "
                           "back within the grace period; its %s are returned",
                           o->ts->tenant->path, o->token,
                           mb_size_format_pages(b, sizeof(b), o->pages, r->p.page_size, UINT64_MAX));
                owner_release_locked(r, o);
        }
        r->nowners = 0;
        pthread_mutex_unlock(&r->lock);
        if (clients > 0)
                log_info("restart grace period over: %s of %" PRIu64 " clients returned",
                         mb_size_format_pages(b, sizeof(b), pages, r->p.page_size, UINT64_MAX), clients);
        r->ops->grace_over(r->userdata);
}

int restart_start_grace(struct restart *r) {
        struct timeval tv;

        if (!r || r->nowners == 0)
                return 0;
        tv = (struct timeval) { .tv_sec = r->p.grace_sec };
        r->grace_timer = evtimer_new(r->p.base, grace_cb, r);
        if (!r->grace_timer || evtimer_add(r->grace_timer, &tv) < 0)
                return -ENOMEM;
        return 0;
}

/* ---- the runtime state ---- */

static int state_write(struct restart *r, int fd, uint64_t generation, const char *text, size_t len) {
        struct state_header h = { .generation = generation, .length = len, .hash = fnv1a(text, len) };
        uint8_t head[STATE_HEADER_BYTES] = {};

        memcpy(h.magic, STATE_MAGIC, sizeof(h.magic));
        memcpy(head, &h, sizeof(h));
        /* Invalidate, write the text, then the header that vouches for it. */
        if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t) (STATE_HEADER_BYTES + len)) < 0)
                return -errno;
        if (len > 0 && pwrite(fd, text, len, STATE_HEADER_BYTES) != (ssize_t) len)
                return -EIO;
        if (pwrite(fd, head, sizeof(head), 0) != (ssize_t) sizeof(head))
                return -EIO;
        return 0;
}

static int state_save_now(struct restart *r) {
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        unsigned slot;
        int k;

        if (!r || !r->enabled)
                return 0;
        k = state_runtime_serialize(r->p.state, &text, &len);
        if (k < 0)
                return k;
        slot = (unsigned) ((r->state_generation + 1) & 1);
        if (r->state_fd[slot] < 0) {
                _cleanup_(closep) int fd = memfd_create("membroker-state", MFD_CLOEXEC);

                if (fd < 0)
                        return -errno;
                k = state_write(r, fd, r->state_generation + 1, text, len);
                if (k < 0)
                        return k;
                k = service_fdstore_add(fd, fdname_state[slot]);
                if (k < 0)
                        return k;
                r->state_fd[slot] = TAKE_FD(fd);
        } else {
                k = state_write(r, r->state_fd[slot], r->state_generation + 1, text, len);
                if (k < 0)
                        return k;
        }
        r->state_generation++;
        return 0;
}

static void state_save_cb(evutil_socket_t fd, short what, void *userdata) {
        struct restart *r = userdata;
        int k;

        r->save_scheduled = false;
        k = state_save_now(r);
        if (k < 0)
                log_warning_errno(k, "cannot hand the runtime state to the fd store: %m");
}

void restart_state_changed(struct restart *r) {
        static const struct timeval now = { 0, 0 };

        if (!r || !r->enabled || r->save_scheduled)
                return;
        if (event_base_once(r->p.base, -1, EV_TIMEOUT, state_save_cb, r, &now) == 0)
                r->save_scheduled = true;
        else
                (void) state_save_now(r);
}

void restart_prepare_exit(struct restart *r) {
        int k;

        if (!r || !r->enabled)
                return;
        k = state_save_now(r);
        if (k < 0)
                log_warning_errno(k, "cannot hand the runtime state to the fd store: %m");
        atomic_store(&r->preserve, true);
        log_info("the fd store keeps every arena: clients keep their pages across the restart");
}

/* Read one stored state snapshot: 0 and the text when valid. */
static int state_read(int fd, uint64_t *ret_generation, char **ret_text, size_t *ret_len) {
        struct state_header h;
        struct stat st;
        char *text;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (pread(fd, &h, sizeof(h), 0) != (ssize_t) sizeof(h) || memcmp(h.magic, STATE_MAGIC, sizeof(h.magic)) != 0)
                return -EBADMSG;
        if (h.length > STATE_MAX_BYTES || (uint64_t) st.st_size < STATE_HEADER_BYTES + h.length)
                return -EBADMSG;
        text = malloc(h.length + 1);
        if (!text)
                return -ENOMEM;
        if (h.length > 0 && pread(fd, text, h.length, STATE_HEADER_BYTES) != (ssize_t) h.length) {
                free(text);
                return -EBADMSG;
        }
        text[h.length] = 0;
        if (fnv1a(text, h.length) != h.hash) {
                free(text);
                return -EBADMSG;
        }
        *ret_generation = h.generation;
        *ret_text = text;
        *ret_len = h.length;
        return 0;
}

/* ---- the listening socket ---- */

int restart_take_listener(struct restart *r, const char *path) {
        struct sockaddr_un sa = {};
        socklen_t sl = sizeof(sa);
        int fd, accepting = 0;
        socklen_t al = sizeof(accepting);

        if (!r || r->listen_fd < 0)
                return -1;
        fd = TAKE_FD(r->listen_fd);
        if (getsockname(fd, (struct sockaddr *) &sa, &sl) < 0 || sa.sun_family != AF_UNIX ||
            strncmp(sa.sun_path, path, sizeof(sa.sun_path)) != 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &al) < 0 || !accepting) {
                log_info("the stored listening socket is not %s; making a new one", path);
                close(fd);
                (void) service_fdstore_remove(FDNAME_LISTEN);
                return -1;
        }
        r->listen_stored = true;
        return fd;
}

void restart_store_listener(struct restart *r, int fd) {
        int k;

        if (!r || !r->enabled || r->listen_stored)
                return;
        (void) service_fdstore_remove(FDNAME_LISTEN);
        k = service_fdstore_add(fd, FDNAME_LISTEN);
        if (k < 0)
                log_warning_errno(k, "cannot hand the listening socket to the fd store: %m");
        r->listen_stored = k > 0;
}

/* ---- start-up ---- */

static bool name_has_prefix(const char *name, const char *prefix, uint64_t *ret_id) {
        size_t n = strlen(prefix);
        char *end;

        if (strncmp(name, prefix, n) != 0 || name[n] < '0' || name[n] > '9')
                return false;
        errno = 0;
        *ret_id = strtoull(name + n, &end, 10);
        return errno == 0 && *end == 0;
}

static void drop_fd(struct service_fd *f) {
        if (f->fd >= 0)
                close(f->fd);
        f->fd = -1;
        (void) service_fdstore_remove(f->name);
}

/* Make the tenants of the runtime layer that do not exist, and apply the
 * layers to every tenant they name. */
static int apply_runtime_cb(const struct state_entry *e, void *userdata) {
        struct restart *r = userdata;
        struct tenant *t = tenant_lookup(r->p.tree, e->path);

        if (!t && e->created) {
                int k = r->ops->tenant_create(r->userdata, e->path, &t);
                if (k < 0) {
                        log_warning_errno(k, "cannot make tenant %s again after the restart: %m", e->path);
                        return 0;
                }
        }
        return 0;
}

static int restore_arena(struct restart *r, struct service_fd *afd, struct service_fd *ofd, struct service_fd *rfd,
                         uint64_t id) {
        const uint64_t page_size = r->p.page_size;
        _cleanup_(freep) struct owners_header *h = NULL;
        _cleanup_(freep) uint64_t *counts = NULL, *tokens = NULL;
        struct tenant_state *ts;
        struct tenant *t;
        struct arena *a = NULL;
        uint32_t max_owner = 0;
        size_t nrec = 0;
        struct stat st;
        int k, seals;

        h = malloc(sizeof(*h));
        if (!h)
                return -ENOMEM;
        k = owners_read_header(ofd->fd, h);
        if (k < 0 || h->store_id != id) {
                log_error("fd store: %s is not an owner table membrokerd can read; dropping it and its arena",
                          ofd->name);
                return -EBADMSG;
        }
        if (h->page_size != page_size) {
                log_error("tenant %s: its stored arena has pages of %" PRIu64 " bytes, the daemon now %" PRIu64
                          "; the pages are lost",
                          h->path, h->page_size, page_size);
                return -EBADMSG;
        }

        t = tenant_lookup(r->p.tree, h->path);
        if (!t) {
                /* Made at run time, or removed from the files since: it
                 * holds memory, so it exists until its clients leave. */
                k = r->ops->tenant_create(r->userdata, h->path, &t);
                if (k < 0) {
                        log_error_errno(k, "tenant %s: cannot make it again for its stored arena: %m", h->path);
                        return k;
                }
                (void) state_set_created(r->p.state, t->path, true);
        }
        ts = tenant_state_of(t);
        if (!ts || ts->arena) {
                log_error("tenant %s: two stored arenas; dropping %s", h->path, afd->name);
                return -EEXIST;
        }
        if (t->nchildren > 0)
                log_error("tenant %s now has children: its clients cannot attach, their pages go at the end of "
                          "the grace period",
                          t->path);

        /* A tmpfs file is not sealed: a client may have resized it. */
        if (fstat(afd->fd, &st) < 0 || (uint64_t) st.st_size != h->npages * page_size) {
                log_warning("tenant %s: its stored arena was resized by a client; restoring its size", h->path);
                if (ftruncate(afd->fd, (off_t) (h->npages * page_size)) < 0)
                        return log_error_errno(-errno, "tenant %s: cannot restore its arena's size: %m", h->path);
        }
        seals = fcntl(afd->fd, F_GET_SEALS);
        if (!rfd && seals >= 0 && !(seals & F_SEAL_GROW))
                log_warning("tenant %s: the root of its arena's tmpfs instance was not stored; the arena cannot be "
                            "resized, only the audit bounds it",
                            h->path);
        k = arena_restore(afd->fd, rfd ? rfd->fd : -1, page_size, r->ops->charge_batch(r->userdata), ofd->fd,
                          RESTART_OWNERS_OFFSET_BYTES, t->path, &a);
        if (k < 0) {
                log_error_errno(k, "tenant %s: cannot restore its arena: %m", h->path);
                return k;
        }
        afd->fd = -1; /* the arena owns it (and the root) */
        if (rfd)
                rfd->fd = -1;
        if (rfd && a->pick_fd < 0)
                log_warning("tenant %s: the tmpfs instance of its arena cannot be resized again; only the audit "
                            "bounds it",
                            t->path);
        a->owner_fd = TAKE_FD(ofd->fd);

        /* Who holds what: one pass over owner[]. */
        max_owner = a->next_owner > 0 ? a->next_owner - 1 : 0;
        counts = calloc((size_t) max_owner + 1, sizeof(*counts));
        tokens = calloc((size_t) max_owner + 1, sizeof(*tokens));
        if (!counts || !tokens) {
                arena_free(a);
                return -ENOMEM;
        }
        for (uint64_t p = 0; p < a->top; p++) {
                uint32_t o = a->owner[p];
                if (o != ARENA_OWNER_NONE && o <= max_owner)
                        counts[o]++;
        }
        for (uint32_t o = 1; o <= max_owner && o < OWNERS_MAX_TOKENS; o++)
                if (counts[o] > 0 &&
                    pread(a->owner_fd, &tokens[o], sizeof(uint64_t),
                          (off_t) (OWNERS_TOKENS_OFFSET_BYTES + o * sizeof(uint64_t))) != (ssize_t) sizeof(uint64_t))
                        tokens[o] = 0;

        pthread_mutex_lock(&ts->lock);
        ts->arena = a;
        pthread_mutex_unlock(&ts->lock);

        pthread_mutex_lock(&r->lock);
        for (uint32_t o = 1; o <= max_owner; o++) {
                struct restored_owner *no;

                if (counts[o] == 0) {
                        /* An id without pages: a client that held nothing. */
                        token_write(r, a, o, 0);
                        continue;
                }
                no = realloc(r->owners, (r->nowners + 1) * sizeof(*no));
                if (!no) {
                        pthread_mutex_unlock(&r->lock);
                        return -ENOMEM;
                }
                r->owners = no;
                r->owners[r->nowners++] = (struct restored_owner) {
                        .ts = ts, .token = tokens[o], .owner = o, .pages = counts[o],
                };
                nrec++;
        }
        r->restored_pages += arena_used(a);
        r->restored_clients += nrec;
        pthread_mutex_unlock(&r->lock);

        /* The pages were charged before the restart; they still are. */
        if (arena_used(a) > 0)
                page_counter_charge(&t->memory, (unsigned long) arena_used(a));
        {
                char b[MB_SIZE_FORMAT_MAX];

                log_info("tenant %s: arena restored from the fd store, %s held by %zu clients", t->path,
                         mb_size_format_pages(b, sizeof(b), arena_used(a), r->p.page_size, UINT64_MAX), nrec);
        }
        return 0;
}

int restart_restore(struct restart *r, char **ret_error) {
        struct service_fd *fds = NULL;
        size_t nfds = 0;
        uint64_t best_gen = 0, max_id = 0;
        _cleanup_(freep) char *best = NULL;
        size_t best_len = 0;
        int k;

        r->enabled = service_notify_enabled();
        k = service_take_listen_fds(&fds, &nfds);
        if (k < 0) {
                log_warning_errno(k, "cannot take the descriptors passed by the service manager: %m");
                return 0;
        }
        if (nfds > 0)
                log_info("the service manager passed %zu descriptors", nfds);

        /* The runtime state first: it names the tenants made at run time. */
        for (size_t i = 0; i < nfds; i++) {
                for (unsigned slot = 0; slot < 2; slot++) {
                        uint64_t gen = 0;
                        char *text = NULL;
                        size_t len = 0;

                        if (strcmp(fds[i].name, fdname_state[slot]) != 0)
                                continue;
                        if (r->state_fd[slot] >= 0) {
                                drop_fd(&fds[i]);
                                continue;
                        }
                        r->state_fd[slot] = TAKE_FD(fds[i].fd);
                        if (state_read(r->state_fd[slot], &gen, &text, &len) < 0)
                                continue;
                        if (!best || gen > best_gen) {
                                free(best);
                                best = text;
                                best_len = len;
                                best_gen = gen;
                        } else
                                free(text);
                }
        }
        if (best) {
                _cleanup_(freep) char *error = NULL;

                r->state_generation = best_gen;
                k = state_runtime_parse(r->p.state, best, best_len, "runtime state (fd store)", &error);
                if (k < 0)
                        log_error("cannot use the stored runtime state, runtime limits are lost: %s",
                                  error ? error : strerror(-k));
                else
                        (void) state_foreach(r->p.state, apply_runtime_cb, r);
        }

        /* Then the arenas, each with its owner table. */
        for (size_t i = 0; i < nfds; i++) {
                uint64_t id;
                struct service_fd *ofd = NULL, *rfd = NULL;
                char want[SERVICE_FDNAME_MAX + 1], want_root[SERVICE_FDNAME_MAX + 1];

                if (fds[i].fd < 0 || !name_has_prefix(fds[i].name, FDNAME_ARENA, &id))
                        continue;
                max_id = MB_MAX(max_id, id);
                fdname(want, sizeof(want), FDNAME_OWNERS, id);
                fdname(want_root, sizeof(want_root), FDNAME_AROOT, id);
                for (size_t j = 0; j < nfds; j++) {
                        if (fds[j].fd >= 0 && !ofd && strcmp(fds[j].name, want) == 0)
                                ofd = &fds[j];
                        if (fds[j].fd >= 0 && !rfd && strcmp(fds[j].name, want_root) == 0)
                                rfd = &fds[j];
                }
                if (!ofd) {
                        log_error("fd store: %s has no owner table; its pages are lost", fds[i].name);
                        drop_fd(&fds[i]);
                        continue;
                }
                k = restore_arena(r, &fds[i], ofd, rfd, id);
                if (k < 0) {
                        drop_fd(&fds[i]);
                        drop_fd(ofd);
                        if (rfd)
                                drop_fd(rfd);
                }
        }

        for (size_t i = 0; i < nfds; i++) {
                uint64_t id;

                if (fds[i].fd < 0)
                        continue;
                if (strcmp(fds[i].name, FDNAME_LISTEN) == 0 && r->listen_fd < 0) {
                        r->listen_fd = TAKE_FD(fds[i].fd);
                        continue;
                }
                if (name_has_prefix(fds[i].name, FDNAME_OWNERS, &id) ||
                    name_has_prefix(fds[i].name, FDNAME_AROOT, &id))
                        log_error("fd store: %s has no arena; dropping it", fds[i].name);
                else
                        log_warning("fd store: unknown descriptor %s; dropping it", fds[i].name);
                drop_fd(&fds[i]);
        }
        service_fds_free(fds, nfds);
        atomic_store(&r->next_store_id, max_id + 1);

        if (r->nowners > 0) {
                char b[MB_SIZE_FORMAT_MAX];

                log_info("restart: %s of %" PRIu64 " clients restored; they have %u s to reconnect",
                         mb_size_format_pages(b, sizeof(b), r->restored_pages, r->p.page_size, UINT64_MAX),
                         r->restored_clients, r->p.grace_sec);
        }
        (void) ret_error;
        return 0;
}
