# membrokerctl: the command-line front end over D-Bus,
# one file per concept (tools/ctl.h lists them).
bin_PROGRAMS += tools/membrokerctl
tools_membrokerctl_SOURCES = \
	%reldir%/membrokerctl.c %reldir%/ctl.h \
	%reldir%/ctl-bus.c %reldir%/ctl-bus.h \
	%reldir%/ctl-view.c \
	%reldir%/ctl-stat.c \
	%reldir%/ctl-pressure.c \
	%reldir%/ctl-openmetrics.c %reldir%/ctl-openmetrics.h \
	%reldir%/ctl-write.c \
	%reldir%/ctl-rightsize.c \
	%reldir%/ctl-util.c %reldir%/ctl-util.h
tools_membrokerctl_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS)
tools_membrokerctl_LDADD = common/libmbcommon.la $(SYSTEMD_LIBS)
dist_man1_MANS = %reldir%/membrokerctl.1 %reldir%/membroker-exporter.1

# membroker-exporter: /metrics over HTTP (libmicrohttpd) from the bus, with
# the families of membrokerctl stat --format=prometheus.
bin_PROGRAMS += tools/membroker-exporter
tools_membroker_exporter_SOURCES = \
	%reldir%/membroker-exporter.c %reldir%/ctl.h \
	%reldir%/exporter-http.c %reldir%/exporter-http.h \
	%reldir%/ctl-bus.c %reldir%/ctl-bus.h \
	%reldir%/ctl-openmetrics.c %reldir%/ctl-openmetrics.h \
	%reldir%/ctl-util.c %reldir%/ctl-util.h
tools_membroker_exporter_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS) $(MICROHTTPD_CFLAGS)
tools_membroker_exporter_LDADD = common/libmbcommon.la $(SYSTEMD_LIBS) $(MICROHTTPD_LIBS)

# bash completion of membrokerctl (tests/test-ctl-completion.sh), installed
# under the command's name.
EXTRA_DIST += %reldir%/membrokerctl.bash-completion
install-data-local: install-bash-completion
uninstall-local: uninstall-bash-completion
install-bash-completion:
	$(MKDIR_P) '$(DESTDIR)$(bashcompletiondir)'
	$(INSTALL_DATA) $(top_srcdir)/tools/membrokerctl.bash-completion '$(DESTDIR)$(bashcompletiondir)/membrokerctl'
uninstall-bash-completion:
	rm -f '$(DESTDIR)$(bashcompletiondir)/membrokerctl'
.PHONY: install-bash-completion uninstall-bash-completion

# membroker-run: run a program with its malloc() on a tenant (the shim is
# client/preload/).
bin_PROGRAMS += tools/membroker-run
tools_membroker_run_SOURCES = %reldir%/membroker-run.c
tools_membroker_run_CFLAGS = $(AM_CFLAGS) -DMB_PRELOAD_PATH='"$(libdir)/libmembroker-preload.so"'
tools_membroker_run_LDADD = client/libmembroker.la

# membroker-load: a real client that holds and churns memory (for demos,
# tests and benchmarks).
bin_PROGRAMS += tools/membroker-load
tools_membroker_load_SOURCES = %reldir%/membroker-load.c
tools_membroker_load_CFLAGS = $(AM_CFLAGS)
tools_membroker_load_LDADD = client/libmembroker.la common/libmbcommon.la
