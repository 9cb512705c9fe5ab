# The README example: the smallest complete client of libmembroker.
noinst_PROGRAMS += examples/example
examples_example_SOURCES = %reldir%/example.c
examples_example_CFLAGS = $(AM_CFLAGS)
examples_example_LDADD = client/libmembroker.la
