/* SPDX-License-Identifier: MIT */
/*
 * connect.h - a client's connection to membrokerd (connect.c): the first
 * one in mb_connect_ex(), the next ones after a restart of the daemon.
 */
#pragma once

#include "core/client.h"

/**
 * connect_again - connect again and re-claim every charged page
 * (reconnect.h).  Called by the reader that saw the end of the connection,
 * with io_lock not held; holds send_lock throughout, so that no Uncharge
 * changes the held bitmap or goes out meanwhile.  On success the session
 * goes on with the same arena mapping, a new connection and a new stats
 * region, seeded with the old slots so that the figures carry over;
 * conn_gen moves on, so threads waiting for a reply know their request was
 * lost.  Returns 0, or the error that ends the session (with
 * mb_set_error()).
 */
int connect_again(mb_client *c);
