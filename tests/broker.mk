# tests: broker
