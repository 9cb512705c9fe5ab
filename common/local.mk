noinst_HEADERS += %reldir%/macros.h %reldir%/mb_stats_abi.h %reldir%/mb_limits.h

# Shared by the daemon, the tools and membroker-load: one home each for the
# size parser and the table of memory.stat/memory.events keys.  -fPIC: it
# may end up in a shared object.
noinst_LTLIBRARIES += common/libmbcommon.la
common_libmbcommon_la_SOURCES = \
	%reldir%/mb_size.c %reldir%/mb_size.h \
	%reldir%/mb_stat_keys.c %reldir%/mb_stat_keys.h
common_libmbcommon_la_CFLAGS = $(AM_CFLAGS) -fPIC
