# systemd integration: the unit, the D-Bus policy and the activation file
# (membrokerd's service modules are built by daemon/local.mk, libmembroker's
# reconnect by client/local.mk).

systemdsystemunit_DATA = systemd/membroker.service systemd/membroker-exporter.service \
	%reldir%/membroker-exporter.socket
dbussystemconf_DATA = %reldir%/org.membroker1.conf
dbussystemservice_DATA = systemd/org.membroker1.service
EXTRA_DIST += %reldir%/membroker.sysusers %reldir%/membroker.service.in %reldir%/org.membroker1.service.in %reldir%/org.membroker1.conf \
	%reldir%/membroker-exporter.service.in %reldir%/membroker-exporter.socket
CLEANFILES += systemd/membroker.service systemd/org.membroker1.service systemd/membroker-exporter.service

# Installed paths are substituted at make time (they may use ${prefix}).
mb_unit_subst = sed -e 's|@sbindir[@]|$(sbindir)|g' -e 's|@bindir[@]|$(bindir)|g' -e 's|@sysconfdir[@]|$(sysconfdir)|g'

systemd/membroker.service: $(top_srcdir)/systemd/membroker.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	$(mb_unit_subst) $(top_srcdir)/systemd/membroker.service.in >$@

systemd/org.membroker1.service: $(top_srcdir)/systemd/org.membroker1.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	$(mb_unit_subst) $(top_srcdir)/systemd/org.membroker1.service.in >$@

systemd/membroker-exporter.service: $(top_srcdir)/systemd/membroker-exporter.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	$(mb_unit_subst) $(top_srcdir)/systemd/membroker-exporter.service.in >$@

# The system users membroker.service and membroker-exporter.service run as
# (installed as sysusers.d/membroker.conf; a package runs systemd-sysusers).
install-data-local: install-sysusers
install-sysusers:
	$(MKDIR_P) '$(DESTDIR)$(sysusersdir)'
	$(INSTALL_DATA) $(top_srcdir)/systemd/membroker.sysusers '$(DESTDIR)$(sysusersdir)/membroker.conf'
uninstall-local: uninstall-sysusers
uninstall-sysusers:
	rm -f '$(DESTDIR)$(sysusersdir)/membroker.conf'
.PHONY: install-sysusers uninstall-sysusers
