/* SPDX-License-Identifier: MIT */
/*
 * wire.h - framing of membroker.proto messages (docs/protocol.md).
 *
 * A frame is a 4-byte big-endian length followed by one packed Mb__Msg.
 * These helpers are pure (no sockets, no libevent) so the daemon, the client
 * library and the fuzzer share them.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "mb_limits.h"
#include "membroker.pb-c.h"

#define WIRE_PROTOCOL_VERSION 1u
#define WIRE_HEADER_BYTES 4u
#define WIRE_MAX_FRAME_BYTES MB_FRAME_MAX_BYTES /* payload cap, checked before allocating */
#define WIRE_MAX_FDS 4
/* Charge.flags: __GFP_NORETRY (one drain and one reclaim round at a max,
 * then ENOMEM without `oom` nor OOM kill). */
#define WIRE_CHARGE_FLAG_NORETRY 0x1u
/* Charge.flags: pages of the client's own mappings, charged without arena
 * pages (membroker.proto). */
#define WIRE_CHARGE_FLAG_OUTSIDE 0x2u
#define WIRE_CHARGE_FLAGS_KNOWN (WIRE_CHARGE_FLAG_NORETRY | WIRE_CHARGE_FLAG_OUTSIDE)

/**
 * wire_frame_length - read the payload length of the frame starting at @buf
 * (@len bytes available).  Returns -EAGAIN when fewer than 4 bytes are
 * there, -EMSGSIZE when the announced length exceeds WIRE_MAX_FRAME_BYTES,
 * -EBADMSG when it is 0; else 0 and *@ret_payload.
 */
int wire_frame_length(const uint8_t *buf, size_t len, uint32_t *ret_payload);

/**
 * wire_frame_parse - parse one frame from @buf.  Returns -EAGAIN when the
 * frame is incomplete, -EMSGSIZE over the cap, -EBADMSG when the payload is
 * not a valid Mb__Msg or has no body, -ERANGE when a varint does not fit
 * its 32-bit field (which protobuf-c alone would truncate); else 0,
 * *@ret_consumed bytes used and *@ret_msg (free with
 * mb__msg__free_unpacked(msg, NULL)).
 */
int wire_frame_parse(const uint8_t *buf, size_t len, size_t *ret_consumed, Mb__Msg **ret_msg);

/**
 * wire_frame_pack - pack @msg with its header into a malloc'ed buffer.
 * -EMSGSIZE when the packed message would exceed the cap, -ENOMEM.
 */
int wire_frame_pack(const Mb__Msg *msg, uint8_t **ret_buf, size_t *ret_len);

/* Human-readable name of the body case ("hello", "charge", ...). */
const char *wire_msg_name(const Mb__Msg *msg);
