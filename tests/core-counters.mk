# tests: core-counters
