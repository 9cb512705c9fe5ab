# membrokerd: the broker's modules, its D-Bus API, its service modules and
# its man page.
sbin_PROGRAMS += daemon/membrokerd

# One folder per module, each on its floor (docs/architecture.md; checked
# by tests/test-layers.sh): core/ 0, base/ 1 (log, mailbox), arena/ 2,
# service/ 3 (sd_notify, state, restart, auth, per-uid caps, workers),
# reclaim/ 4, conn/ 5, manager/ 6, bus/ 7, main.c on top.  Headers are
# included by their bare names, through these folders.
DAEMON_CPPFLAGS = -I$(top_srcdir)/daemon -I$(top_srcdir)/daemon/base -I$(top_srcdir)/daemon/arena -I$(top_srcdir)/daemon/service \
	-I$(top_srcdir)/daemon/reclaim -I$(top_srcdir)/daemon/conn -I$(top_srcdir)/daemon/manager \
	-I$(top_srcdir)/daemon/bus

# The broker's own modules, in a convenience library so that unit tests link
# them without main() (tests/test-mailbox does).
noinst_LTLIBRARIES += daemon/libmbbroker.la
daemon_libmbbroker_la_SOURCES = \
	%reldir%/arena/arena.c %reldir%/arena/arena.h %reldir%/arena/arena-tmpfs.c %reldir%/arena/arena-hugetlb.c \
	%reldir%/reclaim/audit.c %reldir%/reclaim/audit.h \
	%reldir%/service/auth.c %reldir%/service/auth.h \
	%reldir%/base/log.c %reldir%/base/log.h \
	%reldir%/manager/config-files.c %reldir%/manager/config-files.h \
	%reldir%/service/broker.h \
	%reldir%/conn/conn.c %reldir%/conn/conn.h %reldir%/conn/conn-internal.h \
	%reldir%/conn/conn-hello.c %reldir%/conn/conn-charge.c %reldir%/conn/conn-pressure.c \
	%reldir%/service/guard.c %reldir%/service/guard.h \
	%reldir%/conn/session.c %reldir%/conn/session.h \
	%reldir%/service/worker.c %reldir%/service/worker.h \
	%reldir%/manager/manager.c %reldir%/manager/manager.h %reldir%/manager/manager-broker.c \
	%reldir%/base/mailbox.c %reldir%/base/mailbox.h \
	%reldir%/conn/client-events.c %reldir%/conn/client-events.h \
	%reldir%/manager/manager-reload.c %reldir%/manager/manager-dump.c \
	%reldir%/reclaim/rightsizer.c %reldir%/reclaim/rightsizer.h \
	%reldir%/reclaim/reclaim.c %reldir%/reclaim/reclaim.h %reldir%/reclaim/reclaim-internal.h \
	%reldir%/reclaim/reclaim-job.c %reldir%/reclaim/reclaim-req.c %reldir%/reclaim/reclaim-oom.c \
	%reldir%/reclaim/pressure.c %reldir%/reclaim/pressure.h \
	%reldir%/service/tenant_state.h
daemon_libmbbroker_la_CPPFLAGS = $(AM_CPPFLAGS) $(DAEMON_CPPFLAGS)
daemon_libmbbroker_la_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS) $(CGROUP_CFLAGS) \
	$(SYSTEMD_CFLAGS)

# The D-Bus side (the org.membroker1 API): compiled into membrokerd itself,
# which links $(SYSTEMD_LIBS).
MEMBROKERD_BUS_SRCS = \
	%reldir%/bus/bus.c %reldir%/bus/bus.h %reldir%/bus/bus-internal.h \
	%reldir%/bus/bus-manager.c \
	%reldir%/bus/bus-tenant.c \
	%reldir%/bus/bus-pressure.c \
	%reldir%/bus/bus-dump.c \
	%reldir%/bus/bus-stat.c

daemon_membrokerd_SOURCES = %reldir%/main.c $(MEMBROKERD_BUS_SRCS)
daemon_membrokerd_CPPFLAGS = $(AM_CPPFLAGS) $(DAEMON_CPPFLAGS)
daemon_membrokerd_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS) $(SYSTEMD_CFLAGS)
daemon_membrokerd_LDADD = daemon/libmbbroker.la daemon/core/libmbcore.la proto/libmbproto.la \
	$(LIBEVENT_LIBS) $(PROTOBUF_C_LIBS) $(CGROUP_LIBS) $(SYSTEMD_LIBS) $(INIH_LIBS)

# membrokerd's service modules: sd_notify/watchdog/fd store (service.c),
# tenant limits layered over the configuration (state.c), and the restart
# that keeps every arena and page ownership (restart.c).
daemon_libmbbroker_la_SOURCES += \
	%reldir%/service/service.c %reldir%/service/service.h \
	%reldir%/service/state.c %reldir%/service/state.h \
	%reldir%/service/restart.c %reldir%/service/restart.h \
	%reldir%/manager/manager-service.c %reldir%/manager/manager-service.h

dist_man8_MANS = %reldir%/membrokerd.8
