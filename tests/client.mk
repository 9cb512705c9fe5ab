# tests: client
