# slab caches (client/slab.c), added to libmembroker
