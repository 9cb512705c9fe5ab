# libmembroker, membroker-load and the example (owned by the client work)
include_HEADERS += %reldir%/membroker.h
noinst_HEADERS += %reldir%/mb_internal.h %reldir%/conn.h %reldir%/cpu.h %reldir%/stock.h

# The client library.  Only mb_[a-z]* symbols are exported (the protobuf-c
# descriptors of the embedded wire code, mb__*, and the conn_* transport stay
# private); client/slab.mk adds slab.c to the same library.
lib_LTLIBRARIES += client/libmembroker.la
client_libmembroker_la_SOURCES = %reldir%/client.c %reldir%/conn.c
client_libmembroker_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
client_libmembroker_la_LIBADD = proto/libmbproto.la $(PROTOBUF_C_LIBS)
client_libmembroker_la_LDFLAGS = $(AM_LDFLAGS) -pthread -version-info 0:0:0 \
	-export-symbols-regex '^mb_[a-z]'

pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = %reldir%/membroker.pc

# membroker-load: a real client that holds and churns memory (design.md §1).
bin_PROGRAMS += client/membroker-load
client_membroker_load_SOURCES = %reldir%/membroker-load.c
client_membroker_load_CFLAGS = $(AM_CFLAGS)
client_membroker_load_LDADD = client/libmembroker.la common/libmbcommon.la

# The README example.
noinst_PROGRAMS += client/example
client_example_SOURCES = %reldir%/example.c
client_example_CFLAGS = $(AM_CFLAGS)
client_example_LDADD = client/libmembroker.la

# slab caches (client/slab.c), in libmembroker.
client_libmembroker_la_SOURCES += %reldir%/slab.c

# libmembroker's side of the restart: reconnect and re-claim (client/reconnect.h).
client_libmembroker_la_SOURCES += %reldir%/reconnect.c %reldir%/reconnect.h
