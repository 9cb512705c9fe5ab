# tests: slab
