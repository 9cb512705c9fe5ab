/* SPDX-License-Identifier: MIT */
/*
 * pressure.h - host memory pressure (PSI) as a reclaim trigger
 * (PressureReclaim=yes).
 *
 * The kernel's memory controller reclaims a cgroup when the host runs short;
 * the broker's tenants live in memory the kernel sees as the daemon's shared
 * memory, so the broker reacts to host pressure itself: it arms a PSI
 * trigger (Documentation/accounting/psi.rst) on /proc/pressure/memory, or on
 * its own cgroup's memory.pressure when the system-wide file refuses
 * (unprivileged triggers need CAP_SYS_RESOURCE on older kernels; a service
 * may write triggers in its own cgroup), and on every trigger event asks
 * tenants above their effective low to give part of the excess back
 * (reclaim_pressure()).
 *
 * A PSI trigger fd signals with POLLPRI while it is always readable, and
 * libevent watches only for readability; so the trigger fd sits in an epoll
 * set of its own (interest: EPOLLPRI), and libevent watches that epoll fd,
 * which becomes readable exactly when the trigger fires.
 *
 * For tests the source is injectable: when the path names a FIFO, every
 * write to it counts as one pressure event (the daemon holds the FIFO open
 * for reading and writing, so writers may come and go).
 */
#pragma once

struct event_base;
struct pressure;

/* Called on @base's thread for each pressure event. */
typedef void (*pressure_cb_t)(void *userdata);

/* The trigger written when none is given: 150 ms of "some" stall within
 * any 2 s window (a process without CAP_SYS_RESOURCE may only use windows
 * that are multiples of 2 s). */
#define PRESSURE_DEFAULT_TRIGGER "some 150000 2000000"
#define PRESSURE_DEFAULT_PATH "/proc/pressure/memory"

/**
 * pressure_new - watch @path (NULL: PRESSURE_DEFAULT_PATH, falling back to
 * the daemon's cgroup's memory.pressure) with @trigger (NULL: the default),
 * or a FIFO at @path, from @base's loop; each event calls @cb(@userdata)
 * there (@cb is required).  Returns 0, or a negative errno with the reason
 * logged (-EOPNOTSUPP: the kernel has no PSI; -EPERM/-EACCES: the kernel
 * refuses the trigger; -EINVAL: a bad trigger or no @cb).
 */
int pressure_new(struct event_base *base, const char *path, const char *trigger, pressure_cb_t cb, void *userdata,
                 struct pressure **ret);
/* Stop watching and close; NULL is a no-op.  @base's thread. */
void pressure_free(struct pressure *p);

/* The file being watched. */
const char *pressure_path(const struct pressure *p);
/* The trigger armed on it, or NULL for a FIFO (every write is one event). */
const char *pressure_trigger(const struct pressure *p);
