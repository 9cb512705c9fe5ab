# Manual pages that belong to no one program: the configuration files, the
# client library, the bus API, membroker-load; and the D-Bus interface files
# (what the daemon introspects, checked by tests/test-bus-interfaces-xml.sh).
dist_man1_MANS += %reldir%/membroker-load.1 %reldir%/membroker-run.1
dist_man3_MANS = %reldir%/libmembroker.3 %reldir%/libmembroker-sqlite.3
dist_man5_MANS = %reldir%/org.membroker1.5
man5_MANS = man/membroker.conf.5
EXTRA_DIST += %reldir%/membroker.conf.5.in
CLEANFILES += man/membroker.conf.5

# membroker.conf(5): its key reference is the CONFIGURATION section of
# membrokerd(8), so that each key is documented in one place.
man/membroker.conf.5: $(top_srcdir)/man/membroker.conf.5.in $(top_srcdir)/daemon/membrokerd.8 Makefile
	$(AM_V_GEN)$(MKDIR_P) man && \
	$(AWK) '/^\.SH CONFIGURATION/ { on = 1; next } on && /^\.SH / { exit } on { print }' \
		$(top_srcdir)/daemon/membrokerd.8 >$@.section && \
	$(AWK) -v section=$@.section '/^@CONFIGURATION@$$/ { while ((getline l <section) > 0) print l; next } { print }' \
		$(top_srcdir)/man/membroker.conf.5.in | sed -e 's|@SYSCONFDIR[@]|$(sysconfdir)|g' >$@.tmp && \
	rm -f $@.section && mv $@.tmp $@

dbusinterfacesdir = $(datadir)/dbus-1/interfaces
dist_dbusinterfaces_DATA = dbus/org.membroker1.Manager.xml dbus/org.membroker1.Tenant.xml
