# tests: common -- what the daemon, the library and the tools share
# (common/): the size parser and the table of stat keys.
check_PROGRAMS += tests/test-mb-size tests/test-mb-stat-keys
TESTS += tests/test-mb-size tests/test-mb-stat-keys
tests_test_mb_size_SOURCES = tests/test-mb-size.c
tests_test_mb_size_CFLAGS = $(TESTS_CFLAGS)
tests_test_mb_size_LDADD = common/libmbcommon.la $(TESTS_LIBS)
tests_test_mb_stat_keys_SOURCES = tests/test-mb-stat-keys.c
tests_test_mb_stat_keys_CFLAGS = $(TESTS_CFLAGS)
tests_test_mb_stat_keys_LDADD = common/libmbcommon.la $(TESTS_LIBS)
