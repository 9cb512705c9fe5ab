# slab caches (client/slab.c), added to libmembroker (owned by the slab work)
client_libmembroker_la_SOURCES += %reldir%/slab.c
