/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int wire_frame_length(const uint8_t *buf, size_t len, uint32_t *ret_payload) {
        uint32_t be;

        if (len < WIRE_HEADER_BYTES)
                return -EAGAIN;
        memcpy(&be, buf, sizeof(be));
        be = ntohl(be);
        if (be == 0)
                return -EBADMSG;
        if (be > WIRE_MAX_FRAME_BYTES)
                return -EMSGSIZE;
        *ret_payload = be;
        return 0;
}

int wire_frame_parse(const uint8_t *buf, size_t len, size_t *ret_consumed, Mb__Msg **ret_msg) {
        uint32_t payload;
        Mb__Msg *msg;
        int r;

        r = wire_frame_length(buf, len, &payload);
        if (r < 0)
                return r;
        if (len - WIRE_HEADER_BYTES < payload)
                return -EAGAIN;

        msg = mb__msg__unpack(NULL, payload, buf + WIRE_HEADER_BYTES);
        if (!msg)
                return -EBADMSG;
        if (msg->body_case == MB__MSG__BODY__NOT_SET) {
                mb__msg__free_unpacked(msg, NULL);
                return -EBADMSG;
        }
        *ret_consumed = WIRE_HEADER_BYTES + payload;
        *ret_msg = msg;
        return 0;
}

int wire_frame_pack(const Mb__Msg *msg, uint8_t **ret_buf, size_t *ret_len) {
        size_t n = mb__msg__get_packed_size(msg);
        uint32_t be;
        uint8_t *buf;

        if (n == 0 || n > WIRE_MAX_FRAME_BYTES)
                return -EMSGSIZE;
        buf = malloc(WIRE_HEADER_BYTES + n);
        if (!buf)
                return -ENOMEM;
        be = htonl((uint32_t) n);
        memcpy(buf, &be, sizeof(be));
        mb__msg__pack(msg, buf + WIRE_HEADER_BYTES);
        *ret_buf = buf;
        *ret_len = WIRE_HEADER_BYTES + n;
        return 0;
}

const char *wire_msg_name(const Mb__Msg *msg) {
        switch (msg->body_case) {
        case MB__MSG__BODY_HELLO: return "hello";
        case MB__MSG__BODY_WELCOME: return "welcome";
        case MB__MSG__BODY_CHARGE: return "charge";
        case MB__MSG__BODY_GRANT: return "grant";
        case MB__MSG__BODY_UNCHARGE: return "uncharge";
        case MB__MSG__BODY_ACK: return "ack";
        case MB__MSG__BODY_ERROR: return "error";
        case MB__MSG__BODY_RECLAIM: return "reclaim";
        case MB__MSG__BODY_DRAIN: return "drain";
        case MB__MSG__BODY_EVENT: return "event";
        case MB__MSG__BODY_CLAIM: return "claim";
        default: return "unknown";
        }
}
