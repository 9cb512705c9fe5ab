# tests: the daemon's layering (docs/architecture.md), read from its sources:
# includes go down or sideways without a cycle, and every function a daemon
# header declares is defined in that header's module.
TESTS += %reldir%/test-layers.sh
dist_check_SCRIPTS += %reldir%/test-layers.sh

# The library's layering: client/'s folders call and include downwards only
# (core < session < stock < slab < malloc < api < preload), no circle spans
# two folders or holds more than six files.
TESTS += %reldir%/test-client-layers.sh
dist_check_SCRIPTS += %reldir%/test-client-layers.sh
EXTRA_DIST += %reldir%/folder-layers.py

# At most five shell tests read the daemon's log, each saying why the log is
# the contract there; the others observe through the interfaces.
TESTS += %reldir%/test-log-readers.sh
dist_check_SCRIPTS += %reldir%/test-log-readers.sh
