# tests: client (libmembroker, membroker-load) against the real daemon.
check_PROGRAMS += tests/test-client tests/client-tool tests/test-client-proto tests/malloc-client
tests_malloc_client_SOURCES = %reldir%/malloc-client.c
tests_malloc_client_LDADD = client/libmembroker.la
tests_malloc_client_LDFLAGS = $(AM_LDFLAGS) -no-install -pthread
tests_test_client_SOURCES = %reldir%/test-client.c
tests_test_client_CFLAGS = $(TESTS_CFLAGS)
tests_test_client_LDADD = client/libmembroker.la $(TESTS_LIBS)
tests_test_client_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_client_tool_SOURCES = %reldir%/client-tool.c
tests_client_tool_LDADD = client/libmembroker.la
tests_client_tool_LDFLAGS = $(AM_LDFLAGS) -no-install

# The library against a scripted fake daemon (no membrokerd): daemon
# requests, errors and protocol violations the real daemon does not send.
tests_test_client_proto_SOURCES = %reldir%/test-client-proto.c
tests_test_client_proto_CFLAGS = $(TESTS_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_test_client_proto_LDADD = client/libmembroker.la proto/libmbproto.la $(PROTOBUF_C_LIBS) $(TESTS_LIBS)
tests_test_client_proto_LDFLAGS = $(AM_LDFLAGS) -no-install

CLIENT_TESTS = \
	%reldir%/test-client-basic.sh \
	%reldir%/test-client-close.sh \
	%reldir%/test-client-close-daemon-gone.sh \
	%reldir%/test-client-handle.sh \
	%reldir%/test-client-bulk-limit.sh \
	%reldir%/test-client-single-limit.sh \
	%reldir%/test-client-share.sh \
	%reldir%/test-client-fork.sh \
	%reldir%/test-client-threads.sh \
	%reldir%/test-client-threads-atomic.sh \
	%reldir%/test-client-threads-limit.sh \
	%reldir%/test-client-refill-limit.sh \
	%reldir%/test-client-drain-stress.sh \
	%reldir%/test-client-stats.sh \
	%reldir%/test-client-refused.sh \
	%reldir%/test-client-last-error.sh \
	%reldir%/test-client-stock-nosyscall.sh \
	%reldir%/test-client-batch-change.sh \
	%reldir%/test-client-refill.sh \
	%reldir%/test-client-malloc.sh \
	%reldir%/test-membroker-load.sh \
	%reldir%/test-membroker-load-limit.sh \
	%reldir%/test-membroker-load-signals.sh \
	%reldir%/test-membroker-load-verify.sh
TESTS += $(CLIENT_TESTS) tests/test-client-proto
dist_check_SCRIPTS += $(CLIENT_TESTS)
EXTRA_DIST += %reldir%/client-env.sh

# The scope-bound locks and debug-build lock assertions of common/macros.h
# that the client library's modules use.
check_PROGRAMS += tests/test-lock-guard
TESTS += tests/test-lock-guard
tests_test_lock_guard_SOURCES = %reldir%/test-lock-guard.c
tests_test_lock_guard_CFLAGS = $(TESTS_CFLAGS)
tests_test_lock_guard_LDADD = $(TESTS_LIBS)

# The malloc shim (libmembroker-preload.so) and membroker-run with real
# programs (python3, sqlite3, gcc, git, sh).
PRELOAD_TESTS = \
	%reldir%/test-preload-python.sh \
	%reldir%/test-preload-xthread.sh \
	%reldir%/test-preload-tcache.sh \
	%reldir%/test-preload-programs.sh \
	%reldir%/test-preload-badinput.sh \
	%reldir%/test-preload-lost.sh \
	%reldir%/test-preload-mmap.sh \
	%reldir%/test-preload-mmap-python.sh \
	%reldir%/test-preload-buildtree.sh
TESTS += $(PRELOAD_TESTS)
dist_check_SCRIPTS += $(PRELOAD_TESTS)
EXTRA_DIST += %reldir%/preload-lib.sh
# A program that maps its own memory (not linked with libmembroker: it runs
# under the shim).
check_PROGRAMS += tests/mmap-client
check_PROGRAMS += tests/tcache-client
tests_tcache_client_SOURCES = %reldir%/tcache-client.c
tests_tcache_client_LDADD = -lpthread
tests_mmap_client_SOURCES = %reldir%/mmap-client.c
