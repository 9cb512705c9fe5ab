# tests: bus (the org.membroker1 D-Bus API and membrokerctl)
#
# Integration tests: a private dbus-daemon, the real membrokerd on it, real
# busctl / dbus-send, real membroker-load clients and the real membrokerctl.
bus_tests = \
	tests/test-bus-introspect.sh \
	tests/test-bus-interfaces-xml.sh \
	tests/test-bus-properties.sh \
	tests/test-bus-stat.sh \
	tests/test-bus-stat-compact.sh \
	tests/test-bus-flush.sh \
	tests/test-bus-auth.sh \
	tests/test-bus-delegate.sh \
	tests/test-bus-delegate-reload.sh \
	tests/test-bus-errors.sh \
	tests/test-bus-set-limits.sh \
	tests/test-bus-events.sh \
	tests/test-bus-lifecycle.sh \
	tests/test-bus-reclaim.sh \
	tests/test-bus-loop.sh \
	tests/test-bus-reload.sh \
	tests/test-bus-options.sh \
	tests/test-bus-reconnect.sh \
	tests/test-bus-stat-dirty.sh \
	tests/test-bus-stat-weight.sh \
	tests/test-ctl-status.sh \
	tests/test-ctl-tree.sh \
	tests/test-ctl-stat.sh \
	tests/test-ctl-openmetrics.sh \
	tests/test-ctl-prometheus.sh \
	tests/test-exporter.sh \
	tests/test-exporter-prometheus.sh \
	tests/test-exporter-hostile.sh \
	tests/test-ctl-events.sh \
	tests/test-ctl-set.sh \
	tests/test-ctl-set-wait.sh \
	tests/test-ctl-reset-peak.sh \
	tests/test-ctl-revert.sh \
	tests/test-ctl-reclaim.sh \
	tests/test-ctl-top.sh \
	tests/test-ctl-usage.sh \
	tests/test-ctl-completion.sh
TESTS += $(bus_tests)
dist_check_SCRIPTS += $(bus_tests)
EXTRA_DIST += tests/bus-lib.sh tests/http-trickle.py

# membrokerctl's pure helpers.
check_PROGRAMS += tests/test-ctl-util
TESTS += tests/test-ctl-util
tests_test_ctl_util_SOURCES = tests/test-ctl-util.c tools/ctl-util.c tools/ctl-util.h
tests_test_ctl_util_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
tests_test_ctl_util_CFLAGS = $(TESTS_CFLAGS)
tests_test_ctl_util_LDADD = $(TESTS_LIBS)
