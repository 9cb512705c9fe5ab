/* SPDX-License-Identifier: MIT */
/*
 * wire-client.h - what the steps of tests/wire-client that work on
 * connections (wire-client-conn.c) share with the rest of it.
 */
#pragma once

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

extern int sock;                     /* the session's connection */
extern struct sockaddr_un sa;        /* the daemon's socket */
extern volatile sig_atomic_t stop;   /* SIGTERM/SIGINT came */

/* Print what failed (errno) and exit 2. */
_Noreturn void die(const char *what);
/* Write all @n bytes of @buf on the session's connection, or die. */
void write_all(const void *buf, size_t n);

/* The steps handoff, trickle, flood, flood-hello, flood-partial,
 * flood-count and noread. */
void step_handoff(const char *pidfile);
void step_trickle(uint32_t n, unsigned ms);
void step_flood(unsigned n);
void step_flood_hello(const char *tenant);
void step_flood_partial(void);
void step_noread(unsigned n, const char *tenant, unsigned seconds);
void step_flood_count(size_t max);
