/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
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

/* Nested messages deeper than this are refused (ours nest two deep). */
#define WIRE_MAX_NESTING 8

/*
 * protobuf-c keeps a field it does not know as an unknown field, even one
 * numbered 0, which the protobuf encoding forbids: such a message packs
 * into bytes it will not parse again.  Refuse it here, in every nested
 * message, so that what the daemon accepts is what it could send back.
 */
static bool wire_msg_tags_valid(const ProtobufCMessage *m, unsigned depth) {
        const ProtobufCMessageDescriptor *d = m->descriptor;

        if (depth > WIRE_MAX_NESTING)
                return false;
        for (unsigned i = 0; i < m->n_unknown_fields; i++)
                if (m->unknown_fields[i].tag == 0)
                        return false;
        for (unsigned i = 0; i < d->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &d->fields[i];
                const char *base = (const char *) m;

                if (f->type != PROTOBUF_C_TYPE_MESSAGE)
                        continue;
                if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                        size_t n = *(const size_t *) (base + f->quantifier_offset);
                        ProtobufCMessage *const *v = *(ProtobufCMessage *const *const *) (base + f->offset);

                        for (size_t k = 0; k < n; k++)
                                if (!wire_msg_tags_valid(v[k], depth + 1))
                                        return false;
                        continue;
                }
                if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                    *(const uint32_t *) (base + f->quantifier_offset) != f->id)
                        continue;
                {
                        const ProtobufCMessage *sub = *(ProtobufCMessage *const *) (base + f->offset);

                        if (sub && !wire_msg_tags_valid(sub, depth + 1))
                                return false;
                }
        }
        return true;
}

static bool varint_read(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
        uint64_t v = 0;

        for (unsigned shift = 0; shift < 70 && *p < end; shift += 7) {
                uint8_t b = *(*p)++;

                v |= (uint64_t) (b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return true;
                }
        }
        return false;
}

/* Whether the varint @v fits the 32-bit field type @type: unsigned and
 * zigzag ones in 32 bits, signed ones (int32, enum) as a 32-bit value
 * sign-extended to 64, which is how they are encoded. */
static bool varint_fits(ProtobufCType type, uint64_t v) {
        switch (type) {
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_SINT32:
                return v <= UINT32_MAX;
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_ENUM:
                return v <= INT32_MAX || v >= (uint64_t) INT32_MIN;
        default:
                return true;
        }
}

/*
 * protobuf-c keeps the low 32 bits of a varint that is too large for a
 * 32-bit field (an Extent.count of 2^63 decodes as 0, one of 2^32 + 1 as
 * 1): walk the encoding of a message of descriptor @d that decoded, and
 * refuse (-ERANGE) a varint that does not fit its field, in every nested
 * message and packed list.  Unknown fields are skipped.
 */
static int wire_varints_fit(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, unsigned depth) {
        const uint8_t *end = p + len;

        if (depth > WIRE_MAX_NESTING)
                return -EBADMSG;
        while (p < end) {
                const ProtobufCFieldDescriptor *f;
                uint64_t tag, v;

                if (!varint_read(&p, end, &tag) || tag >> 3 > UINT32_MAX)
                        return -EBADMSG;
                f = protobuf_c_message_descriptor_get_field(d, (unsigned) (tag >> 3));
                switch (tag & 7) {
                case 0: /* varint */
                        if (!varint_read(&p, end, &v))
                                return -EBADMSG;
                        if (f && !varint_fits(f->type, v))
                                return -ERANGE;
                        break;
                case 1: /* 64 bits */
                        if (end - p < 8)
                                return -EBADMSG;
                        p += 8;
                        break;
                case 5: /* 32 bits */
                        if (end - p < 4)
                                return -EBADMSG;
                        p += 4;
                        break;
                case 2: { /* length-delimited */
                        const uint8_t *sub;
                        int r = 0;

                        if (!varint_read(&p, end, &v) || v > (uint64_t) (end - p))
                                return -EBADMSG;
                        sub = p;
                        p += v;
                        if (!f)
                                break;
                        if (f->type == PROTOBUF_C_TYPE_MESSAGE)
                                r = wire_varints_fit(f->descriptor, sub, (size_t) v, depth + 1);
                        else if (f->label == PROTOBUF_C_LABEL_REPEATED)
                                /* A packed list of varints. */
                                for (const uint8_t *q = sub; q < p && r == 0;) {
                                        uint64_t e;

                                        if (!varint_read(&q, p, &e))
                                                r = -EBADMSG;
                                        else if (!varint_fits(f->type, e))
                                                r = -ERANGE;
                                }
                        if (r < 0)
                                return r;
                        break;
                }
                default: /* groups: protobuf-c refuses them already */
                        return -EBADMSG;
                }
        }
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
        if (msg->body_case == MB__MSG__BODY__NOT_SET || !wire_msg_tags_valid(&msg->base, 0)) {
                mb__msg__free_unpacked(msg, NULL);
                return -EBADMSG;
        }
        r = wire_varints_fit(&mb__msg__descriptor, buf + WIRE_HEADER_BYTES, payload, 0);
        if (r < 0) {
                mb__msg__free_unpacked(msg, NULL);
                return r;
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
        case MB__MSG__BODY_PRESSURE_TRIGGER: return "pressure_trigger";
        case MB__MSG__BODY_PRESSURE_EVENT: return "pressure_event";
        default: return "unknown";
        }
}
