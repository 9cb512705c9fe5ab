# tests: broker (membrokerd alone: --no-bus, raw frames, real processes)

# A client that speaks raw frames, so the tests control every byte.
check_PROGRAMS += tests/wire-client
tests_wire_client_SOURCES = tests/wire-client.c
tests_wire_client_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_wire_client_LDADD = proto/libmbproto.la $(PROTOBUF_C_LIBS)

BROKER_TESTS = \
	tests/test-broker-session.sh \
	tests/test-broker-badinput.sh \
	tests/test-broker-isolation.sh \
	tests/test-broker-crash.sh \
	tests/test-broker-limits.sh \
	tests/test-broker-admission.sh \
	tests/test-broker-cgroup.sh \
	tests/test-broker-concurrency.sh \
	tests/test-broker-start.sh \
	tests/test-broker-reload.sh
TESTS += $(BROKER_TESTS)
dist_check_SCRIPTS += $(BROKER_TESTS)
EXTRA_DIST += tests/broker-lib.sh
