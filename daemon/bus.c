/* SPDX-License-Identifier: MIT */
/* Placeholder until the D-Bus work lands: the daemon runs without a bus. */
#include <errno.h>
#include "bus.h"

int bus_setup(struct manager *m) { (void) m; return -EOPNOTSUPP; }
void bus_free(struct manager *m) { (void) m; }
void bus_emit_memory_event(struct manager *m, const char *p, enum mb_event e, uint64_t c) { (void) m; (void) p; (void) e; (void) c; }
void bus_emit_limits_changed(struct manager *m, struct tenant *t) { (void) m; (void) t; }
void bus_emit_tenant_added(struct manager *m, struct tenant *t) { (void) m; (void) t; }
void bus_emit_tenant_removed(struct manager *m, const char *p) { (void) m; (void) p; }
