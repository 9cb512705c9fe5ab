# libmembroker, membroker-load and the example (owned by the client work)
include_HEADERS += %reldir%/membroker.h
noinst_HEADERS += %reldir%/mb_internal.h
