# tests: bench quick mode
