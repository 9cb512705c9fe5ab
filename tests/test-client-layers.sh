#!/bin/bash
# The library's layering (docs/architecture.md), read from its sources by
# tests/folder-layers.py: every include and call between client/'s module
# folders goes down (core < session < stock < slab < malloc < api <
# preload), no circle of files spans two folders or holds more than six,
# and client/ keeps at most three C files at its top.
set -eu
: "${top_srcdir:?run through make check}"
command -v python3 >/dev/null || { echo "SKIP: no python3 to read the sources"; exit 77; }
python3 "$top_srcdir/tests/folder-layers.py" "$top_srcdir/client" \
        core=0 session=1 stock=2 slab=3 malloc=4 api=5 preload=6
