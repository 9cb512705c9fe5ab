/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "auth.h"
#include "log.h"
#include "macros.h"
#include "session.h"
#include "tenant_state.h"

void session_client_name(char *dst, size_t size, const char *src) {
        size_t i = 0;

        for (; src && *src && i + 1 < size; src++)
                dst[i++] = (*src >= 0x20 && *src < 0x7f) ? *src : '?';
        dst[i] = 0;
        if (i == 0)
                snprintf(dst, size, "unnamed");
}

struct auto_match {
        const char *cgroup;
        struct tenant *best;
        size_t best_len;
};

static int auto_match_cb(struct tenant *t, void *userdata) {
        struct auto_match *am = userdata;
        size_t n;

        if (!t->cgroup || !auth_cgroup_has_prefix(am->cgroup, t->cgroup))
                return 0;
        n = strlen(t->cgroup);
        while (n > 1 && t->cgroup[n - 1] == '/')
                n--;
        if (!am->best || n > am->best_len) {
                am->best = t;
                am->best_len = n;
        }
        return 0;
}

struct tenant *session_auto_tenant(struct tenant *root, const char *cgroup) {
        struct auto_match am = { .cgroup = cgroup };

        (void) tenant_walk(root, auto_match_cb, &am);
        return am.best;
}

int session_stats_region_new(unsigned nslots, int *ret_fd, struct mb_stats_region **ret_map, size_t *ret_bytes) {
        _cleanup_(closep) int fd = -1;
        struct mb_stats_region hdr = {
                .magic = MB_STATS_MAGIC,
                .version = MB_STATS_VERSION,
                .nslots = nslots,
                .nitems = _MB_STAT_NR,
        };
        size_t bytes = (size_t) mb_stats_region_bytes(nslots);
        void *p;

        fd = memfd_create("membroker-stats", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t) bytes) < 0)
                return -errno;
        if (pwrite(fd, &hdr, sizeof(hdr), 0) != (ssize_t) sizeof(hdr))
                return -EIO;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
                return -errno;
        /* The daemon only reads the client's slots; it writes the header's
         * dirty word only (rstat_poll_source() clears it). */
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        *ret_map = p;
        *ret_bytes = bytes;
        return 0;
}

void session_note_uid(struct tenant_state *ts, uid_t uid) {
        uid_t first;
        bool log;

        pthread_mutex_lock(&ts->lock);
        if (!ts->has_first_uid) {
                ts->first_uid = uid;
                ts->has_first_uid = true;
        }
        first = ts->first_uid;
        log = first != uid && !ts->multi_uid_logged;
        if (log)
                ts->multi_uid_logged = true;
        pthread_mutex_unlock(&ts->lock);
        if (log)
                log_notice("tenant %s has clients of uid %u and uid %u: its clients share one arena and can read and "
                           "overwrite each other's pages, so it is one trust domain; put users who do not trust each "
                           "other in different tenants",
                           ts->tenant->path, (unsigned) first, (unsigned) uid);
}
