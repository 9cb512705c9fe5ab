# membrokerctl: the command-line front end over D-Bus,
# one file per concept (tools/ctl.h lists them).
bin_PROGRAMS += tools/membrokerctl
tools_membrokerctl_SOURCES = \
	%reldir%/membrokerctl.c %reldir%/ctl.h \
	%reldir%/ctl-bus.c %reldir%/ctl-bus.h \
	%reldir%/ctl-view.c \
	%reldir%/ctl-stat.c \
	%reldir%/ctl-openmetrics.c %reldir%/ctl-openmetrics.h \
	%reldir%/ctl-write.c \
	%reldir%/ctl-util.c %reldir%/ctl-util.h
tools_membrokerctl_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS)
tools_membrokerctl_LDADD = common/libmbcommon.la $(SYSTEMD_LIBS)
dist_man1_MANS = %reldir%/membrokerctl.1
