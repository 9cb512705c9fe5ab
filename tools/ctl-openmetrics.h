/* SPDX-License-Identifier: MIT */
/*
 * ctl-openmetrics.h - membrokerctl stat --format=openmetrics.
 */
#pragma once

#include <stddef.h>

#include "ctl-bus.h"

/**
 * ctl_openmetrics_print - print the tenants @sel[0..@nsel) of @s (with
 * their properties, stat and events read) on stdout as metric families,
 * then "# EOF".
 */
void ctl_openmetrics_print(const struct ctl_tenant_set *s, const size_t *sel, size_t nsel);
