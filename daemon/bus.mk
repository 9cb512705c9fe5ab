# D-Bus side of membrokerd (the org.membroker1 API, design.md §6): sources
# added to membrokerd by daemon/local.mk, which also links $(SYSTEMD_LIBS).
MEMBROKERD_BUS_SRCS = \
	daemon/bus.c daemon/bus.h daemon/bus-internal.h \
	daemon/bus-manager.c \
	daemon/bus-tenant.c \
	daemon/bus-stat.c
