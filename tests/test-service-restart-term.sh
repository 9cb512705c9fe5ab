#!/bin/bash
# SPDX-License-Identifier: MIT
# Restart without losing memory, SIGTERM variant: membrokerd stops with its
# arenas and page ownership in the fd store (tests/fake-systemd plays
# systemd), the next one takes them back; clients reconnect and re-claim
# their pages, read back every byte, usage is exactly what it was, new
# allocations work.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/service-lib.sh"
mb_restart_scenario TERM
