# systemd unit, D-Bus policy and activation file (design.md §8).
systemdsystemunit_DATA = systemd/membroker.service
dbussystemconf_DATA = %reldir%/org.membroker1.conf
dbussystemservice_DATA = systemd/org.membroker1.service
EXTRA_DIST += %reldir%/membroker.service.in %reldir%/org.membroker1.service.in %reldir%/org.membroker1.conf
CLEANFILES += systemd/membroker.service systemd/org.membroker1.service

systemd/membroker.service: $(top_srcdir)/systemd/membroker.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	sed -e 's|@sbindir[@]|$(sbindir)|g' $(top_srcdir)/systemd/membroker.service.in >$@

systemd/org.membroker1.service: $(top_srcdir)/systemd/org.membroker1.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	sed -e 's|@sbindir[@]|$(sbindir)|g' $(top_srcdir)/systemd/org.membroker1.service.in >$@
