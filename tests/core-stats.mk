# tests: core-stats -- rstat, the tenant tree and the configuration
# (daemon/core/rstat.c, tenant.c, tenant_map.c, config.c, delegate.c).
check_PROGRAMS += tests/test-rstat tests/test-tenant tests/test-config tests/test-config-parse tests/test-delegate
TESTS += tests/test-rstat tests/test-tenant tests/test-config tests/test-config-parse tests/test-delegate

tests_test_rstat_SOURCES = %reldir%/test-rstat.c
tests_test_rstat_CFLAGS = $(TESTS_CFLAGS)
tests_test_rstat_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS)

tests_test_tenant_SOURCES = %reldir%/test-tenant.c
tests_test_tenant_CFLAGS = $(TESTS_CFLAGS)
tests_test_tenant_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS)

tests_test_config_SOURCES = %reldir%/test-config.c daemon/manager/config-files.c daemon/manager/config-files.h daemon/base/log.c \
	daemon/base/log.h
tests_test_config_CPPFLAGS = $(AM_CPPFLAGS) $(DAEMON_CPPFLAGS)
tests_test_config_CFLAGS = $(TESTS_CFLAGS) $(SYSTEMD_CFLAGS)
tests_test_config_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS) $(SYSTEMD_LIBS)

tests_test_config_parse_SOURCES = %reldir%/test-config-parse.c
tests_test_config_parse_CFLAGS = $(TESTS_CFLAGS)
tests_test_config_parse_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS)

tests_test_delegate_SOURCES = %reldir%/test-delegate.c
tests_test_delegate_CFLAGS = $(TESTS_CFLAGS)
tests_test_delegate_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS)
