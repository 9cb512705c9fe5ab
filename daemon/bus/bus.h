/* SPDX-License-Identifier: MIT */
/*
 * bus.h - the org.membroker1 D-Bus API of membrokerd (docs/design.md).
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

/**
 * bus_setup - connect to the bus chosen by m->bus_kind / m->bus_address,
 * register the objects, request org.membroker1, hook the bus fd and timeout
 * into m->base, and register the bus as the manager's observer
 * (manager_set_observer()): from then on the manager's reports become
 * signals (MemoryEvent, PropertiesChanged, InterfacesAdded/Removed), and
 * manager_free() closes the connection (flushing queued messages) through
 * the observer's stop().  Call once, on the main thread, after
 * manager_start().  Returns 0 (also for MANAGER_BUS_NONE, doing nothing), or
 * a negative errno with a logged reason (-EEXIST: the name is taken); on
 * error nothing stays registered.
 */
int bus_setup(struct manager *m);
