# membrokerd (owned by the broker work; bus sources come from daemon/bus.mk)
sbin_PROGRAMS += daemon/membrokerd

# The broker's own modules, in a convenience library so that unit tests link
# them without main().
noinst_LTLIBRARIES += daemon/libmbbroker.la
daemon_libmbbroker_la_SOURCES = \
	%reldir%/arena.c %reldir%/arena.h %reldir%/arena-tmpfs.c \
	%reldir%/audit.c %reldir%/audit.h \
	%reldir%/auth.c %reldir%/auth.h \
	%reldir%/log.c %reldir%/log.h \
	%reldir%/conn.c %reldir%/conn.h \
	%reldir%/worker.c %reldir%/worker.h \
	%reldir%/manager.c %reldir%/manager.h \
	%reldir%/reclaim.c %reldir%/reclaim.h \
	%reldir%/pressure.c %reldir%/pressure.h \
	%reldir%/tenant_state.h
daemon_libmbbroker_la_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS) $(CGROUP_CFLAGS) \
	$(SYSTEMD_CFLAGS)

daemon_membrokerd_SOURCES = %reldir%/main.c $(MEMBROKERD_BUS_SRCS)
daemon_membrokerd_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS) $(SYSTEMD_CFLAGS)
daemon_membrokerd_LDADD = daemon/libmbbroker.la daemon/core/libmbcore.la proto/libmbproto.la \
	$(LIBEVENT_LIBS) $(PROTOBUF_C_LIBS) $(CGROUP_LIBS) $(SYSTEMD_LIBS) $(INIH_LIBS)
