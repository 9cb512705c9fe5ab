# Benchmarks: one program per table, run by `make bench` (all
# tables) or `make bench-NAME` (one table).  See BENCHMARKS.md.
noinst_LTLIBRARIES += bench/libbench.la
bench_libbench_la_SOURCES = %reldir%/harness.c %reldir%/harness.h %reldir%/daemon.c %reldir%/daemon.h
bench_libbench_la_LIBADD = -lm

# Table 4: counter layout.  Two binaries, one per page_counter layout.
noinst_PROGRAMS += bench/bench-counters bench/bench-counters-unpadded
bench_bench_counters_SOURCES = %reldir%/counters.c
bench_bench_counters_LDADD = bench/libbench.la daemon/core/libmbcore.la
bench_bench_counters_unpadded_SOURCES = %reldir%/counters.c
bench_bench_counters_unpadded_CFLAGS = $(AM_CFLAGS) -DPAGE_COUNTER_UNPADDED
bench_bench_counters_unpadded_LDADD = bench/libbench.la daemon/core/libmbcore-unpadded.la

# Table 6: statistics (rstat) on the accounting core.
noinst_PROGRAMS += bench/bench-stats
bench_bench_stats_SOURCES = %reldir%/stats.c
bench_bench_stats_LDADD = bench/libbench.la daemon/core/libmbcore.la

# Tables 1, 2, 3, 5: the real daemon and the real client library.
noinst_PROGRAMS += bench/bench-broker
bench_bench_broker_SOURCES = %reldir%/broker.c
bench_bench_broker_LDADD = bench/libbench.la client/libmembroker.la daemon/core/libmbcore.la

# Tables 1 and 9's other allocators: bench-malloc, linked against libc
# only, runs in a child process with tcmalloc, jemalloc or mimalloc
# preloaded (LD_PRELOAD), each replacing malloc() for its whole process
# (not in the sanitizer build, where ASan owns malloc()).
if !ENABLE_SANITIZERS
noinst_PROGRAMS += bench/bench-malloc
bench_bench_malloc_SOURCES = %reldir%/malloc.c
bench_bench_malloc_LDADD = bench/libbench.la
endif

# Table 13: allocation latency under steady churn (each case a child of
# its own; tcmalloc preloaded into one).  Not in the sanitizer build.
if !ENABLE_SANITIZERS
noinst_PROGRAMS += bench/bench-latency
bench_bench_latency_SOURCES = %reldir%/latency.c
bench_bench_latency_LDADD = bench/libbench.la client/libmembroker.la
endif

# Table 14: right-sizing over time (the daemon on a private bus, read with sd-bus).
noinst_PROGRAMS += bench/bench-rightsize
bench_bench_rightsize_SOURCES = %reldir%/rightsize.c
bench_bench_rightsize_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS)
bench_bench_rightsize_LDADD = bench/libbench.la $(SYSTEMD_LIBS)

# Table 16: mb_malloc() by size class (the peers through bench-malloc).
noinst_PROGRAMS += bench/bench-mbmalloc
bench_bench_mbmalloc_SOURCES = %reldir%/mbmalloc.c
bench_bench_mbmalloc_LDADD = bench/libbench.la client/libmembroker.la

# Table 17: real programs under membroker-run against glibc and tcmalloc
# (not in the sanitizer build: the shim cannot be preloaded there).
if !ENABLE_SANITIZERS
noinst_PROGRAMS += bench/bench-programs
bench_bench_programs_SOURCES = %reldir%/programs.c
bench_bench_programs_LDADD = bench/libbench.la
endif

# Table 18: the allocation patterns (one plain program, libc only) under
# glibc, the peers and membroker-run.
noinst_PROGRAMS += bench/bench-patterns
bench_bench_patterns_SOURCES = %reldir%/patterns.c
bench_bench_patterns_LDADD = -lpthread

# Generic side-by-side timing of whole commands (table 7).
noinst_PROGRAMS += bench/bench-exec
bench_bench_exec_SOURCES = %reldir%/exec.c
bench_bench_exec_LDADD = bench/libbench.la

# Table 8: memory overhead (starts membrokerd itself, several times).
noinst_PROGRAMS += bench/bench-overhead
bench_bench_overhead_SOURCES = %reldir%/overhead.c
bench_bench_overhead_LDADD = bench/libbench.la client/libmembroker.la

# Table 9: slab caches against malloc.
noinst_PROGRAMS += bench/bench-slab
bench_bench_slab_SOURCES = %reldir%/slab-bench.c
bench_bench_slab_LDADD = bench/libbench.la client/libmembroker.la

# Table 15: SQLite on the broker page cache (libmembroker-sqlite) against
# SQLite's own page cache.
noinst_PROGRAMS += bench/bench-sqlite
bench_bench_sqlite_SOURCES = %reldir%/sqlite-bench.c
bench_bench_sqlite_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sqlite
bench_bench_sqlite_CFLAGS = $(AM_CFLAGS) $(SQLITE3_CFLAGS)
bench_bench_sqlite_LDADD = bench/libbench.la sqlite/libmembroker-sqlite.la client/libmembroker.la $(SQLITE3_LIBS)

# Table 10: scale (starts membrokerd itself; 1,000 clients, 10,000 tenants).
# Table 11 (start-up and Reload() of 10,000 and 30,000 tenant files) is
# bench/mb-bench.sh alone: it times the real daemon and busctl.
noinst_PROGRAMS += bench/bench-scale
bench_bench_scale_SOURCES = %reldir%/scale.c
bench_bench_scale_LDADD = bench/libbench.la client/libmembroker.la

# ---- running them ----
EXTRA_DIST += %reldir%/lib.sh %reldir%/mb-bench.sh %reldir%/charts.sh
BENCH_ENV = top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
	MB_BENCH_DIR='$(abs_top_builddir)/bench' BUSCTL='$(BUSCTL)' DBUS_DAEMON='$(DBUS_DAEMON)'
BENCH_RUN = $(BENCH_ENV) $(SHELL) $(abs_top_srcdir)/bench/mb-bench.sh

# All eleven tables (a few minutes); the complete output also goes to
# bench/results/latest.md in the build directory, and the tables with a
# median column, drawn by gnuplot, to bench/results/table-N.png: generated
# files, never committed (BENCHMARKS.md keeps the method, the targets and
# the verdicts).
bench: all tests/rightsize-client
	$(BENCH_RUN) --output bench/results/latest.md all
bench-hotpath: all
	$(BENCH_RUN) --output bench/results/hotpath.md hotpath
bench-charge: all
	$(BENCH_RUN) --output bench/results/charge.md charge
bench-depth: all
	$(BENCH_RUN) --output bench/results/depth.md depth
bench-counters: all
	$(BENCH_RUN) --output bench/results/counters.md counters
bench-nolimits: all
	$(BENCH_RUN) --output bench/results/nolimits.md nolimits
bench-stats: all
	$(BENCH_RUN) --output bench/results/stats.md stats
bench-dbus: all
	$(BENCH_RUN) --output bench/results/dbus.md dbus
bench-overhead: all
	$(BENCH_RUN) --output bench/results/overhead.md overhead
bench-slab: all
	$(BENCH_RUN) --output bench/results/slab.md slab
bench-scale: all
	$(BENCH_RUN) --output bench/results/scale.md scale
bench-reload: all
	$(BENCH_RUN) --output bench/results/reload.md reload
bench-latency: all
	$(BENCH_RUN) --output bench/results/latency.md latency
bench-rightsize: all tests/rightsize-client
	$(BENCH_RUN) --output bench/results/rightsize.md rightsize
bench-sqlite: all
	$(BENCH_RUN) --output bench/results/sqlite.md sqlite
bench-mbmalloc: all
	$(BENCH_RUN) --output bench/results/mbmalloc.md mbmalloc
bench-programs: all
	$(BENCH_RUN) --output bench/results/programs.md programs
bench-patterns: all
	$(BENCH_RUN) --output bench/results/patterns.md patterns
clean-local: clean-bench-results
clean-bench-results:
	-rm -rf bench/results
# Table 12 (root; not part of `make bench`): attaching during a connection flood.
bench-flood: all tests/wire-client
	$(BENCH_RUN) --output bench/results/flood.md flood
.PHONY: clean-bench-results bench bench-hotpath bench-charge bench-depth bench-counters bench-nolimits \
	bench-stats bench-dbus bench-overhead bench-slab bench-scale bench-reload bench-flood bench-latency \
	bench-rightsize bench-sqlite \
	bench-mbmalloc bench-programs bench-patterns
