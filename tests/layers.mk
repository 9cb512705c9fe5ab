# tests: the daemon's layering (docs/architecture.md), read from its sources:
# includes go down or sideways without a cycle, and every function a daemon
# header declares is defined in that header's module.
TESTS += %reldir%/test-layers.sh
dist_check_SCRIPTS += %reldir%/test-layers.sh
