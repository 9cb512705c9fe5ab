# tests: broker (membrokerd alone: --no-bus, raw frames, real processes)

# A client that speaks raw frames, so the tests control every byte.
check_PROGRAMS += tests/wire-client
tests_wire_client_SOURCES = tests/wire-client.c tests/wire-client-conn.c tests/wire-client.h
tests_wire_client_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_wire_client_LDADD = proto/libmbproto.la $(PROTOBUF_C_LIBS)

# Unit test of the arena (free-index pool, owner table, hole punching).
check_PROGRAMS += tests/test-arena
TESTS += tests/test-arena
tests_test_arena_SOURCES = tests/test-arena.c daemon/arena/arena.c daemon/arena/arena-tmpfs.c daemon/arena/arena-hugetlb.c daemon/arena/arena.h
tests_test_arena_CPPFLAGS = $(AM_CPPFLAGS) $(DAEMON_CPPFLAGS)
tests_test_arena_CFLAGS = $(TESTS_CFLAGS)
tests_test_arena_LDADD = $(TESTS_LIBS)

# Unit test of the cross-thread mailbox, linked from the daemon's own
# convenience library (libmbbroker) with real threads and event bases.
check_PROGRAMS += tests/test-mailbox
TESTS += tests/test-mailbox
tests_test_mailbox_SOURCES = tests/test-mailbox.c
tests_test_mailbox_CPPFLAGS = $(AM_CPPFLAGS) $(DAEMON_CPPFLAGS)
tests_test_mailbox_CFLAGS = $(TESTS_CFLAGS) $(LIBEVENT_CFLAGS)
tests_test_mailbox_LDADD = daemon/libmbbroker.la daemon/core/libmbcore.la proto/libmbproto.la \
	$(LIBEVENT_LIBS) $(PROTOBUF_C_LIBS) $(CGROUP_LIBS) $(SYSTEMD_LIBS) $(INIH_LIBS) $(TESTS_LIBS)

BROKER_TESTS = \
	tests/test-broker-session.sh \
	tests/test-broker-stop-keeps-data.sh \
	tests/test-broker-badinput.sh \
	tests/test-broker-contig.sh \
	tests/test-broker-outside.sh \
	tests/test-broker-isolation.sh \
	tests/test-broker-deferred-punch.sh \
	tests/test-broker-hugepages.sh \
	tests/test-broker-hugetlbfs.sh \
	tests/test-broker-crash.sh \
	tests/test-broker-limits.sh \
	tests/test-broker-admission.sh \
	tests/test-broker-cgroup.sh \
	tests/test-broker-concurrency.sh \
	tests/test-broker-start.sh \
	tests/test-broker-reload.sh \
	tests/test-broker-load.sh \
	tests/test-broker-chaos.sh \
	tests/test-attack-socket-handoff.sh \
	tests/test-attack-conn-flood.sh \
	tests/test-attack-half-frame.sh \
	tests/test-attack-half-open.sh \
	tests/test-soak-hostile.sh \
	tests/test-attack-dead-peer.sh
TESTS += $(BROKER_TESTS)
dist_check_SCRIPTS += $(BROKER_TESTS)
EXTRA_DIST += tests/broker-lib.sh

# libFuzzer target for the frame decoder: ./configure --enable-fuzz CC=clang
if ENABLE_FUZZ
noinst_PROGRAMS += tests/fuzz-wire
tests_fuzz_wire_SOURCES = tests/fuzz-wire.c proto/wire.c proto/wire.h
nodist_tests_fuzz_wire_SOURCES = proto/membroker.pb-c.c proto/membroker.pb-c.h
tests_fuzz_wire_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_wire_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_wire_LDADD = $(PROTOBUF_C_LIBS)
check_PROGRAMS += tests/fuzz-wire-seeds
tests_fuzz_wire_seeds_SOURCES = tests/fuzz-wire-seeds.c proto/wire.c proto/wire.h
nodist_tests_fuzz_wire_seeds_SOURCES = proto/membroker.pb-c.c proto/membroker.pb-c.h
tests_fuzz_wire_seeds_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_fuzz_wire_seeds_LDADD = $(PROTOBUF_C_LIBS)
TESTS += tests/test-fuzz-wire.sh
endif
EXTRA_DIST += tests/fuzz-wire.c tests/fuzz-wire-seeds.c tests/test-fuzz-wire.sh

# The long forms: the chaos test's 1,000 random kill -9 of churning
# clients, and hostile peers for 5 minutes with 100,000 half-open
# connections.
soak: all $(check_PROGRAMS)
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' MB_CHAOS_KILLS=1000 \
		MB_CHAOS_CHECK_EVERY=50 $(SHELL) $(abs_top_srcdir)/tests/test-broker-chaos.sh
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' MB_SOAK_SEC=300 \
		MB_SOAK_FLOOD=100000 $(SHELL) $(abs_top_srcdir)/tests/test-soak-hostile.sh
.PHONY: soak
