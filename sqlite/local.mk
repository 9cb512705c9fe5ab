# libmembroker-sqlite: SQLite's page cache (SQLITE_CONFIG_PCACHE2) on
# broker pages, with a shrinker that gives unpinned pages back under
# pressure.  Only mb_sqlite_* is exported.
include_HEADERS += %reldir%/membroker-sqlite.h
lib_LTLIBRARIES += sqlite/libmembroker-sqlite.la
sqlite_libmembroker_sqlite_la_SOURCES = %reldir%/pcache.c
sqlite_libmembroker_sqlite_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sqlite
sqlite_libmembroker_sqlite_la_CFLAGS = $(AM_CFLAGS) $(SQLITE3_CFLAGS)
sqlite_libmembroker_sqlite_la_LIBADD = client/libmembroker.la $(SQLITE3_LIBS)
sqlite_libmembroker_sqlite_la_LDFLAGS = $(AM_LDFLAGS) -pthread -version-info 0:0:0 \
	-export-symbols-regex '^mb_sqlite_'
pkgconfig_DATA += %reldir%/membroker-sqlite.pc
