/* SPDX-License-Identifier: MIT */
/*
 * fuzz-wire - libFuzzer target for the frame decoder (proto/wire.c) as the
 * daemon uses it: frames are parsed one after another from a byte stream
 * until one is incomplete or bad; every decoded message is re-packed,
 * parsed again, and must come back byte for byte.
 *
 * Built only with ./configure --enable-fuzz CC=clang; run for example:
 *   ./tests/fuzz-wire -max_total_time=60 -max_len=70000
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(const Mb__Msg *msg) {
        uint8_t *buf = NULL, *buf2 = NULL;
        size_t len = 0, len2 = 0, consumed = 0;
        Mb__Msg *again = NULL;

        (void) wire_msg_name(msg);
        if (wire_frame_pack(msg, &buf, &len) < 0)
                return; /* re-packing may exceed the cap (unknown fields are dropped, but varints may grow) */
        assert(len >= WIRE_HEADER_BYTES);
        assert(wire_frame_parse(buf, len, &consumed, &again) == 0);
        assert(consumed == len);
        assert(again->body_case == msg->body_case);
        assert(wire_frame_pack(again, &buf2, &len2) == 0);
        assert(len2 == len && memcmp(buf, buf2, len) == 0);
        mb__msg__free_unpacked(again, NULL);
        free(buf);
        free(buf2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        size_t off = 0;

        while (off < size) {
                size_t consumed = 0;
                uint32_t payload = 0;
                Mb__Msg *msg = NULL;
                int r;

                r = wire_frame_length(data + off, size - off, &payload);
                if (r == 0)
                        assert(payload > 0 && payload <= WIRE_MAX_FRAME_BYTES);
                r = wire_frame_parse(data + off, size - off, &consumed, &msg);
                if (r < 0) {
                        /* -ERANGE: a varint too large for its field (refused, not truncated) */
                        assert(r == -EAGAIN || r == -EMSGSIZE || r == -EBADMSG || r == -ERANGE);
                        break;
                }
                assert(consumed > WIRE_HEADER_BYTES && consumed <= size - off);
                assert(msg && msg->body_case != MB__MSG__BODY__NOT_SET);
                roundtrip(msg);
                mb__msg__free_unpacked(msg, NULL);
                off += consumed;
        }
        return 0;
}
