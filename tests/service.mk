# tests: the system service (configuration lifecycle, persistence, the
# systemd unit, sd_notify, the fd-store restart).

# Plays systemd's part: notify socket, fd store, $LISTEN_FDS, watchdog.
check_PROGRAMS += tests/fake-systemd
tests_fake_systemd_SOURCES = tests/fake-systemd.c
tests_fake_systemd_CFLAGS = $(AM_CFLAGS)

check_PROGRAMS += tests/test-state
TESTS += tests/test-state
tests_test_state_SOURCES = tests/test-state.c daemon/service/state.c daemon/service/state.h
tests_test_state_CPPFLAGS = $(AM_CPPFLAGS) $(DAEMON_CPPFLAGS)
tests_test_state_CFLAGS = $(TESTS_CFLAGS)
tests_test_state_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS)

SERVICE_TESTS = \
	tests/test-service-install.sh \
	tests/test-man-pages.sh \
	tests/test-service-dbus-policy.sh \
	tests/test-service-dbus-policy-walk.sh \
	tests/test-service-syscalls.sh \
	tests/test-service-notify.sh \
	tests/test-service-persist.sh \
	tests/test-service-state-odd.sh \
	tests/test-service-restart-term.sh \
	tests/test-service-restart-kill.sh \
	tests/test-service-restart-hugetlb.sh \
	tests/test-service-restart-grace.sh \
	tests/test-service-systemd.sh
TESTS += $(SERVICE_TESTS)
dist_check_SCRIPTS += $(SERVICE_TESTS)
EXTRA_DIST += tests/service-lib.sh tests/systemd-pid1.sh

# The restart side of the arena: owner table in a memfd, restore, transfer.
check_PROGRAMS += tests/test-arena-restore
TESTS += tests/test-arena-restore
tests_test_arena_restore_SOURCES = tests/test-arena-restore.c daemon/arena/arena.c daemon/arena/arena-tmpfs.c daemon/arena/arena-hugetlb.c daemon/arena/arena.h
tests_test_arena_restore_CPPFLAGS = $(AM_CPPFLAGS) $(DAEMON_CPPFLAGS)
tests_test_arena_restore_CFLAGS = $(TESTS_CFLAGS)
tests_test_arena_restore_LDADD = $(TESTS_LIBS)
