/* SPDX-License-Identifier: MIT */
/*
 * bus.h - the org.membroker1 D-Bus API of membrokerd (design.md §6).
 * sd-bus, driven from the manager's libevent main loop.
 *
 * Objects: /org/membroker1 (org.membroker1.Manager, and the
 * org.freedesktop.DBus.ObjectManager of all tenants) and one
 * /org/membroker1/tenant/<sd_bus_path_encode(path)> per tenant
 * (org.membroker1.Tenant); the root tenant "/" is /org/membroker1/tenant/_2f.
 */
#pragma once

#include <stdint.h>
#include "manager.h"

/* Connect to the bus chosen by m->bus_kind / m->bus_address, register the
 * objects, request org.membroker1 and hook the bus fd and timeout into
 * m->base.  Returns 0 (also for MANAGER_BUS_NONE, doing nothing), or a
 * negative errno with a logged reason (-EEXIST: the name is taken). */
int bus_setup(struct manager *m);
/* Close the connection (flushing queued messages) and unhook it from the
 * loop.  Safe without a bus and twice. */
void bus_free(struct manager *m);

/* Signals; main thread only.  No-ops without a bus. */

/* MemoryEvent(event, count) on the tenant's object. */
void bus_emit_memory_event(struct manager *m, const char *tenant_path, enum mb_event event, uint64_t count);
/* PropertiesChanged for MemoryMax/High/Low/Min and ChargeBatch of @t. */
void bus_emit_limits_changed(struct manager *m, struct tenant *t);
/* PropertiesChanged(ChargeBatch) for the descendants of @t that inherit
 * their ChargeBatch from it (not for @t itself).  Takes the tree lock for
 * reading. */
void bus_emit_charge_batch_changed(struct manager *m, struct tenant *t);
/* InterfacesAdded / InterfacesRemoved through the object manager. */
void bus_emit_tenant_added(struct manager *m, struct tenant *t);
void bus_emit_tenant_removed(struct manager *m, const char *tenant_path);
