/* SPDX-License-Identifier: MIT */
/*
 * mb_limits.h - the protocol's limits, one home for the daemon, the client
 * library and the tools: how large a frame may be, how many pages a Charge
 * and how many extents a Grant or an Uncharge may carry, and the two byte
 * values of a limit that are not sizes.  Plain constants, no dependencies,
 * so that every part includes it (the wire helpers in proto/wire.h name the
 * frame cap WIRE_MAX_FRAME_BYTES after the value here).
 */
#pragma once

#include <stdint.h>

/* Payload bytes of one frame after its 4-byte length: checked against the
 * announced length before anything is allocated. */
#define MB_FRAME_MAX_BYTES (64u * 1024u)

/* Pages one Charge may ask for (Charge.pages within 1..this).  A charge
 * batch larger than one Charge could never be asked for, so this is also
 * the largest ChargeBatch= of the broker or a tenant and the largest batch a
 * Welcome or a Grant announces. */
#define MB_CHARGE_MAX_PAGES 16384u

/* Pages of one contiguous Charge (Charge.contig_pages within 1..this): the
 * largest run the daemon hands out as one extent (1 GiB of 4 KiB pages),
 * what a malloc() larger than a page asks for (mb_malloc()). */
#define MB_CONTIG_MAX_PAGES 262144u

/* Pages of one Charge of the client's own mappings (Charge.flags OUTSIDE):
 * no extents travel, so the cap is only that of the counters (4 TiB of
 * 4 KiB pages); a larger mapping is charged in several Charges. */
#define MB_OUTSIDE_MAX_PAGES (1u << 30)

/* Extents in one Grant or one Uncharge.  An extent packs to at most
 * MB_EXTENT_MAX_PACKED_BYTES, so this many always fit in a frame with room
 * for the message around them. */
#define MB_FRAME_MAX_EXTENTS 2048u
#define MB_EXTENT_MAX_PACKED_BYTES 19u
_Static_assert(MB_FRAME_MAX_EXTENTS * MB_EXTENT_MAX_PACKED_BYTES + 1024u <= MB_FRAME_MAX_BYTES,
               "a frame full of extents exceeds the frame cap");

/* Byte limits (MemoryMax= and the others) in the configuration and on the
 * bus: UINT64_MAX is "max" (spelt "infinity" or "max", never as a number),
 * like the kernel's PAGE_COUNTER_MAX shown as "max" in memory.max. */
#define MB_LIMIT_MAX UINT64_MAX
/* UINT64_MAX - 1 marks a field "left unchanged" in a set of limits
 * (SetTenantLimits, the persisted state), so it is not a limit a caller may
 * give. */
#define MB_LIMIT_UNSET (UINT64_MAX - 1)
