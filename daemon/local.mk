# membrokerd: the broker's modules, its D-Bus API, its service modules and
# its man page.
sbin_PROGRAMS += daemon/membrokerd

# The broker's own modules, in a convenience library so that unit tests link
# them without main() (tests/test-mailbox does).
noinst_LTLIBRARIES += daemon/libmbbroker.la
daemon_libmbbroker_la_SOURCES = \
	%reldir%/arena.c %reldir%/arena.h %reldir%/arena-tmpfs.c %reldir%/arena-hugetlb.c \
	%reldir%/audit.c %reldir%/audit.h \
	%reldir%/auth.c %reldir%/auth.h \
	%reldir%/log.c %reldir%/log.h \
	%reldir%/config-files.c %reldir%/config-files.h \
	%reldir%/broker.h \
	%reldir%/conn.c %reldir%/conn.h %reldir%/conn-internal.h \
	%reldir%/conn-hello.c %reldir%/conn-charge.c %reldir%/conn-pressure.c \
	%reldir%/guard.c %reldir%/guard.h \
	%reldir%/session.c %reldir%/session.h \
	%reldir%/worker.c %reldir%/worker.h \
	%reldir%/manager.c %reldir%/manager.h %reldir%/manager-broker.c \
	%reldir%/mailbox.c %reldir%/mailbox.h \
	%reldir%/client-events.c %reldir%/client-events.h \
	%reldir%/manager-reload.c %reldir%/manager-dump.c \
	%reldir%/rightsizer.c %reldir%/rightsizer.h \
	%reldir%/reclaim.c %reldir%/reclaim.h %reldir%/reclaim-internal.h \
	%reldir%/reclaim-job.c %reldir%/reclaim-req.c %reldir%/reclaim-oom.c \
	%reldir%/pressure.c %reldir%/pressure.h \
	%reldir%/tenant_state.h
daemon_libmbbroker_la_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS) $(CGROUP_CFLAGS) \
	$(SYSTEMD_CFLAGS)

# The D-Bus side (the org.membroker1 API): compiled into membrokerd itself,
# which links $(SYSTEMD_LIBS).
MEMBROKERD_BUS_SRCS = \
	%reldir%/bus.c %reldir%/bus.h %reldir%/bus-internal.h \
	%reldir%/bus-manager.c \
	%reldir%/bus-tenant.c \
	%reldir%/bus-pressure.c \
	%reldir%/bus-dump.c \
	%reldir%/bus-stat.c

daemon_membrokerd_SOURCES = %reldir%/main.c $(MEMBROKERD_BUS_SRCS)
daemon_membrokerd_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS) $(SYSTEMD_CFLAGS)
daemon_membrokerd_LDADD = daemon/libmbbroker.la daemon/core/libmbcore.la proto/libmbproto.la \
	$(LIBEVENT_LIBS) $(PROTOBUF_C_LIBS) $(CGROUP_LIBS) $(SYSTEMD_LIBS) $(INIH_LIBS)

# membrokerd's service modules: sd_notify/watchdog/fd store (service.c),
# tenant limits layered over the configuration (state.c), and the restart
# that keeps every arena and page ownership (restart.c).
daemon_libmbbroker_la_SOURCES += \
	%reldir%/service.c %reldir%/service.h \
	%reldir%/state.c %reldir%/state.h \
	%reldir%/restart.c %reldir%/restart.h \
	%reldir%/manager-service.c %reldir%/manager-service.h

dist_man8_MANS = %reldir%/membrokerd.8
