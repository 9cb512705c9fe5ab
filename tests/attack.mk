# tests: attacks on the arena (a client misusing its fd and mapping)

ATTACK_TESTS = \
	tests/test-attack-oob-write.sh \
	tests/test-attack-fallocate.sh \
	tests/test-attack-dirty-free-pages.sh \
	tests/test-attack-memfd.sh \
	tests/test-attack-backing-fallback.sh
TESTS += $(ATTACK_TESTS)
dist_check_SCRIPTS += $(ATTACK_TESTS)
EXTRA_DIST += tests/attack-lib.sh
