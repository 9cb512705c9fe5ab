/* SPDX-License-Identifier: MIT */
/*
 * ctl-openmetrics.h - membrokerctl stat --format=openmetrics and
 * --format=prometheus, and the /metrics of membroker-exporter.
 */
#pragma once

#include <stddef.h>
#include <stdio.h>

#include "ctl-bus.h"


enum ctl_metrics_format {
        CTL_METRICS_OPENMETRICS, /* application/openmetrics-text; version=1.0.0 */
        CTL_METRICS_PROMETHEUS,  /* text/plain; version=0.0.4 */
};

/**
 * ctl_metrics_write - write the tenants @sel[0..@nsel) of @s (with their
 * properties, stat and events read) to @f as metric families in @format:
 * per family # HELP and # TYPE (and # UNIT in OpenMetrics), names with
 * _bytes, _seconds and _total, a tenant label on every sample; "# EOF" last
 * in OpenMetrics only.
 */
void ctl_metrics_write(FILE *f, enum ctl_metrics_format format, const struct ctl_tenant_set *s, const size_t *sel,
                       size_t nsel);

/**
 * ctl_metrics_collect - read what ctl_metrics_write() prints of every
 * tenant into @s (empty; the caller frees it with ctl_tenant_set_done(),
 * also on error): properties, memory.stat (DumpStats) and memory.events.
 * 0 or a negative errno (logged).
 */
int ctl_metrics_collect(sd_bus *bus, struct ctl_tenant_set *s);
