/* SPDX-License-Identifier: MIT */
/*
 * manager-service.h - the manager's side of running as a system service
 * (docs/service.md; "Restart" in docs/design.md): the layers of limits (state.h) applied to the tree,
 * the fd-store restart (restart.h) at start-up, READY=1/STATUS=/watchdog
 * (service.h).  Main thread.
 */
#pragma once

#include <stdbool.h>

#include "manager.h"

/**
 * manager_service_setup - at start-up, once the tree is built from the
 * files and before listening: read the persisted limits
 * (STATE_DIR/limits.conf), take back what the fd store kept (runtime state,
 * tenants made at run time, arenas with their page owners), and apply the
 * layers to the tree.  A bad limits.conf fails with "file:line: reason" in
 * *@ret_error; one that is not a regular file (a link, a FIFO, a device)
 * or too large is refused with an error line naming it, and the daemon
 * starts without persisted limits.
 */
int manager_service_setup(struct manager *m, char **ret_error);

/* Apply the persisted and runtime layers to every tenant they name (after
 * the files were applied).  Main thread, tree lock not held. */
void manager_apply_layers(struct manager *m);

/* After manager_start(): start the watchdog, send READY=1 with STATUS=, and
 * start the grace period of restored pages.  0 or a negative errno. */
int manager_service_ready(struct manager *m);

/* Send STATUS= when the number of tenants or clients changed. */
void manager_update_status(struct manager *m);

/* Around a reload: RELOADING=1, then READY=1 with STATUS=. */
void manager_notify_reloading(struct manager *m);
void manager_notify_reloaded(struct manager *m, bool ok);

/**
 * manager_tenant_revert_limits - RevertTenantLimits: drop the fields that
 * @fields marks (any value but MB_LIMIT_UNSET) from the runtime layer of
 * @t, and with !@runtime_only from the persisted layer too, then apply what
 * the files (or, for a tenant made at run time, the defaults) and the
 * remaining layers say.  Main thread, tree lock not held.  Returns 1 when
 * something was reverted, 0 when no layer set those fields, -EROFS without
 * a state directory, or the error writing the persisted layer (then nothing
 * changed).
 */
int manager_tenant_revert_limits(struct manager *m, struct tenant *t, const struct mb_limits *fields,
                                 bool runtime_only);
