/* SPDX-License-Identifier: MIT */
/*
 * state.h - tenant limits changed over D-Bus, layered over the
 * configuration files the way systemd layers drop-ins (docs/design.md):
 *
 *   /etc/membroker (membroker.conf, tenants.d/)        lowest
 *   persisted: SetTenantLimits(..., runtime=false),
 *              kept in STATE_DIR/limits.conf             (survives restarts)
 *   runtime:   SetTenantLimits(..., runtime=true) and
 *              tenants made with CreateTenant            highest
 *
 * A field set in a higher layer hides the same field of the lower ones; a
 * field a layer leaves unset falls through.  Setting a field persistently
 * drops the runtime value of that field, so that what was just set is what
 * applies.  The runtime layer lives in memory only; the restart module hands
 * it to the fd store together with the arenas, so it survives a restart that
 * keeps the memory (the fd store) but not a stop of the service, like
 * systemd's /run.
 *
 * Both layers are written in the same text format (STATE_DIR/limits.conf
 * for the persisted layer):
 *
 *   [Tenant]
 *   Path=db/cache
 *   MemoryMax=1073741824      # bytes, or "max"
 *   MemoryHigh=max
 *   MemoryLow=0
 *   MemoryMin=0
 *   ChargeBatch=32            # pages, 0 = inherit
 *   MemoryPressureTarget=some avg10 0.1%   # or "no"
 *   Created=yes               # runtime layer only: made with CreateTenant
 *
 * Pure: no libevent, no sd-bus; the caller serialises (main thread).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mb_limits.h" /* MB_LIMIT_UNSET */

#define STATE_LIMITS_FILE "limits.conf"
/* A larger state file is not one membrokerd wrote: refused. */
#define STATE_FILE_MAX_BYTES (16u << 20)

/* Limits as the bus and the configuration express them (bytes, UINT64_MAX =
 * "max"); a field left at MB_LIMIT_UNSET is not changed. */
struct mb_limits {
        uint64_t max, high, low, min;
        uint64_t charge_batch; /* pages; MB_LIMIT_UNSET = unchanged */
        uint64_t pressure_target; /* MemoryPressureTarget=, rightsize_target_pack(); MB_LIMIT_UNSET = unchanged */
};

struct state;

struct state_entry {
        char *path;                 /* normalised tenant path */
        struct mb_limits persisted; /* MB_LIMIT_UNSET: not set in this layer */
        struct mb_limits runtime;
        bool created;               /* made at run time (CreateTenant) */
        struct state_entry *next;   /* hash chain */
};

/* An empty state for @dir (the state directory; may be NULL for no
 * persistence, then persistent changes fail with -EROFS).  -ENOMEM. */
int state_new(const char *dir, struct state **ret);
void state_free(struct state *s);

/**
 * state_load_persisted - (re)read STATE_DIR/limits.conf into the persisted
 * layer (a missing file is an empty layer).  On a bad file nothing changes,
 * *@ret_error (may be NULL) is "file:line: reason" and -EINVAL is returned.
 * An entry that is not a regular file (a symbolic link, a FIFO, a device,
 * a directory, ...) or is larger than STATE_FILE_MAX_BYTES is never read
 * (nor followed, nor waited for): the layer becomes empty, as without the
 * file, *@ret_error names the file and what it is, and 1 is returned.
 */
int state_load_persisted(struct state *s, char **ret_error);

/**
 * state_set_limits - record the fields of @l that are not MB_LIMIT_UNSET for
 * @path (normalised) in the runtime or the persisted layer.  The persisted
 * layer is written to disk at once (atomically: temporary file, fsync,
 * rename); on a write error nothing changes and the error is returned.
 */
int state_set_limits(struct state *s, const char *path, const struct mb_limits *l, bool runtime);

/**
 * state_revert - drop the fields of @path that @fields sets (any value but
 * MB_LIMIT_UNSET marks a field) from the runtime layer, and with
 * !@runtime_only from the persisted layer too (written to disk at once), so
 * that what the lower layers say applies again, as "systemctl revert" drops
 * drop-ins.  Returns 1 when a layer changed, 0 when neither set those
 * fields, or the write error (-EROFS without a state directory); on an
 * error nothing changes.
 */
int state_revert(struct state *s, const char *path, const struct mb_limits *fields, bool runtime_only);

/* Mark @path as made at run time (CreateTenant), or not.  -ENOMEM. */
int state_set_created(struct state *s, const char *path, bool created);

/* Forget everything about @path, in both layers (RemoveTenant); rewrites the
 * file when the persisted layer changed.  0 or the write error. */
int state_forget(struct state *s, const char *path);

/* The entry of @path, NULL when none. */
const struct state_entry *state_get(const struct state *s, const char *path);

/**
 * state_overlay - what the layers say about @path: persisted fields, with
 * the runtime fields over them; the others MB_LIMIT_UNSET.  Returns false
 * (and all fields unset) when neither layer sets anything.
 */
bool state_overlay(const struct state *s, const char *path, struct mb_limits *ret);

/* Call @cb for every entry (any order); stops at and returns the first
 * non-zero return value. */
int state_foreach(const struct state *s, int (*cb)(const struct state_entry *e, void *userdata), void *userdata);

/* True when the runtime layer changed since the last
 * state_runtime_serialize(). */
bool state_runtime_dirty(const struct state *s);

/* The runtime layer (and Created= marks) as text in the format above,
 * malloc'ed, in *@ret (*@ret_len bytes, NUL-terminated).  Clears the dirty
 * mark.  -ENOMEM. */
int state_runtime_serialize(struct state *s, char **ret, size_t *ret_len);

/* Replace the runtime layer with the one in @text (from
 * state_runtime_serialize()).  -EINVAL with *@ret_error ("@what:line:
 * reason") on bad input, then nothing changes. */
int state_runtime_parse(struct state *s, const char *text, size_t len, const char *what, char **ret_error);

/* Layer @top over @l: every field @top sets replaces @l's. */
void state_limits_merge(struct mb_limits *l, const struct mb_limits *top);
