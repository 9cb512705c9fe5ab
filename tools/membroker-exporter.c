/* SPDX-License-Identifier: MIT */
/*
 * membroker-exporter - serves the broker's figures at /metrics in the
 * Prometheus text format, read over D-Bus at every scrape (the properties,
 * memory.stat and memory.events of every tenant in one
 * DumpStatsCompact() call): the families of "membrokerctl stat
 * --format=prometheus" (tools/ctl-openmetrics.c), plus membroker_up.
 *
 * It listens on 127.0.0.1:9877 unless told otherwise (--listen), or on the
 * socket systemd passes (membroker-exporter.socket, sd_listen_fds()).
 * libmicrohttpd runs the HTTP side in one thread of its own, so scrapes are
 * answered one at a time and the bus is only ever used from that thread;
 * exporter-http.c bounds what a hostile client can hold of it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>
#include <systemd/sd-daemon.h>

#include "ctl-bus.h"
#include "ctl-openmetrics.h"
#include "ctl.h"
#include "exporter-http.h"

#define EXIT_USAGE 2
#define EXPORTER_DEFAULT_LISTEN "127.0.0.1:9877"
#define EXPORTER_LISTEN_BACKLOG 128
/* Idle time allowed on a connection; a whole request has its own deadline
 * (exporter-http.h). */
#define EXPORTER_CONNECTION_TIMEOUT_SEC 10
#define PROMETHEUS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* ctl-bus.c reads the bus to use from here. */
struct ctl_options ctl_arg = {
        .bus_kind = CTL_BUS_SYSTEM,
        .format = CTL_FORMAT_PROMETHEUS,
};

static const char *arg_listen = EXPORTER_DEFAULT_LISTEN;

void ctl_log_error(const char *fmt, ...) {
        va_list ap;

        fputs("membroker-exporter: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

/*
 * The body of one scrape, malloc'ed in *@ret (*@ret_len bytes): the broker's
 * families, or only membroker_up 0 when the broker cannot be read (a scrape
 * still succeeds, so that Prometheus sees the broker down rather than the
 * exporter).
 */
static int scrape(char **ret, size_t *ret_len) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(ctl_tenant_set_done) struct ctl_tenant_set s = {};
        _cleanup_(freep) size_t *sel = NULL;
        char *buf = NULL;
        size_t len = 0;
        bool up;
        FILE *f;

        /* A connection per scrape: a restarted broker or bus is found
         * again at the next scrape, and no state outlives a request. */
        up = ctl_bus_open(&bus) >= 0 && ctl_metrics_collect(bus, &s) >= 0;
        if (up) {
                sel = calloc(s.n ? s.n : 1, sizeof(*sel));
                if (!sel)
                        return -ENOMEM;
                for (size_t i = 0; i < s.n; i++)
                        sel[i] = i;
        }

        f = open_memstream(&buf, &len);
        if (!f)
                return -errno;
        fputs("# HELP membroker_up Whether the last scrape could read membrokerd over D-Bus.\n"
              "# TYPE membroker_up gauge\n",
              f);
        fprintf(f, "membroker_up %d\n", up ? 1 : 0);
        if (up)
                ctl_metrics_write(f, CTL_METRICS_PROMETHEUS, &s, sel, s.n);
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        *ret_len = len;
        return 0;
}

static enum MHD_Result respond(struct MHD_Connection *connection, unsigned status, const char *type, char *body,
                               size_t len) {
        struct MHD_Response *response;
        enum MHD_Result ret;

        response = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
        if (!response) {
                free(body);
                return MHD_NO;
        }
        (void) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        ret = MHD_queue_response(connection, status, response);
        MHD_destroy_response(response);
        return ret;
}

static enum MHD_Result respond_text(struct MHD_Connection *connection, unsigned status, const char *text) {
        char *body = strdup(text);

        if (!body)
                return MHD_NO;
        return respond(connection, status, "text/plain; charset=utf-8", body, strlen(body));
}

static enum MHD_Result handle_request(void *cls, struct MHD_Connection *connection, const char *url,
                                      const char *method, const char *version, const char *upload_data,
                                      size_t *upload_data_size, void **req_cls) {
        static int seen_headers;
        char *body = NULL;
        size_t len = 0;

        (void) cls;
        (void) version;
        (void) upload_data;
        /* Any method but GET and HEAD is answered at its headers, before a
         * body it may carry (libmicrohttpd closes the connection after the
         * answer instead of reading the rest). */
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
                exporter_http_request_answered(connection);
                return respond_text(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "Only GET and HEAD.\n");
        }
        /* First call: the headers only. */
        if (!*req_cls) {
                *req_cls = &seen_headers;
                return MHD_YES;
        }
        if (*upload_data_size != 0) {
                /* A body on GET means nothing: dropped as it comes, within
                 * the request's deadline (exporter-http.h). */
                *upload_data_size = 0;
                return MHD_YES;
        }
        exporter_http_request_answered(connection);
        if (strcmp(url, "/") == 0)
                return respond_text(connection, MHD_HTTP_OK,
                                    "membroker-exporter: the broker's metrics are at /metrics\n");
        if (strcmp(url, "/metrics") != 0)
                return respond_text(connection, MHD_HTTP_NOT_FOUND, "Not found; the metrics are at /metrics\n");
        if (scrape(&body, &len) < 0)
                return respond_text(connection, MHD_HTTP_INTERNAL_SERVER_ERROR, "Out of memory\n");
        return respond(connection, MHD_HTTP_OK, PROMETHEUS_CONTENT_TYPE, body, len);
}

/* A listening TCP socket on @spec, "[ADDRESS:]PORT" ("[::1]:9877" for IPv6),
 * numeric only. */
static int listen_on(const char *spec) {
        _cleanup_(freep) char *copy = strdup(spec);
        struct addrinfo hints = {
                .ai_family = AF_UNSPEC,
                .ai_socktype = SOCK_STREAM,
                .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
        };
        struct addrinfo *ai = NULL;
        const char *host = NULL, *port;
        char *colon;
        int fd, r, one = 1;

        if (!copy)
                return -ENOMEM;
        colon = strrchr(copy, ':');
        if (colon) {
                *colon = '\0';
                host = copy;
                port = colon + 1;
                if (host[0] == '[' && host[strlen(host) - 1] == ']') {
                        host++;
                        copy[strlen(copy) - 1] = '\0';
                }
        } else
                port = copy;
        r = getaddrinfo(host && *host ? host : NULL, port, &hints, &ai);
        if (r != 0) {
                ctl_log_error("--listen=%s: not [ADDRESS:]PORT with a numeric address and port: %s", spec,
                              gai_strerror(r));
                return -EINVAL;
        }
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                r = -errno;
                freeaddrinfo(ai);
                ctl_log_error("cannot make a socket for %s: %s", spec, strerror(-r));
                return r;
        }
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, EXPORTER_LISTEN_BACKLOG) < 0) {
                r = -errno;
                freeaddrinfo(ai);
                close(fd);
                ctl_log_error("cannot listen on %s: %s", spec, strerror(-r));
                return r;
        }
        freeaddrinfo(ai);
        return fd;
}

static void help(void) {
        printf("membroker-exporter [OPTIONS...]\n\n"
               "Serve membrokerd's figures at /metrics in the Prometheus text format, read over D-Bus\n"
               "at every scrape.\n\n"
               "     --listen=[ADDRESS:]PORT  Listen there (default %s; \"[::1]:9877\" for IPv6);\n"
               "                              a socket passed by systemd takes precedence\n"
               "     --system                 Read membrokerd on the system bus (default)\n"
               "     --user                   Read membrokerd on the user bus\n"
               "     --address=ADDRESS        Read membrokerd on the bus at ADDRESS\n"
               "  -h --help                   Show this help\n"
               "     --version                Show the version\n",
               EXPORTER_DEFAULT_LISTEN);
}

/* 1 to go on, 0 to exit with success, negative on a usage error. */
static int parse_argv(int argc, char **argv) {
        enum { ARG_LISTEN = 0x100, ARG_SYSTEM, ARG_USER, ARG_ADDRESS, ARG_VERSION };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "listen", required_argument, NULL, ARG_LISTEN },
                { "system", no_argument, NULL, ARG_SYSTEM },
                { "user", no_argument, NULL, ARG_USER },
                { "address", required_argument, NULL, ARG_ADDRESS },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("membroker-exporter %s\n", PACKAGE_VERSION);
                        return 0;
                case ARG_LISTEN:
                        arg_listen = optarg;
                        break;
                case ARG_SYSTEM:
                        ctl_arg.bus_kind = CTL_BUS_SYSTEM;
                        break;
                case ARG_USER:
                        ctl_arg.bus_kind = CTL_BUS_USER;
                        break;
                case ARG_ADDRESS:
                        ctl_arg.bus_kind = CTL_BUS_ADDRESS;
                        ctl_arg.address = optarg;
                        break;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                ctl_log_error("unexpected argument '%s'", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

int main(int argc, char **argv) {
        struct MHD_Daemon *d;
        sigset_t mask;
        int r, fd, sig = 0, n;

        r = parse_argv(argc, argv);
        if (r <= 0) {
                if (r < 0)
                        fprintf(stderr, "Try 'membroker-exporter --help'.\n");
                return r < 0 ? EXIT_USAGE : EXIT_SUCCESS;
        }

        /* SIGTERM and SIGINT are taken with sigwait() below; block them
         * before libmicrohttpd's thread exists so that it inherits that. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        n = sd_listen_fds(true);
        if (n < 0) {
                ctl_log_error("cannot take the sockets systemd passed: %s", strerror(-n));
                return EXIT_FAILURE;
        }
        if (n > 1) {
                ctl_log_error("systemd passed %d sockets; one is expected", n);
                return EXIT_FAILURE;
        }
        if (n == 1) {
                fd = SD_LISTEN_FDS_START;
                if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
                        ctl_log_error("the socket systemd passed is not a listening stream socket");
                        return EXIT_FAILURE;
                }
        } else {
                fd = listen_on(arg_listen);
                if (fd < 0)
                        return EXIT_FAILURE;
        }

        exporter_http_raise_nofile();
        r = exporter_http_guard_start();
        if (r < 0) {
                ctl_log_error("cannot start the HTTP deadline thread: %s", strerror(-r));
                return EXIT_FAILURE;
        }
        /* MHD_USE_AUTO: epoll, so that descriptors past FD_SETSIZE work. */
        d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                             handle_request, NULL, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
                             (unsigned) EXPORTER_HTTP_CONNECTION_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT,
                             (unsigned) EXPORTER_CONNECTION_TIMEOUT_SEC, MHD_OPTION_NOTIFY_CONNECTION,
                             exporter_http_notify_connection, NULL, MHD_OPTION_NOTIFY_COMPLETED,
                             exporter_http_notify_completed, NULL, MHD_OPTION_END);
        if (!d) {
                ctl_log_error("cannot start the HTTP server");
                return EXIT_FAILURE;
        }
        fprintf(stderr, "membroker-exporter %s: serving /metrics on %s, reading %s\n", PACKAGE_VERSION,
                n == 1 ? "the socket systemd passed" : arg_listen, ctl_bus_description());
        (void) sd_notify(false, "READY=1");

        while (sigwait(&mask, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
                ;
        (void) sd_notify(false, "STOPPING=1");
        MHD_stop_daemon(d);
        exporter_http_guard_stop();
        return EXIT_SUCCESS;
}
