# tests: slab (owned by the slab work)

# Unit tests of the slab caches (client/slab/slab.h) against a fake client (no
# daemon).
check_PROGRAMS += tests/test-slab
TESTS += tests/test-slab
tests_test_slab_SOURCES = tests/test-slab.c tests/slab-fake-client.c tests/slab-fake-client.h \
	$(SLAB_SOURCES) client/core/pcpu_lock.c client/core/pcpu_lock.h
tests_test_slab_CFLAGS = $(TESTS_CFLAGS)
tests_test_slab_LDADD = $(TESTS_LIBS)

# White-box test of the per-CPU slab lock (rseq fast path vs remote lockers).
check_PROGRAMS += tests/test-slab-lock
TESTS += tests/test-slab-lock
tests_test_slab_lock_SOURCES = tests/test-slab-lock.c tests/slab-fake-client.c tests/slab-fake-client.h \
	$(SLAB_SOURCES) client/core/pcpu_lock.c client/core/pcpu_lock.h
tests_test_slab_lock_CFLAGS = $(TESTS_CFLAGS)
tests_test_slab_lock_LDADD = $(TESTS_LIBS)

# Integration: slab-client, a real client of a real membrokerd.
check_PROGRAMS += tests/slab-client
tests_slab_client_SOURCES = tests/slab-client.c
tests_slab_client_LDADD = client/libmembroker.la

# Integration: remote frees and drains against the fast paths on every CPU.
check_PROGRAMS += tests/slab-remote
tests_slab_remote_SOURCES = tests/slab-remote.c
tests_slab_remote_LDADD = client/libmembroker.la

SLAB_INTEGRATION_TESTS = \
	tests/test-slab-concurrency.sh \
	tests/test-slab-stats.sh \
	tests/test-slab-tenant-stat.sh \
	tests/test-slab-shrink.sh \
	tests/test-slab-debug.sh \
	tests/test-slab-destroy.sh \
	tests/test-slab-debug-env.sh \
	tests/test-slab-norseq.sh \
	tests/test-slab-remote.sh \
	tests/test-slab-reclaim-proactive.sh \
	tests/test-slab-reclaim-max.sh \
	tests/test-slab-reclaim-unreclaimable.sh \
	tests/test-slab-reclaim-debug.sh
TESTS += $(SLAB_INTEGRATION_TESTS)
dist_check_SCRIPTS += $(SLAB_INTEGRATION_TESTS)
EXTRA_DIST += tests/slab-lib.sh
