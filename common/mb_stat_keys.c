/* SPDX-License-Identifier: MIT */
/*
 * mb_stat_keys.c - the table of memory.stat and memory.events keys (see
 * mb_stat_keys.h).
 */
#include <stddef.h>
#include <string.h>

#include "macros.h"
#include "mb_stat_keys.h"

#define KEY(n, u, i, p, h) { .name = #n, .local_name = #n "_local", .unit = (u), .item = (i), .pages = (p), .help = (h) }

const struct mb_stat_key_info mb_stat_keys[_MB_STAT_KEY_NR] = {
        [MB_STAT_KEY_PAGES] = KEY(pages, MB_STAT_UNIT_BYTES, MB_STAT_PAGES, true,
                                  "Memory of the pages the applications use."),
        [MB_STAT_KEY_STOCK] = KEY(stock, MB_STAT_UNIT_BYTES, MB_STAT_STOCK, true,
                                  "Memory charged ahead into the clients' per-CPU stocks, not yet in use."),
        [MB_STAT_KEY_SLAB] = KEY(slab, MB_STAT_UNIT_BYTES, MB_STAT_KEY_NO_ITEM, false,
                                 "Memory of slab objects, reclaimable and not."),
        [MB_STAT_KEY_SLAB_RECLAIMABLE] = KEY(slab_reclaimable, MB_STAT_UNIT_BYTES, MB_STAT_SLAB_RECLAIMABLE, false,
                                             "Memory of slab objects of reclaimable caches."),
        [MB_STAT_KEY_SLAB_UNRECLAIMABLE] = KEY(slab_unreclaimable, MB_STAT_UNIT_BYTES, MB_STAT_SLAB_UNRECLAIMABLE,
                                               false, "Memory of slab objects of unreclaimable caches."),
        [MB_STAT_KEY_PGALLOC] = KEY(pgalloc, MB_STAT_UNIT_COUNT, MB_STAT_PGALLOC, false,
                                    "Pages the applications allocated."),
        [MB_STAT_KEY_PGFREE] = KEY(pgfree, MB_STAT_UNIT_COUNT, MB_STAT_PGFREE, false,
                                   "Pages the applications freed."),
        [MB_STAT_KEY_CHARGE_REQUESTS] = KEY(charge_requests, MB_STAT_UNIT_COUNT, MB_STAT_CHARGE_REQUESTS, false,
                                            "Charge requests the daemon received."),
        [MB_STAT_KEY_UNCHARGE_REQUESTS] = KEY(uncharge_requests, MB_STAT_UNIT_COUNT, MB_STAT_UNCHARGE_REQUESTS,
                                              false, "Uncharge requests the daemon received."),
        [MB_STAT_KEY_PGSCAN] = KEY(pgscan, MB_STAT_UNIT_COUNT, MB_STAT_PGSCAN, false,
                                   "Pages reclaim asked the clients to give back."),
        [MB_STAT_KEY_PGSTEAL] = KEY(pgsteal, MB_STAT_UNIT_COUNT, MB_STAT_PGSTEAL, false,
                                    "Pages reclaim got back from the clients."),
        [MB_STAT_KEY_THROTTLE_USEC] = KEY(throttle_usec, MB_STAT_UNIT_USEC, MB_STAT_THROTTLE_USEC, false,
                                          "Time charges were delayed over MemoryHigh=."),
        [MB_STAT_KEY_ANON_MMAP] = KEY(anon_mmap, MB_STAT_UNIT_BYTES, MB_STAT_ANON_MMAP, true,
                                      "Memory of the private anonymous mappings the applications made themselves, "
                                      "charged when mapped."),
        [MB_STAT_KEY_UNACCOUNTED] = { .name = "unaccounted", .unit = MB_STAT_UNIT_BYTES, .item = MB_STAT_KEY_NO_ITEM,
                                      .help = "Memory backing the tenant's arena beyond what is charged to it." },
};

#define EVENT(n, h) { .name = #n, .local_name = #n ".local", .help = (h) }

const struct mb_event_key_info mb_event_keys[MB_EVENT_KEY_NR] = {
        [MB_EVENT_KEY_LOW] = EVENT(low, "Times reclaim went below MemoryLow= protection."),
        [MB_EVENT_KEY_HIGH] = EVENT(high, "Times a charge went over MemoryHigh= and was throttled."),
        [MB_EVENT_KEY_MAX] = EVENT(max, "Times a charge met MemoryMax=."),
        [MB_EVENT_KEY_OOM] = EVENT(oom, "Times a charge failed: reclaim could not make room."),
        [MB_EVENT_KEY_OOM_KILL] = EVENT(oom_kill, "Clients disconnected because reclaim could not make room."),
        [MB_EVENT_KEY_OVERRUN] = EVENT(overrun, "Times arena pages no client held were found backed and punched."),
        [MB_EVENT_KEY_OOM_GROUP_KILL] = EVENT(oom_group_kill, "Times OOMGroup=yes killed all clients of a tenant together."),
};

const struct mb_stat_key_info *mb_stat_key_find(const char *name, bool *ret_local) {
        for (size_t i = 0; i < ELEMENTSOF(mb_stat_keys); i++) {
                const struct mb_stat_key_info *k = &mb_stat_keys[i];
                bool local = k->local_name && strcmp(name, k->local_name) == 0;

                if (local || strcmp(name, k->name) == 0) {
                        if (ret_local)
                                *ret_local = local;
                        return k;
                }
        }
        return NULL;
}

const struct mb_stat_key_info *mb_stat_key_of_item(enum mb_stat_item item) {
        for (size_t i = 0; i < ELEMENTSOF(mb_stat_keys); i++)
                if (mb_stat_keys[i].item == (int) item)
                        return &mb_stat_keys[i];
        return NULL;
}
