# tests: libmembroker-sqlite, SQLite's page cache on broker pages.  A real
# SQLite application (tests/sqlite-client) on a real membrokerd, with
# membroker-load as the noisy neighbour.
check_PROGRAMS += tests/sqlite-client
tests_sqlite_client_SOURCES = %reldir%/sqlite-client.c
tests_sqlite_client_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sqlite
tests_sqlite_client_CFLAGS = $(AM_CFLAGS) $(SQLITE3_CFLAGS)
tests_sqlite_client_LDADD = sqlite/libmembroker-sqlite.la client/libmembroker.la $(SQLITE3_LIBS)
tests_sqlite_client_LDFLAGS = $(AM_LDFLAGS) -no-install

SQLITE_TESTS = \
	%reldir%/test-sqlite-pcache.sh \
	%reldir%/test-sqlite-reclaim.sh \
	%reldir%/test-sqlite-low.sh \
	%reldir%/test-sqlite-nomem.sh
TESTS += $(SQLITE_TESTS)
dist_check_SCRIPTS += $(SQLITE_TESTS)
EXTRA_DIST += %reldir%/sqlite-lib.sh
