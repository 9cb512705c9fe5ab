#!/bin/bash
# SPDX-License-Identifier: MIT
# 8 threads on one client at its tenant's limit: only ENOMEM, stocks taken across CPUs, contents verified.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/client-env.sh"
mb_client_setup
mb_client_case threads-limit
