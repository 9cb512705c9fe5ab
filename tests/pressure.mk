# tests: memory pressure: cooperative reclaim, throttling above
# high, max -> reclaim -> OOM, protection, PSI.  Real daemon, real clients
# with shrinker-backed caches (membroker-load --cache, tests/pressure-client).

# A client driven line by line through a FIFO (alloc, cache, free, report).
check_PROGRAMS += tests/pressure-client
tests_pressure_client_SOURCES = %reldir%/pressure-client.c
tests_pressure_client_CFLAGS = $(AM_CFLAGS)
tests_pressure_client_LDADD = client/libmembroker.la
tests_pressure_client_LDFLAGS = $(AM_LDFLAGS) -no-install

# A client with a small hot set and a large cold cache (right-sizing).
check_PROGRAMS += tests/rightsize-client
tests_rightsize_client_SOURCES = %reldir%/rightsize-client.c
tests_rightsize_client_CFLAGS = $(AM_CFLAGS)
tests_rightsize_client_LDADD = client/libmembroker.la
tests_rightsize_client_LDFLAGS = $(AM_LDFLAGS) -no-install

PRESSURE_TESTS = \
	%reldir%/test-pressure-max-cache.sh \
	%reldir%/test-pressure-capacity.sh \
	%reldir%/test-pressure-capacity-reload.sh \
	%reldir%/test-pressure-oom.sh \
	%reldir%/test-pressure-skip-empty.sh \
	%reldir%/test-pressure-oom-kill.sh \
	%reldir%/test-pressure-oom-concurrent.sh \
	%reldir%/test-pressure-oom-group.sh \
	%reldir%/test-pressure-retry.sh \
	%reldir%/test-pressure-alloc-flags.sh \
	%reldir%/test-journal-fields.sh \
	%reldir%/test-pressure-high.sh \
	%reldir%/test-pressure-high-progress.sh \
	%reldir%/test-pressure-stall.sh \
	%reldir%/test-pressure-trigger.sh \
	%reldir%/test-pressure-trigger-restart.sh \
	%reldir%/test-pressure-protection.sh \
	%reldir%/test-pressure-low-events.sh \
	%reldir%/test-pressure-proactive.sh \
	%reldir%/test-pressure-stopped.sh \
	%reldir%/test-pressure-limit.sh \
	%reldir%/test-pressure-no-thread.sh \
	%reldir%/test-pressure-events.sh \
	%reldir%/test-pressure-psi.sh \
	%reldir%/test-pressure-psi-real.sh \
	%reldir%/test-pressure-rightsize.sh \
	%reldir%/test-pressure-lib-dead.sh
TESTS += $(PRESSURE_TESTS)
dist_check_SCRIPTS += $(PRESSURE_TESTS)
EXTRA_DIST += %reldir%/pressure-lib.sh
