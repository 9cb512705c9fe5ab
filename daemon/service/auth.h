/* SPDX-License-Identifier: MIT */
/*
 * auth.h - who is on the other end of a client socket, and may it attach to
 * a tenant (docs/protocol.md, the admission rules).
 *
 * The peer is identified with SO_PEERCRED (pid, uid, gid) and, where the
 * kernel has it, SO_PEERPIDFD; its supplementary groups come from
 * /proc/PID/status and its cgroup from libcgroup (the memory controller's
 * hierarchy on cgroup v1, the unified hierarchy on v2).  Everything read
 * through the pid is confirmed afterwards by checking that the peer process
 * (its pidfd) is still alive, so a recycled pid cannot lend its cgroup.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tenant.h"

struct auth_peer {
        pid_t pid;
        uid_t uid;
        gid_t gid;
        int pidfd;          /* -1 when the kernel offers none */
        gid_t *groups;      /* supplementary groups, read on demand */
        size_t ngroups;
        bool groups_read;
        char *cgroup;       /* "/a/b", read on demand */
        bool cgroup_read;
};

/* Initialise libcgroup once, before any thread uses auth_*.  Failure is not
 * fatal (the cgroup is then read from /proc/PID/cgroup directly). */
void auth_setup(void);

/* Read SO_PEERCRED and the pidfd (guard_peer_pidfd()) of the connected
 * socket @fd.  -ESRCH when the process that connected has exited already
 * (nothing to free then); another negative errno on failure. */
int auth_peer_from_socket(int fd, struct auth_peer *ret);
void auth_peer_done(struct auth_peer *p);

/* The peer's cgroup path ("/" for the root); cached in @p.  -ESRCH when the
 * peer is gone. */
int auth_peer_cgroup(struct auth_peer *p, const char **ret);

/* True when @cgroup is @prefix or below it (at a '/' boundary). */
bool auth_cgroup_has_prefix(const char *cgroup, const char *prefix);

/* True when the tenant has any of AllowUsers=, AllowGroups=, Cgroup=. */
bool auth_tenant_has_rules(const struct tenant *t);

/**
 * auth_admit - may @p attach to @t?  uid 0 always; otherwise a uid in
 * AllowUsers=, the gid or a supplementary group in AllowGroups=, a cgroup
 * under Cgroup=, or a uid, gid or supplementary group that Delegate= of a
 * strict ancestor names (daemon/core/delegate.h).  Returns 0, or -EACCES with *@ret_reason (malloc'ed) naming
 * why, or another negative errno (-ESRCH: the peer is gone).
 */
int auth_admit(struct auth_peer *p, const struct tenant *t, char **ret_reason);

/* Confirm that the information read through the pid belongs to the peer
 * (the process is still alive).  -ESRCH when it is not. */
int auth_peer_confirm(const struct auth_peer *p);
