# slab caches on broker pages (client/slab.h), added to libmembroker.  The
# unit tests (tests/slab.mk) link the same sources against a fake client.
SLAB_SOURCES = \
	client/slab.h \
	client/slab_cache.c \
	client/slab_page.c \
	client/slab_ctx.c \
	client/slab_reclaim.c \
	client/slab_debug.c
client_libmembroker_la_SOURCES += $(SLAB_SOURCES)
