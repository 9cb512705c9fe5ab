# The accounting core: pure C, no libevent, no sd-bus, no sockets.
noinst_LTLIBRARIES += daemon/core/libmbcore.la
daemon_core_libmbcore_la_SOURCES = \
	%reldir%/page_counter.c %reldir%/page_counter.h \
	%reldir%/protection.c %reldir%/protection.h \
	%reldir%/high_delay.c %reldir%/high_delay.h \
	%reldir%/rstat.c %reldir%/rstat.h \
	%reldir%/psi.c %reldir%/psi.h \
	%reldir%/tenant.c %reldir%/tenant.h \
	%reldir%/charge.c %reldir%/charge.h \
	%reldir%/reclaim_plan.c %reldir%/reclaim_plan.h \
	%reldir%/rightsize.c %reldir%/rightsize.h \
	%reldir%/tenant_map.c %reldir%/tenant_map.h \
	%reldir%/config.c %reldir%/config-tree.c %reldir%/config.h \
	%reldir%/delegate.c %reldir%/delegate.h
daemon_core_libmbcore_la_CFLAGS = $(AM_CFLAGS) $(INIH_CFLAGS)
daemon_core_libmbcore_la_LIBADD = common/libmbcommon.la $(INIH_LIBS)

# The unpadded page_counter layout, for the counter-layout benchmark (the kernel's page_counter field layout).
noinst_LTLIBRARIES += daemon/core/libmbcore-unpadded.la
daemon_core_libmbcore_unpadded_la_SOURCES = %reldir%/page_counter.c
daemon_core_libmbcore_unpadded_la_CFLAGS = $(AM_CFLAGS) -DPAGE_COUNTER_UNPADDED
