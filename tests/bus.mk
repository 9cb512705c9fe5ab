# tests: bus
