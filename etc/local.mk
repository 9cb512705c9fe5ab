# etc/: the shipped configuration, installed to $(sysconfdir)/membroker/.
# membroker.conf lists every default commented out; the example tenant is
# named *.conf.example so that it is installed but not active.
membrokerconfdir = $(sysconfdir)/membroker
dist_membrokerconf_DATA = %reldir%/membroker.conf
membrokertenantsdir = $(membrokerconfdir)/tenants.d
dist_membrokertenants_DATA = %reldir%/tenants.d/example.conf.example
