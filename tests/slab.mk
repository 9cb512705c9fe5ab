# tests: slab (owned by the slab work)

# Unit tests of client/slab.c against a fake client (no daemon).
check_PROGRAMS += tests/test-slab
TESTS += tests/test-slab
tests_test_slab_SOURCES = tests/test-slab.c tests/slab-fake-client.c tests/slab-fake-client.h client/slab.c
tests_test_slab_CFLAGS = $(TESTS_CFLAGS)
tests_test_slab_LDADD = $(TESTS_LIBS)
