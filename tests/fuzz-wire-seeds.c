/* SPDX-License-Identifier: MIT */
/*
 * fuzz-wire-seeds DIR - write a seed corpus for fuzz-wire: one valid frame
 * of every message type the protocol has, plus one file holding a whole
 * session's worth of frames back to back, so that the fuzzer starts from
 * real frames instead of having to discover the framing and the protobuf
 * encoding by itself.  Built with --enable-fuzz only.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

static FILE *session;

static int emit(const char *dir, const char *name, Mb__Msg *msg) {
        uint8_t *buf = NULL;
        size_t len = 0;
        char path[4096];
        FILE *f;
        int r;

        r = wire_frame_pack(msg, &buf, &len);
        if (r < 0) {
                fprintf(stderr, "fuzz-wire-seeds: packing %s: %s\n", name, strerror(-r));
                return -1;
        }
        snprintf(path, sizeof path, "%s/%s", dir, name);
        f = fopen(path, "w");
        if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
                fprintf(stderr, "fuzz-wire-seeds: writing %s: %m\n", path);
                free(buf);
                return -1;
        }
        if (fwrite(buf, 1, len, session) != len) {
                free(buf);
                return -1;
        }
        free(buf);
        return 0;
}

int main(int argc, char **argv) {
        Mb__Extent e1 = MB__EXTENT__INIT, e2 = MB__EXTENT__INIT;
        Mb__Extent *two[] = { &e1, &e2 };
        Mb__Hello hello = MB__HELLO__INIT;
        Mb__Welcome welcome = MB__WELCOME__INIT;
        Mb__Charge charge = MB__CHARGE__INIT;
        Mb__Grant grant = MB__GRANT__INIT;
        Mb__Uncharge uncharge = MB__UNCHARGE__INIT;
        Mb__Ack ack = MB__ACK__INIT;
        Mb__Error error = MB__ERROR__INIT;
        Mb__Reclaim reclaim = MB__RECLAIM__INIT;
        Mb__Drain drain = MB__DRAIN__INIT;
        Mb__Event event = MB__EVENT__INIT;
        Mb__Claim claim = MB__CLAIM__INIT;
        Mb__PressureTrigger ptrig = MB__PRESSURE_TRIGGER__INIT;
        Mb__PressureEvent pev = MB__PRESSURE_EVENT__INIT;
        Mb__Msg m[13];
        char path[4096];
        int r = 0;

        if (argc != 2) {
                fprintf(stderr, "usage: fuzz-wire-seeds DIR\n");
                return 2;
        }
        snprintf(path, sizeof path, "%s/session", argv[1]);
        session = fopen(path, "w");
        if (!session) {
                fprintf(stderr, "fuzz-wire-seeds: %s: %m\n", path);
                return 1;
        }
        for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
                mb__msg__init(&m[i]);

        e1.start = 0, e1.count = 64;
        e2.start = 4096, e2.count = 1;

        hello.version = WIRE_PROTOCOL_VERSION, hello.tenant = (char *) "web/cache";
        hello.client_name = (char *) "seed", hello.n_held = 2, hello.held = two;
        hello.has_client_token = true, hello.client_token = 42;
        hello.has_held_more = true, hello.held_more = true;
        m[0].body_case = MB__MSG__BODY_HELLO, m[0].hello = &hello;

        welcome.version = WIRE_PROTOCOL_VERSION, welcome.tenant = (char *) "web/cache";
        welcome.page_size = 4096, welcome.charge_batch = 64, welcome.arena_pages = 65536;
        welcome.stats_slots = 2, welcome.client_id = 7;
        welcome.has_client_token = true, welcome.client_token = 42;
        welcome.has_pressure_triggers = true, welcome.pressure_triggers = true;
        m[1].body_case = MB__MSG__BODY_WELCOME, m[1].welcome = &welcome;

        charge.seq = 1, charge.pages = 64, charge.has_need = true, charge.need = 1;
        charge.has_waiting = true, charge.waiting = true;
        m[2].body_case = MB__MSG__BODY_CHARGE, m[2].charge = &charge;

        grant.seq = 1, grant.n_extents = 2, grant.extents = two;
        grant.has_throttle_usec = true, grant.throttle_usec = 6000;
        m[3].body_case = MB__MSG__BODY_GRANT, m[3].grant = &grant;

        uncharge.seq = 2, uncharge.n_extents = 1, uncharge.extents = two;
        uncharge.has_reason = true, uncharge.reason = MB__UNCHARGE_REASON__UNCHARGE_RECLAIM;
        uncharge.has_reply_to = true, uncharge.reply_to = 9;
        uncharge.has_nothing_left = true, uncharge.nothing_left = true;
        m[4].body_case = MB__MSG__BODY_UNCHARGE, m[4].uncharge = &uncharge;

        ack.seq = 2, ack.pages = 64;
        m[5].body_case = MB__MSG__BODY_ACK, m[5].ack = &ack;

        error.has_seq = true, error.seq = 3, error.code = ENOMEM;
        error.reason = (char *) "tenant web/cache is at its memory.max";
        m[6].body_case = MB__MSG__BODY_ERROR, m[6].error = &error;

        reclaim.seq = 9, reclaim.pages = 32;
        m[7].body_case = MB__MSG__BODY_RECLAIM, m[7].reclaim = &reclaim;

        drain.seq = 10;
        m[8].body_case = MB__MSG__BODY_DRAIN, m[8].drain = &drain;

        event.event = (char *) "high", event.count = 3, event.tenant = (char *) "web";
        m[9].body_case = MB__MSG__BODY_EVENT, m[9].event = &event;

        claim.seq = 4, claim.n_extents = 2, claim.extents = two;
        claim.has_more = true, claim.more = false;
        m[10].body_case = MB__MSG__BODY_CLAIM, m[10].claim = &claim;

        ptrig.seq = 5, ptrig.id = 1, ptrig.trigger = (char *) "some 150000 1000000";
        m[11].body_case = MB__MSG__BODY_PRESSURE_TRIGGER, m[11].pressure_trigger = &ptrig;

        pev.id = 1;
        m[12].body_case = MB__MSG__BODY_PRESSURE_EVENT, m[12].pressure_event = &pev;

        for (size_t i = 0; i < sizeof m / sizeof m[0] && r == 0; i++) {
                char name[32];

                snprintf(name, sizeof name, "%s", wire_msg_name(&m[i]));
                r = emit(argv[1], name, &m[i]);
        }
        if (fclose(session) != 0)
                r = -1;
        return r == 0 ? 0 : 1;
}
