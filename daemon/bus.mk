# D-Bus side of membrokerd: sources added to membrokerd by daemon/local.mk.
MEMBROKERD_BUS_SRCS = daemon/bus.c daemon/bus.h
