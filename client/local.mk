# libmembroker, membroker-load and the example (owned by the client work)
include_HEADERS += %reldir%/membroker.h
noinst_HEADERS += %reldir%/mb_internal.h

# The client library.  Only mb_[a-z]* symbols are exported (the protobuf-c
# descriptors of the embedded wire code, mb__*, and the modules' internal
# symbols stay private); the slab caches below are part of the same
# library.  By concept: the client object; the per-CPU lock; the stocks and
# page fast paths; the request engine; answers to Reclaim/Drain and the
# shrinkers; connecting; surviving a daemon restart; the transport.
lib_LTLIBRARIES += client/libmembroker.la
client_libmembroker_la_SOURCES = \
	%reldir%/client.c %reldir%/client.h \
	%reldir%/pcpu_lock.c %reldir%/pcpu_lock.h \
	%reldir%/stock.c %reldir%/stock.h %reldir%/stock_refill.c \
	%reldir%/session.c %reldir%/session.h \
	%reldir%/pressure.c \
	%reldir%/reclaim.c %reldir%/reclaim.h \
	%reldir%/connect.c %reldir%/connect.h \
	%reldir%/reconnect.c %reldir%/reconnect.h \
	%reldir%/wire_conn.c %reldir%/wire_conn.h \
	%reldir%/malloc.c \
	%reldir%/malloc_mid.c \
	%reldir%/kmalloc.h
client_libmembroker_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
client_libmembroker_la_LIBADD = proto/libmbproto.la $(PROTOBUF_C_LIBS)
client_libmembroker_la_LDFLAGS = $(AM_LDFLAGS) -pthread -version-info 0:0:0 \
	-export-symbols-regex '^mb_[a-z]'

# libmembroker-preload.so: the library's sources again (compiled for this
# module) plus the malloc shim; exports the malloc family only.
lib_LTLIBRARIES += client/libmembroker-preload.la
client_libmembroker_preload_la_SOURCES = $(client_libmembroker_la_SOURCES) %reldir%/preload.c
client_libmembroker_preload_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) -DMB_PRELOAD
client_libmembroker_preload_la_LIBADD = proto/libmbproto.la $(PROTOBUF_C_LIBS) -ldl
client_libmembroker_preload_la_LDFLAGS = $(AM_LDFLAGS) -pthread -module -avoid-version -shared \
	-export-symbols-regex '^(malloc|free|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|malloc_usable_size)$$'

# membroker-run: run a program with its malloc() on a tenant.
bin_PROGRAMS += client/membroker-run
client_membroker_run_SOURCES = %reldir%/membroker-run.c
client_membroker_run_CFLAGS = $(AM_CFLAGS) -DMB_PRELOAD_PATH='"$(libdir)/libmembroker-preload.so"'
client_membroker_run_LDADD = client/libmembroker.la

pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = %reldir%/membroker.pc

# membroker-load: a real client that holds and churns memory (for demos, tests and benchmarks).
bin_PROGRAMS += client/membroker-load
client_membroker_load_SOURCES = %reldir%/membroker-load.c
client_membroker_load_CFLAGS = $(AM_CFLAGS)
client_membroker_load_LDADD = client/libmembroker.la common/libmbcommon.la

# The README example.
noinst_PROGRAMS += client/example
client_example_SOURCES = %reldir%/example.c
client_example_CFLAGS = $(AM_CFLAGS)
client_example_LDADD = client/libmembroker.la

# Slab caches on broker pages (client/slab.h), in libmembroker.  The unit
# tests (tests/slab.mk) link the same sources against a fake client.
SLAB_SOURCES = \
	%reldir%/slab.h \
	%reldir%/slab_cache.c \
	%reldir%/slab_page.c \
	%reldir%/slab_ctx.c \
	%reldir%/slab_reclaim.c \
	%reldir%/slab_debug.c
client_libmembroker_la_SOURCES += $(SLAB_SOURCES)
