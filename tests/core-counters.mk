# tests: core-counters -- page_counter, effective protection, high delay,
# the charge decision, reclaim planning and the right-sizing loop.
# Unit tests (Check) of the accounting core's counter modules.

# page_counter, padded layout (the one the daemon uses).
check_PROGRAMS += tests/test-page-counter
TESTS += tests/test-page-counter
tests_test_page_counter_SOURCES = tests/test-page-counter.c
tests_test_page_counter_CFLAGS = $(TESTS_CFLAGS)
tests_test_page_counter_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS)

# The same tests against the unpadded layout the benchmark compares.
check_PROGRAMS += tests/test-page-counter-unpadded
TESTS += tests/test-page-counter-unpadded
tests_test_page_counter_unpadded_SOURCES = tests/test-page-counter.c
tests_test_page_counter_unpadded_CFLAGS = $(TESTS_CFLAGS) -DPAGE_COUNTER_UNPADDED
tests_test_page_counter_unpadded_LDADD = daemon/core/libmbcore-unpadded.la $(TESTS_LIBS)

check_PROGRAMS += tests/test-protection
TESTS += tests/test-protection
tests_test_protection_SOURCES = tests/test-protection.c
tests_test_protection_CFLAGS = $(TESTS_CFLAGS)
tests_test_protection_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS)

check_PROGRAMS += tests/test-high-delay
TESTS += tests/test-high-delay
tests_test_high_delay_SOURCES = tests/test-high-delay.c
tests_test_high_delay_CFLAGS = $(TESTS_CFLAGS)
tests_test_high_delay_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS)

# The charge decision (try_charge_memcg()) and the batch policy.
check_PROGRAMS += tests/test-charge
TESTS += tests/test-charge
tests_test_charge_SOURCES = tests/test-charge.c
tests_test_charge_CFLAGS = $(TESTS_CFLAGS)
tests_test_charge_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS)

# Reclaim target planning (shrink_node_memcgs(), get_scan_count()).
check_PROGRAMS += tests/test-reclaim-plan
TESTS += tests/test-reclaim-plan
tests_test_reclaim_plan_SOURCES = tests/test-reclaim-plan.c
tests_test_reclaim_plan_CFLAGS = $(TESTS_CFLAGS)
tests_test_reclaim_plan_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS)

# The right-sizing loop (senpai's, MemoryPressureTarget=).
check_PROGRAMS += tests/test-rightsize
TESTS += tests/test-rightsize
tests_test_rightsize_SOURCES = tests/test-rightsize.c
tests_test_rightsize_CFLAGS = $(TESTS_CFLAGS)
tests_test_rightsize_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS)

# Pressure stall accounting (kernel/sched/psi.c): states, averages, triggers.
check_PROGRAMS += tests/test-psi
TESTS += tests/test-psi
tests_test_psi_SOURCES = tests/test-psi.c
tests_test_psi_CFLAGS = $(TESTS_CFLAGS)
tests_test_psi_LDADD = daemon/core/libmbcore.la $(TESTS_LIBS)
