# tests: core-stats
