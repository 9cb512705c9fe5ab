# Tests.  Unit tests use Check; integration tests run the real daemon, a real
# private dbus-daemon and busctl.  Each area keeps its own fragment.
TEST_EXTENSIONS = .sh
# Every test runs bounded in time (tests/run-bounded): one that hangs fails
# with its processes' stacks in its log, and the suite goes on.
LOG_COMPILER = $(SHELL) $(abs_top_srcdir)/tests/run-bounded
SH_LOG_COMPILER = $(SHELL) $(abs_top_srcdir)/tests/run-bounded $(SHELL)
# MB_SANITIZED: the programs carry sanitizers (valgrind cannot run them).
if ENABLE_SANITIZERS
MB_SANITIZED = yes
else
MB_SANITIZED = no
endif
AM_TESTS_ENVIRONMENT = \
	top_builddir='$(abs_top_builddir)'; export top_builddir; \
	MB_SANITIZED='$(MB_SANITIZED)'; export MB_SANITIZED; \
	top_srcdir='$(abs_top_srcdir)'; export top_srcdir; \
	BUSCTL='$(BUSCTL)'; export BUSCTL; DBUS_DAEMON='$(DBUS_DAEMON)'; export DBUS_DAEMON;
TESTS_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
TESTS_LIBS = $(CHECK_LIBS)
EXTRA_DIST += %reldir%/lib.sh %reldir%/run-bounded
TESTS += %reldir%/test-run-bounded.sh
dist_check_SCRIPTS += %reldir%/test-run-bounded.sh
include tests/common.mk
include tests/core-counters.mk
include tests/core-stats.mk
include tests/broker.mk
include tests/client.mk
include tests/bus.mk
include tests/slab.mk
include tests/config.mk
include tests/bench.mk
include tests/service.mk
include tests/pressure.mk
include tests/attack.mk
include tests/layers.mk
include tests/sqlite.mk
