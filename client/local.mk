# libmembroker and its malloc shim (owned by the client work).  One folder
# per module, each with one header that is its face:
#   core/     the client object, errors, the per-CPU lock
#   session/  the wire, the request engine, the library's thread, reconnection
#   stock/    the per-CPU page stocks, charging ahead, answers to Reclaim/Drain
#   slab/     slab caches on broker pages
#   malloc/   the mb_malloc() family: size classes over the slabs, runs
#   api/      mb_connect()/mb_close(): the parts composed into one client
#   preload/  libmembroker-preload.so, the malloc() and mmap() shim of membroker-run
include_HEADERS += %reldir%/membroker.h

MB_CORE_SOURCES = \
	%reldir%/core/client.c %reldir%/core/client.h %reldir%/core/mb_internal.h %reldir%/core/error.c \
	%reldir%/core/pcpu_lock.c %reldir%/core/pcpu_lock.h
MB_SESSION_SOURCES = \
	%reldir%/session/session.c %reldir%/session/session.h \
	%reldir%/session/wire_conn.c %reldir%/session/wire_conn.h \
	%reldir%/session/reconnect.c %reldir%/session/reconnect.h \
	%reldir%/session/pressure.c
MB_STOCK_SOURCES = \
	%reldir%/stock/stock.c %reldir%/stock/stock.h %reldir%/stock/stock_refill.c %reldir%/stock/fork.c \
	%reldir%/stock/spill.c \
	%reldir%/stock/reclaim.c %reldir%/stock/reclaim.h
# The unit tests (tests/slab.mk) link the slab sources against a fake client.
SLAB_SOURCES = \
	%reldir%/slab/slab.h \
	%reldir%/slab/slab_cache.c \
	%reldir%/slab/slab_page.c \
	%reldir%/slab/slab_ctx.c \
	%reldir%/slab/slab_reclaim.c \
	%reldir%/slab/slab_debug.c
MB_MALLOC_SOURCES = \
	%reldir%/malloc/malloc.c %reldir%/malloc/malloc_mid.c %reldir%/malloc/kmalloc.h
MB_API_SOURCES = \
	%reldir%/api/connect.c %reldir%/api/connect.h

# The client library.  Only mb_[a-z]* symbols are exported (the protobuf-c
# descriptors of the embedded wire code, mb__*, and the modules' internal
# symbols stay private).
lib_LTLIBRARIES += client/libmembroker.la
client_libmembroker_la_SOURCES = $(MB_CORE_SOURCES) $(MB_SESSION_SOURCES) $(MB_STOCK_SOURCES) \
	$(SLAB_SOURCES) $(MB_MALLOC_SOURCES) $(MB_API_SOURCES)
client_libmembroker_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
client_libmembroker_la_LIBADD = proto/libmbproto.la $(PROTOBUF_C_LIBS)
client_libmembroker_la_LDFLAGS = $(AM_LDFLAGS) -pthread -version-info 0:0:0 \
	-export-symbols-regex '^mb_[a-z]'

# libmembroker-preload.so: the library's sources again (compiled for this
# module) plus the malloc shim; exports the malloc family only.
lib_LTLIBRARIES += client/libmembroker-preload.la
client_libmembroker_preload_la_SOURCES = $(client_libmembroker_la_SOURCES) \
	%reldir%/preload/preload.c %reldir%/preload/preload.h \
	%reldir%/preload/mmap.c %reldir%/preload/report.c \
	%reldir%/preload/tcache.c %reldir%/preload/tcache.h
client_libmembroker_preload_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) -DMB_PRELOAD
client_libmembroker_preload_la_LIBADD = proto/libmbproto.la common/libmbcommon.la $(PROTOBUF_C_LIBS) -ldl
client_libmembroker_preload_la_LDFLAGS = $(AM_LDFLAGS) -pthread -module -avoid-version -shared \
	-export-symbols-regex '^(malloc|free|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|malloc_usable_size|mmap|mmap64|munmap|mremap|mprotect)$$'

pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = %reldir%/membroker.pc
