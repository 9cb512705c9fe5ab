# tests: the configuration files at scale and their odd cases (reload of
# many tenants while serving, odd entries in tenants.d, draining of removed
# tenants).
CONFIG_TESTS = \
	tests/test-broker-reload-scale.sh \
	tests/test-broker-reload-odd.sh \
	tests/test-broker-reload-drain.sh
TESTS += $(CONFIG_TESTS)
dist_check_SCRIPTS += $(CONFIG_TESTS)
