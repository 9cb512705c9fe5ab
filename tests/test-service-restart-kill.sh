#!/bin/bash
# SPDX-License-Identifier: MIT
# Restart without losing memory, SIGKILL variant: membrokerd gets no chance
# to prepare, so everything the next one needs (arenas, page owners, client
# tokens, the runtime state) must already be in the fd store, kept up to date
# as it changed.  Same checks as the SIGTERM variant.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/broker-lib.sh"
. "$top_srcdir/tests/service-lib.sh"
mb_restart_scenario KILL
