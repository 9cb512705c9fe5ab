/* SPDX-License-Identifier: MIT */
/*
 * exporter-http.h - what keeps membroker-exporter's HTTP side serving under
 * hostile clients (libmicrohttpd does the HTTP itself):
 *
 *  - a deadline for a whole request, from its first byte (the connection's
 *    accept, or the end of the previous request on a kept-alive connection)
 *    to the end of its answer: a client that trickles a header line now
 *    and then is cut when it passes, whatever an idle timer would say;
 *  - slots: at most EXPORTER_HTTP_SLOTS connections, and at most
 *    EXPORTER_HTTP_SLOTS_PER_ADDRESS from one address; a connection that
 *    comes over either bound takes the place of the oldest one of that
 *    address (or of all) still waiting for its request, so that the newest
 *    request is served before idle ones, and only when none waits is the
 *    newcomer itself refused.  As dbus-daemon bounds its incomplete
 *    connections (max_incomplete_connections, auth_timeout).
 *
 * A connection is cut with shutdown(2): libmicrohttpd sees the end of the
 * stream and closes it on its own thread.
 */
#pragma once

#include <stdbool.h>

#include <microhttpd.h>

#define EXPORTER_HTTP_SLOTS 512u
/* Half of them: one address cannot take every slot, and under a storm of
 * its reconnecting connections a newcomer from it that is slow to send
 * its request waits that many accepts before it is the oldest one. */
#define EXPORTER_HTTP_SLOTS_PER_ADDRESS 256u
#define EXPORTER_HTTP_REQUEST_DEADLINE_SEC 10u
/* libmicrohttpd's own limit: the slots plus the connections cut and not
 * closed yet. */
#define EXPORTER_HTTP_CONNECTION_LIMIT (2u * EXPORTER_HTTP_SLOTS)

/* Raise the soft RLIMIT_NOFILE to the hard one (the slots are
 * descriptors; libmicrohttpd polls with epoll), as systemd does for its
 * services. */
void exporter_http_raise_nofile(void);

/* Start the deadline thread.  0 or a negative errno. */
int exporter_http_guard_start(void);
void exporter_http_guard_stop(void);

/* MHD_OPTION_NOTIFY_CONNECTION and MHD_OPTION_NOTIFY_COMPLETED. */
void exporter_http_notify_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                                     enum MHD_ConnectionNotificationCode toe);
void exporter_http_notify_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                                    enum MHD_RequestTerminationCode toe);

/* The request on @connection is complete and is being answered: it is no
 * longer one that waits (it keeps its deadline). */
void exporter_http_request_answered(struct MHD_Connection *connection);
