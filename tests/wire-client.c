/* SPDX-License-Identifier: MIT */
/*
 * wire-client - a test client that speaks raw membroker frames (no
 * libmembroker), so that the daemon's tests control every byte.
 *
 *   wire-client --socket PATH [--name NAME] STEP...
 *
 * Steps (run in order; replies are printed one line each):
 *   hello TENANT            Hello{version 1}; Welcome or Error
 *   hello-version V TENANT  Hello with protocol version V
 *   charge N                Charge{N}; Grant or Error
 *   charge-contig P NEED C  Charge{pages P, need NEED (0: absent), contig_pages C};
 *                           Grant (printed with its extents) or Error
 *   uncharge-all            Uncharge of every page held; Ack or Error
 *   uncharge START COUNT    Uncharge of one extent; Ack or Error
 *   uncharge-twice          Uncharge naming the first held page twice
 *   uncharge-each-charge N  one Uncharge per held page (in page order), then
 *                           a Charge of N, all in one write; reads the Acks
 *                           and the Grant: "pipelined acked=A granted=G"
 *   expect-ok               the last reply was not an Error
 *   expect-error CODE       the last reply was Error{CODE} (ENOMEM, EACCES,
 *                           EINVAL, EPROTO, EMSGSIZE, ENOENT, EISDIR, ...)
 *   expect-close            the daemon closes the connection (EOF/reset)
 *   send-hex HEX            raw bytes
 *   read-reply              the reply to raw bytes: "grant extents=N",
 *                           "ack pages=N" or the Error
 *   send-garbage N          a frame header announcing N bytes + N random bytes
 *   send-header N           only a header announcing N bytes
 *   shutdown-wr             shutdown(SHUT_WR): end of input for the daemon
 *   write-pages BYTE        fill every held page with BYTE (maps the arena)
 *   check-pages BYTE        every held page holds BYTE only
 *   check-arena START COUNT BYTE   pages [START, START+COUNT) hold BYTE only
 *   write-arena START COUNT BYTE   write BYTE into pages [START, START+COUNT),
 *                           held or not (a misbehaving client)
 *   probe-write START COUNT BYTE   like write-arena, page by page, but a
 *                           SIGBUS (the arena's bound) stops the writing:
 *                           "probe-write wrote=N sigbus=0|1 backed=BYTES"
 *   fallocate-arena         fallocate(fd, 0, 0, size) on the arena fd:
 *                           "fallocate ok" or "fallocate error=ENOSPC"
 *   print-backed            "backed=BYTES size=BYTES" (fstat of the arena fd)
 *   print-held              "held=N"
 *   print-inode             "arena_ino=N" (the inode of the received arena)
 *   wait-file PATH          wait until PATH exists
 *   touch FILE              create FILE
 *   sleep MS
 *   hold                    print "ready", then wait for SIGTERM/SIGINT
 *   load THREADS ROUNDS     THREADS threads charging and uncharging random batches
 *                           on this connection, ROUNDS each; ends with pages held
 *   quit                    exit 0 at once (without returning pages)
 *   handoff PIDFILE         fork(): this process exits at once (without
 *                           returning pages) and the child, which inherits
 *                           the socket, writes its pid to PIDFILE, waits
 *                           until its parent is gone and runs the steps that
 *                           follow (a session handed to another process)
 *   trickle N MS            a header announcing N bytes, then one byte of
 *                           them every MS ms until the daemon closes the
 *                           connection ("trickle closed after B bytes")
 *   flood N                 open N more connections to the socket (idle);
 *                           "flood opened=N failed=F"
 *   flood-hello TENANT      send a Hello on every flood connection (the
 *                           replies are not read)
 *   flood-partial           send half a frame on every flood connection
 *   noread N TENANT SEC     N more sessions of TENANT that send Charge and
 *                           empty Uncharge requests for SEC seconds and
 *                           never read, each cut one opened again
 *                           ("noread sessions=S sent=B closed=K": S
 *                           opened in all, K cut by the daemon)
 *   flood-count MAX         "flood open=X closed=Y": how many flood
 *                           connections the daemon has closed, once it
 *                           is done (at most MAX open, or 10 s settled)
 *
 * Exit: 0 when every step succeeded, 1 when an expectation failed, 2 on an
 * unexpected error.  WIRE_CLIENT_NOTHING_LEFT set: every answer to a
 * Reclaim/Drain says Uncharge.nothing_left (it keeps every page it holds).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "wire.h"
#include "wire-client.h"

#define MAX_HELD_PAGES (1u << 22)

int sock = -1;
static int arena_fd = -1, stats_fd = -1;
static uint64_t page_size, arena_pages;
static uint8_t *arena;
static uint32_t next_seq = 1;
static int last_error; /* errno of the last Error reply, 0 after a success */

/* Pages held, as a set of indices (simple array; tests hold few pages). */
static uint64_t *held;
static size_t nheld, held_alloc;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

volatile sig_atomic_t stop;

struct sockaddr_un sa = { .sun_family = AF_UNIX };

_Noreturn void die(const char *what) {
        fprintf(stderr, "wire-client: %s: %s\n", what, strerror(errno));
        exit(2);
}

static const struct {
        const char *name;
        int code;
} codes[] = {
        { "ENOMEM", ENOMEM }, { "EACCES", EACCES }, { "EINVAL", EINVAL }, { "EPROTO", EPROTO },
        { "EMSGSIZE", EMSGSIZE }, { "ENOENT", ENOENT }, { "EISDIR", EISDIR }, { "EBADMSG", EBADMSG },
        { "EOPNOTSUPP", EOPNOTSUPP }, { "EPERM", EPERM }, { "ETIMEDOUT", ETIMEDOUT },
        { "ESRCH", ESRCH }, { "EUSERS", EUSERS }, { "EMFILE", EMFILE }, { "EAGAIN", EAGAIN },
};

static const char *code_name(int code) {
        for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
                if (codes[i].code == code)
                        return codes[i].name;
        return "E?";
}

static int code_parse(const char *s) {
        for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
                if (strcmp(codes[i].name, s) == 0)
                        return codes[i].code;
        return atoi(s);
}

void write_all(const void *buf, size_t n) {
        const uint8_t *p = buf;

        while (n > 0) {
                ssize_t w = send(sock, p, n, MSG_NOSIGNAL);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        die("send");
                }
                p += w;
                n -= (size_t) w;
        }
}

static void send_msg(const Mb__Msg *msg) {
        uint8_t *buf;
        size_t len;

        if (wire_frame_pack(msg, &buf, &len) < 0) {
                errno = EMSGSIZE;
                die("pack");
        }
        write_all(buf, len);
        free(buf);
}

/* Read exactly @n bytes, taking any fds that come along: 0, or -1 at EOF/reset before the first byte. */
static int read_exact(uint8_t *buf, size_t n) {
        size_t got = 0;

        while (got < n) {
                union {
                        char b[CMSG_SPACE(WIRE_MAX_FDS * sizeof(int))];
                        struct cmsghdr align;
                } control;
                struct iovec iov = { .iov_base = buf + got, .iov_len = n - got };
                struct msghdr mh = {
                        .msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = control.b,
                        .msg_controllen = sizeof(control.b),
                };
                ssize_t r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);

                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0 && errno == ECONNRESET && got == 0)
                        return -1;
                if (r < 0)
                        die("recvmsg");
                if (r == 0) {
                        if (got == 0)
                                return -1;
                        errno = EPROTO;
                        die("truncated frame from the daemon");
                }
                for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                                size_t nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                                int fds[WIRE_MAX_FDS];
                                memcpy(fds, CMSG_DATA(cm), nfds * sizeof(int));
                                if (nfds >= 1)
                                        arena_fd = fds[0];
                                if (nfds >= 2)
                                        stats_fd = fds[1];
                        }
                }
                got += (size_t) r;
        }
        return 0;
}

/* Next message, or NULL at EOF. */
static Mb__Msg *recv_msg(void) {
        uint8_t hdr[WIRE_HEADER_BYTES], *buf;
        uint32_t payload;
        size_t consumed;
        Mb__Msg *msg;

        if (read_exact(hdr, sizeof(hdr)) < 0)
                return NULL;
        if (wire_frame_length(hdr, sizeof(hdr), &payload) < 0) {
                errno = EPROTO;
                die("bad frame header from the daemon");
        }
        buf = malloc(WIRE_HEADER_BYTES + payload);
        if (!buf)
                die("malloc");
        memcpy(buf, hdr, sizeof(hdr));
        if (read_exact(buf + WIRE_HEADER_BYTES, payload) < 0) {
                errno = EPROTO;
                die("truncated frame from the daemon");
        }
        if (wire_frame_parse(buf, WIRE_HEADER_BYTES + payload, &consumed, &msg) < 0) {
                errno = EPROTO;
                die("undecodable frame from the daemon");
        }
        free(buf);
        return msg;
}

static bool handle_error(const Mb__Msg *msg) {
        if (msg->body_case != MB__MSG__BODY_ERROR)
                return false;
        last_error = msg->error->code;
        printf("error code=%s reason=%s\n", code_name(msg->error->code), msg->error->reason);
        return true;
}

/* Answer a daemon-initiated Reclaim/Drain with an Uncharge of nothing (a
 * raw client has no stock and no cache); its Ack is skipped when it comes.
 * The answers take their seqs from a range of their own. */
#define ANSWER_SEQ_BASE 0x80000000u
static uint32_t next_answer_seq = ANSWER_SEQ_BASE;

static void answer_request(const Mb__Msg *req) {
        Mb__Msg msg = MB__MSG__INIT;
        Mb__Uncharge u = MB__UNCHARGE__INIT;

        u.seq = next_answer_seq++;
        u.has_reason = true;
        u.reason = req->body_case == MB__MSG__BODY_RECLAIM ? MB__UNCHARGE_REASON__UNCHARGE_RECLAIM
                                                           : MB__UNCHARGE_REASON__UNCHARGE_DRAIN;
        u.has_reply_to = true;
        u.reply_to = req->body_case == MB__MSG__BODY_RECLAIM ? req->reclaim->seq : req->drain->seq;
        u.has_nothing_left = u.nothing_left = getenv("WIRE_CLIENT_NOTHING_LEFT") != NULL;
        msg.body_case = MB__MSG__BODY_UNCHARGE;
        msg.uncharge = &u;
        send_msg(&msg);
}

/* The reply to a request: what the daemon sends on its own (Reclaim, Drain,
 * Event) and the Acks of the answers to it are handled on the way. */
static Mb__Msg *recv_reply(void) {
        for (;;) {
                Mb__Msg *msg = recv_msg();

                if (!msg) {
                        printf("closed\n");
                        fflush(stdout);
                        exit(1);
                }
                switch (msg->body_case) {
                case MB__MSG__BODY_RECLAIM:
                case MB__MSG__BODY_DRAIN:
                        answer_request(msg);
                        break;
                case MB__MSG__BODY_EVENT:
                        break;
                case MB__MSG__BODY_ACK:
                        if (msg->ack->seq >= ANSWER_SEQ_BASE)
                                break;
                        return msg;
                default:
                        return msg;
                }
                mb__msg__free_unpacked(msg, NULL);
        }
}

static void held_add(uint64_t start, uint32_t count) {
        if (nheld + count > MAX_HELD_PAGES) {
                errno = ENOSPC;
                die("too many pages");
        }
        if (nheld + count > held_alloc) {
                size_t n = held_alloc ? held_alloc : 256;
                uint64_t *p;
                while (n < nheld + count)
                        n *= 2;
                p = realloc(held, n * sizeof(uint64_t));
                if (!p)
                        die("realloc");
                held = p;
                held_alloc = n;
        }
        for (uint32_t i = 0; i < count; i++)
                held[nheld++] = start + i;
}

static void step_hello(uint32_t version, const char *tenant, const char *name) {
        Mb__Msg msg = MB__MSG__INIT, *reply;
        Mb__Hello hello = MB__HELLO__INIT;
        struct stat st;

        hello.version = version;
        hello.tenant = (char *) tenant;
        hello.client_name = (char *) name;
        msg.body_case = MB__MSG__BODY_HELLO;
        msg.hello = &hello;
        send_msg(&msg);

        reply = recv_reply();
        if (!handle_error(reply)) {
                Mb__Welcome *w = reply->welcome;

                if (reply->body_case != MB__MSG__BODY_WELCOME || arena_fd < 0 || stats_fd < 0) {
                        errno = EPROTO;
                        die("expected Welcome with two fds");
                }
                last_error = 0;
                page_size = w->page_size;
                arena_pages = w->arena_pages;
                if (fstat(arena_fd, &st) < 0)
                        die("fstat");
                printf("welcome tenant=%s page_size=%" PRIu64 " batch=%u arena_pages=%" PRIu64
                       " stats_slots=%u client_id=%" PRIu64 " unlimited=%d arena_ino=%lu arena_dev=%lu arena_bytes=%lld\n",
                       w->tenant, w->page_size, w->charge_batch, w->arena_pages, w->stats_slots, w->client_id,
                       w->has_unlimited && w->unlimited, (unsigned long) st.st_ino, (unsigned long) st.st_dev,
                       (long long) st.st_size);
        }
        mb__msg__free_unpacked(reply, NULL);
}

/* One request/reply; returns the pages granted or acked, -errno on Error.
 * @need (0: absent) and @contig (0: absent) as in Charge. */
static int64_t do_charge_ex(uint32_t n, uint32_t need, uint32_t contig, bool print) {
        Mb__Msg msg = MB__MSG__INIT, *reply;
        Mb__Charge charge = MB__CHARGE__INIT;
        int64_t granted = 0;

        pthread_mutex_lock(&lock);
        charge.seq = next_seq++;
        charge.pages = n;
        charge.has_need = need > 0;
        charge.need = need;
        charge.has_contig_pages = contig > 0;
        charge.contig_pages = contig;
        msg.body_case = MB__MSG__BODY_CHARGE;
        msg.charge = &charge;
        send_msg(&msg);
        reply = recv_reply();
        if (handle_error(reply)) {
                granted = -reply->error->code;
        } else if (reply->body_case == MB__MSG__BODY_GRANT && reply->grant->seq == charge.seq) {
                last_error = 0;
                for (size_t i = 0; i < reply->grant->n_extents; i++) {
                        held_add(reply->grant->extents[i]->start, reply->grant->extents[i]->count);
                        granted += reply->grant->extents[i]->count;
                }
                if (print && contig > 0)
                        printf("grant-contig pages=%" PRId64 " extents=%zu first=%" PRIu64 " count=%u\n", granted,
                               reply->grant->n_extents,
                               reply->grant->n_extents ? reply->grant->extents[0]->start : 0,
                               reply->grant->n_extents ? reply->grant->extents[0]->count : 0);
                else if (print)
                        printf("grant pages=%" PRId64 " extents=%zu first=%" PRIu64 "\n", granted,
                               reply->grant->n_extents,
                               reply->grant->n_extents ? reply->grant->extents[0]->start : 0);
                if (granted != n) {
                        errno = EPROTO;
                        die("Grant of the wrong size");
                }
        } else {
                errno = EPROTO;
                die("expected Grant");
        }
        pthread_mutex_unlock(&lock);
        mb__msg__free_unpacked(reply, NULL);
        return granted;
}

static int64_t do_charge(uint32_t n, bool print) {
        return do_charge_ex(n, 0, 0, print);
}

/* Uncharge @n extents; on Ack drop the pages from `held` (by value). */
static int64_t do_uncharge(const uint64_t *starts, const uint32_t *counts, size_t n, bool print) {
        Mb__Msg msg = MB__MSG__INIT, *reply;
        Mb__Uncharge u = MB__UNCHARGE__INIT;
        Mb__Extent *ext = calloc(n ? n : 1, sizeof(Mb__Extent));
        Mb__Extent **ptrs = calloc(n ? n : 1, sizeof(Mb__Extent *));
        int64_t acked;

        if (!ext || !ptrs)
                die("calloc");
        for (size_t i = 0; i < n; i++) {
                mb__extent__init(&ext[i]);
                ext[i].start = starts[i];
                ext[i].count = counts[i];
                ptrs[i] = &ext[i];
        }
        u.seq = next_seq++;
        u.n_extents = n;
        u.extents = ptrs;
        msg.body_case = MB__MSG__BODY_UNCHARGE;
        msg.uncharge = &u;
        send_msg(&msg);
        reply = recv_reply();
        if (handle_error(reply)) {
                acked = -reply->error->code;
        } else if (reply->body_case == MB__MSG__BODY_ACK && reply->ack->seq == u.seq) {
                last_error = 0;
                acked = (int64_t) reply->ack->pages;
                for (size_t i = 0; i < n; i++)
                        for (uint64_t p = starts[i]; p < starts[i] + counts[i]; p++)
                                for (size_t j = 0; j < nheld; j++)
                                        if (held[j] == p) {
                                                held[j] = held[--nheld];
                                                break;
                                        }
                if (print)
                        printf("ack pages=%" PRId64 "\n", acked);
        } else {
                errno = EPROTO;
                die("expected Ack");
        }
        mb__msg__free_unpacked(reply, NULL);
        free(ext);
        free(ptrs);
        return acked;
}

static void step_uncharge_each_charge(uint32_t n) {
        Mb__Msg msg = MB__MSG__INIT, *reply;
        Mb__Uncharge u = MB__UNCHARGE__INIT;
        Mb__Charge charge = MB__CHARGE__INIT;
        Mb__Extent ext = MB__EXTENT__INIT, *ptr = &ext;
        uint8_t *all = NULL, *buf;
        size_t nall = 0, len, nsent = nheld;
        int64_t acked = 0, granted = 0;

        u.n_extents = 1;
        u.extents = &ptr;
        charge.pages = n;
        for (size_t i = 0; i <= nsent; i++) { /* held[] is in page order */
                msg.body_case = i < nsent ? MB__MSG__BODY_UNCHARGE : MB__MSG__BODY_CHARGE;
                if (i < nsent) {
                        msg.uncharge = &u;
                        u.seq = next_seq++;
                        ext.start = held[i];
                        ext.count = 1;
                } else {
                        msg.charge = &charge;
                        charge.seq = next_seq++;
                }
                if (wire_frame_pack(&msg, &buf, &len) < 0 || !(all = realloc(all, nall + len)))
                        die("pack");
                memcpy(all + nall, buf, len);
                nall += len;
                free(buf);
        }
        write_all(all, nall);
        free(all);
        last_error = 0;
        for (size_t i = nheld = 0; i <= nsent; mb__msg__free_unpacked(reply, NULL), i++) {
                reply = recv_reply();
                if (reply->body_case == MB__MSG__BODY_ACK)
                        acked += (int64_t) reply->ack->pages;
                else if (reply->body_case == MB__MSG__BODY_GRANT && reply->grant->seq == charge.seq)
                        for (size_t j = 0; j < reply->grant->n_extents; j++) {
                                held_add(reply->grant->extents[j]->start, reply->grant->extents[j]->count);
                                granted += reply->grant->extents[j]->count;
                        }
                else if (!handle_error(reply))
                        die("expected Ack or Grant");
        }
        printf("pipelined acked=%" PRId64 " granted=%" PRId64 "\n", acked, granted);
}

static void step_uncharge_all(void) {
        uint64_t *starts = malloc((nheld ? nheld : 1) * sizeof(uint64_t));
        uint32_t *counts = malloc((nheld ? nheld : 1) * sizeof(uint32_t));
        size_t n = nheld;

        if (!starts || !counts)
                die("malloc");
        for (size_t i = 0; i < n; i++) {
                starts[i] = held[i];
                counts[i] = 1;
        }
        pthread_mutex_lock(&lock);
        (void) do_uncharge(starts, counts, n, true);
        pthread_mutex_unlock(&lock);
        free(starts);
        free(counts);
}

static void map_arena(void) {
        if (arena)
                return;
        if (arena_fd < 0) {
                errno = EBADF;
                die("no arena (say hello first)");
        }
        arena = mmap(NULL, arena_pages * page_size, PROT_READ | PROT_WRITE, /* WIRE_MAP_RESERVE: hugetlb reserves */
                     MAP_SHARED | (getenv("WIRE_MAP_RESERVE") ? 0 : MAP_NORESERVE), arena_fd, 0);
        if (arena == MAP_FAILED)
                die("mmap arena");
}

static sigjmp_buf probe_jmp;

static void probe_sigbus(int sig) {
        (void) sig;
        siglongjmp(probe_jmp, 1);
}

static uint64_t arena_backed(void) {
        struct stat st;

        if (fstat(arena_fd, &st) < 0)
                die("fstat arena");
        return (uint64_t) st.st_blocks * 512;
}

/* Write @byte into pages [start, start+count) one page at a time; a SIGBUS
 * ends the writing (the kernel refused to back one more page). */
static void probe_write(uint64_t start, uint64_t count, uint8_t byte) {
        struct sigaction act = { .sa_handler = probe_sigbus }, old;
        volatile uint64_t wrote = 0;
        volatile int sigbus = 0;

        map_arena();
        sigemptyset(&act.sa_mask);
        sigaction(SIGBUS, &act, &old);
        if (sigsetjmp(probe_jmp, 1) == 0) {
                for (uint64_t p = start; p < start + count; p++) {
                        memset(arena + p * page_size, byte, page_size);
                        wrote = wrote + 1;
                }
        } else {
                sigbus = 1;
        }
        sigaction(SIGBUS, &old, NULL);
        printf("probe-write wrote=%" PRIu64 " sigbus=%d backed=%" PRIu64 "\n", (uint64_t) wrote, (int) sigbus,
               arena_backed());
}

static bool check_page(uint64_t p, uint8_t byte) {
        const uint8_t *q = arena + p * page_size;

        for (uint64_t i = 0; i < page_size; i++)
                if (q[i] != byte) {
                        printf("page %" PRIu64 " byte %" PRIu64 " is 0x%02x, expected 0x%02x\n", p, i, q[i], byte);
                        return false;
                }
        return true;
}

struct load_arg {
        unsigned rounds;
        unsigned seed;
        int64_t errors;
};

static void *load_thread(void *userdata) {
        struct load_arg *a = userdata;

        for (unsigned r = 0; r < a->rounds && !stop; r++) {
                uint32_t n = 1 + (uint32_t) (rand_r(&a->seed) % 64);
                int64_t got = do_charge(n, false);

                if (got < 0 && got != -ENOMEM) {
                        a->errors++;
                        continue;
                }
                /* Give back a random part of what the connection holds. */
                pthread_mutex_lock(&lock);
                if (nheld > 0) {
                        size_t k = (size_t) rand_r(&a->seed) % (nheld + 1);
                        uint64_t *starts = malloc((k ? k : 1) * sizeof(uint64_t));
                        uint32_t *counts = malloc((k ? k : 1) * sizeof(uint32_t));
                        if (!starts || !counts)
                                die("malloc");
                        for (size_t i = 0; i < k; i++) {
                                starts[i] = held[nheld - 1 - i];
                                counts[i] = 1;
                        }
                        if (do_uncharge(starts, counts, k, false) != (int64_t) k)
                                a->errors++;
                        free(starts);
                        free(counts);
                }
                pthread_mutex_unlock(&lock);
        }
        return NULL;
}

static void step_load(unsigned nthreads, unsigned rounds) {
        pthread_t *t = calloc(nthreads, sizeof(pthread_t));
        struct load_arg *a = calloc(nthreads, sizeof(struct load_arg));
        int64_t errors = 0;

        if (!t || !a)
                die("calloc");
        for (unsigned i = 0; i < nthreads; i++) {
                a[i].rounds = rounds;
                a[i].seed = (unsigned) getpid() * 7919u + i;
                if (pthread_create(&t[i], NULL, load_thread, &a[i]) != 0)
                        die("pthread_create");
        }
        for (unsigned i = 0; i < nthreads; i++) {
                pthread_join(t[i], NULL);
                errors += a[i].errors;
        }
        printf("load done held=%zu errors=%" PRId64 "\n", nheld, errors);
        free(t);
        free(a);
        if (errors > 0)
                exit(1);
}

static void on_signal(int sig) {
        stop = 1;
}

static void need(int argc, int i, int n, const char *step) {
        if (i + n >= argc) {
                fprintf(stderr, "wire-client: %s needs %d argument(s)\n", step, n);
                exit(2);
        }
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "socket", required_argument, NULL, 's' },
                { "name", required_argument, NULL, 'n' },
                {}
        };
        const char *socket_path = NULL, *name = "wire-client";
        int c;

        while ((c = getopt_long(argc, argv, "s:n:", options, NULL)) >= 0) {
                switch (c) {
                case 's':
                        socket_path = optarg;
                        break;
                case 'n':
                        name = optarg;
                        break;
                default:
                        return 2;
                }
        }
        if (!socket_path || strlen(socket_path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "wire-client: --socket PATH is needed\n");
                return 2;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        signal(SIGPIPE, SIG_IGN);
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);

        strcpy(sa.sun_path, socket_path);
        sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (sock < 0)
                die("socket");
        if (connect(sock, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                die("connect");

        for (int i = optind; i < argc; i++) {
                const char *s = argv[i];

                if (strcmp(s, "hello") == 0) {
                        need(argc, i, 1, s);
                        step_hello(WIRE_PROTOCOL_VERSION, argv[++i], name);
                } else if (strcmp(s, "hello-version") == 0) {
                        need(argc, i, 2, s);
                        step_hello((uint32_t) strtoul(argv[i + 1], NULL, 10), argv[i + 2], name);
                        i += 2;
                } else if (strcmp(s, "charge") == 0) {
                        need(argc, i, 1, s);
                        (void) do_charge((uint32_t) strtoul(argv[++i], NULL, 10), true);
                } else if (strcmp(s, "charge-contig") == 0) {
                        need(argc, i, 3, s);
                        (void) do_charge_ex((uint32_t) strtoul(argv[i + 1], NULL, 10),
                                            (uint32_t) strtoul(argv[i + 2], NULL, 10),
                                            (uint32_t) strtoul(argv[i + 3], NULL, 10), true);
                        i += 3;
                } else if (strcmp(s, "uncharge-all") == 0) {
                        step_uncharge_all();
                } else if (strcmp(s, "uncharge") == 0) {
                        uint64_t start;
                        uint32_t count;
                        need(argc, i, 2, s);
                        start = strtoull(argv[i + 1], NULL, 10);
                        count = (uint32_t) strtoul(argv[i + 2], NULL, 10);
                        i += 2;
                        (void) do_uncharge(&start, &count, 1, true);
                } else if (strcmp(s, "uncharge-each-charge") == 0) {
                        need(argc, i, 1, s);
                        step_uncharge_each_charge((uint32_t) strtoul(argv[++i], NULL, 10));
                } else if (strcmp(s, "uncharge-twice") == 0) {
                        uint64_t starts[2];
                        uint32_t counts[2] = { 1, 1 };
                        if (nheld == 0) {
                                fprintf(stderr, "wire-client: uncharge-twice needs a held page\n");
                                return 2;
                        }
                        starts[0] = starts[1] = held[0];
                        (void) do_uncharge(starts, counts, 2, true);
                } else if (strcmp(s, "expect-ok") == 0) {
                        if (last_error != 0) {
                                printf("FAILED: expected success, got %s\n", code_name(last_error));
                                return 1;
                        }
                } else if (strcmp(s, "expect-error") == 0) {
                        int want;
                        need(argc, i, 1, s);
                        want = code_parse(argv[++i]);
                        if (last_error != want) {
                                printf("FAILED: expected error %s, got %s\n", code_name(want),
                                       last_error ? code_name(last_error) : "success");
                                return 1;
                        }
                } else if (strcmp(s, "expect-close") == 0) {
                        Mb__Msg *msg = recv_msg();
                        if (msg) {
                                if (!handle_error(msg))
                                        printf("FAILED: expected close, got %s\n", wire_msg_name(msg));
                                mb__msg__free_unpacked(msg, NULL);
                                return 1;
                        }
                        printf("closed\n");
                } else if (strcmp(s, "read-error") == 0) {
                        /* The reply to raw bytes sent before. */
                        Mb__Msg *msg = recv_reply();
                        if (!handle_error(msg)) {
                                printf("FAILED: expected an Error, got %s\n", wire_msg_name(msg));
                                return 1;
                        }
                        mb__msg__free_unpacked(msg, NULL);
                } else if (strcmp(s, "read-reply") == 0) {
                        /* The reply to raw bytes sent before: printed. */
                        Mb__Msg *msg = recv_reply();
                        if (!handle_error(msg)) {
                                last_error = 0;
                                if (msg->body_case == MB__MSG__BODY_GRANT)
                                        printf("grant extents=%zu\n", msg->grant->n_extents);
                                else if (msg->body_case == MB__MSG__BODY_ACK)
                                        printf("ack pages=%" PRIu64 "\n", msg->ack->pages);
                                else
                                        printf("reply %s\n", wire_msg_name(msg));
                        }
                        mb__msg__free_unpacked(msg, NULL);
                } else if (strcmp(s, "send-hex") == 0) {
                        const char *h;
                        uint8_t b[4096];
                        size_t n = 0;
                        need(argc, i, 1, s);
                        for (h = argv[++i]; h[0] && h[1] && n < sizeof(b); h += 2) {
                                unsigned v;
                                if (sscanf(h, "%2x", &v) != 1)
                                        return 2;
                                b[n++] = (uint8_t) v;
                        }
                        write_all(b, n);
                } else if (strcmp(s, "send-garbage") == 0 || strcmp(s, "send-header") == 0) {
                        uint32_t n, be;
                        need(argc, i, 1, s);
                        n = (uint32_t) strtoul(argv[++i], NULL, 10);
                        be = htonl(n);
                        write_all(&be, sizeof(be));
                        if (strcmp(s, "send-garbage") == 0) {
                                uint8_t *b = malloc(n ? n : 1);
                                int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
                                if (!b || fd < 0 || read(fd, b, n) != (ssize_t) n)
                                        die("urandom");
                                /* Field 15 as varint: never a valid Msg body. */
                                if (n >= 2) {
                                        b[0] = (15 << 3) | 0;
                                        b[1] &= 0x7f;
                                }
                                close(fd);
                                write_all(b, n);
                                free(b);
                        }
                } else if (strcmp(s, "shutdown-wr") == 0) {
                        if (shutdown(sock, SHUT_WR) < 0)
                                die("shutdown");
                } else if (strcmp(s, "write-pages") == 0) {
                        uint8_t byte;
                        need(argc, i, 1, s);
                        byte = (uint8_t) strtoul(argv[++i], NULL, 0);
                        map_arena();
                        for (size_t j = 0; j < nheld; j++)
                                memset(arena + held[j] * page_size, byte, page_size);
                } else if (strcmp(s, "check-pages") == 0) {
                        uint8_t byte;
                        need(argc, i, 1, s);
                        byte = (uint8_t) strtoul(argv[++i], NULL, 0);
                        map_arena();
                        for (size_t j = 0; j < nheld; j++)
                                if (!check_page(held[j], byte))
                                        return 1;
                        printf("pages ok\n");
                } else if (strcmp(s, "check-arena") == 0) {
                        uint64_t start, count;
                        uint8_t byte;
                        need(argc, i, 3, s);
                        start = strtoull(argv[i + 1], NULL, 10);
                        count = strtoull(argv[i + 2], NULL, 10);
                        byte = (uint8_t) strtoul(argv[i + 3], NULL, 0);
                        i += 3;
                        map_arena();
                        for (uint64_t p = start; p < start + count; p++)
                                if (!check_page(p, byte))
                                        return 1;
                        printf("arena ok\n");
                } else if (strcmp(s, "write-arena") == 0) {
                        uint64_t start, count;
                        uint8_t byte;
                        need(argc, i, 3, s);
                        start = strtoull(argv[i + 1], NULL, 10);
                        count = strtoull(argv[i + 2], NULL, 10);
                        byte = (uint8_t) strtoul(argv[i + 3], NULL, 0);
                        i += 3;
                        map_arena();
                        memset(arena + start * page_size, byte, count * page_size);
                } else if (strcmp(s, "probe-write") == 0) {
                        need(argc, i, 3, s);
                        probe_write(strtoull(argv[i + 1], NULL, 10), strtoull(argv[i + 2], NULL, 10),
                                    (uint8_t) strtoul(argv[i + 3], NULL, 0));
                        i += 3;
                } else if (strcmp(s, "fallocate-arena") == 0) {
                        if (arena_fd < 0)
                                die("no arena");
                        if (fallocate(arena_fd, 0, 0, (off_t) (arena_pages * page_size)) == 0)
                                printf("fallocate ok\n");
                        else
                                printf("fallocate error=%s\n", strerrorname_np(errno));
                } else if (strcmp(s, "print-backed") == 0) {
                        struct stat st;
                        if (arena_fd < 0 || fstat(arena_fd, &st) < 0)
                                die("fstat arena");
                        printf("backed=%" PRIu64 " size=%lld\n", (uint64_t) st.st_blocks * 512,
                               (long long) st.st_size);
                } else if (strcmp(s, "print-held") == 0) {
                        printf("held=%zu\n", nheld);
                } else if (strcmp(s, "print-inode") == 0) {
                        struct stat st;
                        if (arena_fd < 0 || fstat(arena_fd, &st) < 0)
                                die("fstat arena");
                        printf("arena_ino=%lu\n", (unsigned long) st.st_ino);
                } else if (strcmp(s, "wait-file") == 0) {
                        need(argc, i, 1, s);
                        i++;
                        while (access(argv[i], F_OK) < 0 && !stop)
                                usleep(20 * 1000);
                } else if (strcmp(s, "touch") == 0) {
                        int fd;
                        need(argc, i, 1, s);
                        fd = open(argv[++i], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                        if (fd < 0)
                                die("touch");
                        close(fd);
                } else if (strcmp(s, "sleep") == 0) {
                        need(argc, i, 1, s);
                        usleep((useconds_t) strtoul(argv[++i], NULL, 10) * 1000);
                } else if (strcmp(s, "hold") == 0) {
                        sigset_t block, old;
                        /* Block, test, then sigsuspend(): a signal cannot
                         * slip in between the test and the wait. */
                        sigemptyset(&block);
                        sigaddset(&block, SIGTERM);
                        sigaddset(&block, SIGINT);
                        sigprocmask(SIG_BLOCK, &block, &old);
                        printf("ready\n");
                        while (!stop)
                                sigsuspend(&old);
                        sigprocmask(SIG_SETMASK, &old, NULL);
                } else if (strcmp(s, "load") == 0) {
                        need(argc, i, 2, s);
                        step_load((unsigned) strtoul(argv[i + 1], NULL, 10),
                                  (unsigned) strtoul(argv[i + 2], NULL, 10));
                        i += 2;
                } else if (strcmp(s, "quit") == 0) {
                        return 0;
                } else if (strcmp(s, "handoff") == 0) {
                        need(argc, i, 1, s);
                        step_handoff(argv[++i]);
                } else if (strcmp(s, "trickle") == 0) {
                        need(argc, i, 2, s);
                        step_trickle((uint32_t) strtoul(argv[i + 1], NULL, 10),
                                     (unsigned) strtoul(argv[i + 2], NULL, 10));
                        i += 2;
                } else if (strcmp(s, "flood") == 0) {
                        need(argc, i, 1, s);
                        step_flood((unsigned) strtoul(argv[++i], NULL, 10));
                } else if (strcmp(s, "flood-hello") == 0) {
                        need(argc, i, 1, s);
                        step_flood_hello(argv[++i]);
                } else if (strcmp(s, "noread") == 0) {
                        need(argc, i, 3, s);
                        step_noread((unsigned) strtoul(argv[i + 1], NULL, 10), argv[i + 2],
                                    (unsigned) strtoul(argv[i + 3], NULL, 10));
                        i += 3;
                } else if (strcmp(s, "flood-partial") == 0) {
                        step_flood_partial();
                } else if (strcmp(s, "flood-count") == 0) {
                        need(argc, i, 1, s);
                        step_flood_count(strtoul(argv[++i], NULL, 10));
                } else {
                        fprintf(stderr, "wire-client: unknown step %s\n", s);
                        return 2;
                }
        }
        return 0;
}
