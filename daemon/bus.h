/* SPDX-License-Identifier: MIT */
/*
 * bus.h - the org.membroker1 D-Bus API of membrokerd (design.md §6).
 * sd-bus, driven from the manager's libevent main loop.
 */
#pragma once

#include <stdint.h>
#include "manager.h"

/* Connect to the bus chosen by m->bus_kind / m->bus_address, register the
 * objects, request org.membroker1 and hook the bus fd and timeout into
 * m->base.  Negative errno with a logged reason on failure. */
int bus_setup(struct manager *m);
void bus_free(struct manager *m);

/* Signals; main thread only.  No-ops without a bus. */
void bus_emit_memory_event(struct manager *m, const char *tenant_path, enum mb_event event, uint64_t count);
void bus_emit_limits_changed(struct manager *m, struct tenant *t);
void bus_emit_tenant_added(struct manager *m, struct tenant *t);
void bus_emit_tenant_removed(struct manager *m, const char *tenant_path);
