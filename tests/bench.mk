# tests: every benchmark table runs once in quick mode (MB_BENCH_QUICK=1,
# tiny counts) so that none of them rots; the test checks that each table
# ran and printed its Markdown table, never how fast anything was.
TESTS += %reldir%/test-bench-quick.sh
dist_check_SCRIPTS += %reldir%/test-bench-quick.sh
