# systemd integration (design.md §8): the unit, the D-Bus policy and
# activation file, membrokerd's service modules and its man page.

# membrokerd's service modules: sd_notify/watchdog/fd store (service.c),
# tenant limits layered over the configuration (state.c), and the restart
# that keeps every arena and page ownership (restart.c).
daemon_libmbbroker_la_SOURCES += \
	daemon/service.c daemon/service.h \
	daemon/state.c daemon/state.h \
	daemon/restart.c daemon/restart.h \
	daemon/manager-service.c daemon/manager-service.h

dist_man8_MANS = daemon/membrokerd.8

systemdsystemunit_DATA = systemd/membroker.service
dbussystemconf_DATA = %reldir%/org.membroker1.conf
dbussystemservice_DATA = systemd/org.membroker1.service
EXTRA_DIST += %reldir%/membroker.service.in %reldir%/org.membroker1.service.in %reldir%/org.membroker1.conf
CLEANFILES += systemd/membroker.service systemd/org.membroker1.service

# Installed paths are substituted at make time (they may use ${prefix}).
mb_unit_subst = sed -e 's|@sbindir[@]|$(sbindir)|g' -e 's|@sysconfdir[@]|$(sysconfdir)|g'

systemd/membroker.service: $(top_srcdir)/systemd/membroker.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	$(mb_unit_subst) $(top_srcdir)/systemd/membroker.service.in >$@

systemd/org.membroker1.service: $(top_srcdir)/systemd/org.membroker1.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	$(mb_unit_subst) $(top_srcdir)/systemd/org.membroker1.service.in >$@
