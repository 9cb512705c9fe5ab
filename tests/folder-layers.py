#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layering of a tree of module folders (docs/architecture.md), read
from its sources: folder-layers.py ROOT FOLDER=FLOOR...

ROOT (client/, daemon/) holds one folder per module, and each folder stands
on a floor, e.g. for the library:

    core 0 < session 1 < stock 2 < slab 3 < malloc 4 < api 5 < preload 6

Every include and every call between two folders goes down: a file may
include a header of its own folder or of a floor no higher, and call a
function defined in its own folder or on a lower floor.  A module hears
from the ones above it only through callbacks they register (the library's
session hooks and shrinkers, the daemon's ops tables).  Besides:

  - no circle of files (a .c with its .h is one file here) that call or
    include each other spans two folders, and none holds more than six;
  - ROOT itself holds at most three C files, and at least four folders.

Calls are read from the code's indented lines (bodies), definitions from
its column-0 lines, as the kernel's coding style writes them.  Prints every
breach and exits 1 on any.
"""
import collections
import os
import re
import sys

MAX_CIRCLE = 6
MAX_TOP_C = 3

if len(sys.argv) < 3:
    sys.exit("usage: folder-layers.py ROOT FOLDER=FLOOR...")
top = sys.argv[1]
FLOORS = {k: int(v) for k, v in (a.split("=", 1) for a in sys.argv[2:])}
files = []
for d, _, names in os.walk(top):
    files += [os.path.join(d, n) for n in sorted(names) if n.endswith((".c", ".h"))]
rel = {f: os.path.relpath(f, top) for f in files}


def folder(f):
    parts = rel[f].split(os.sep)
    return parts[0] if len(parts) > 1 else ""


def room(f):
    return rel[f][:-2]


def strip(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


src = {f: strip(open(f, encoding="utf-8").read()) for f in files}
breaches = []

# Definitions: a function head at column 0 (not a prototype), or a
# variable defined at file scope of a .c file.
defs = collections.defaultdict(set)
head = re.compile(r"^[A-Za-z_][\w \t\*\(\),]*?\b([A-Za-z_]\w*)\s*\([^;]*$")
for f in files:
    lines = src[f].splitlines()
    for i, line in enumerate(lines):
        if not line or line[0] in " \t#}":
            continue
        m = head.match(line)
        if not m or line.rstrip().endswith(";"):
            continue
        # a head runs to the line with '{' (or ends in ';': a prototype)
        j, tail = i, line
        while "{" not in tail and not tail.rstrip().endswith(";") and j + 1 < len(lines):
            j += 1
            tail = lines[j]
        if "{" in tail:
            defs[m.group(1)].add(f)

edges = collections.defaultdict(dict)  # room -> {room: why}
for f in files:
    g = folder(f)
    for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', open(f, encoding="utf-8").read(), flags=re.M):
        target = os.path.normpath(os.path.join(top, inc))
        if target not in rel:
            # a bare name, found through the module folders
            named = [x for x in files if os.path.basename(x) == inc]
            if len(named) != 1:
                continue
            target = named[0]
        h = folder(target)
        if g and h and g != h and FLOORS.get(h, -1) > FLOORS.get(g, -1):
            breaches.append(f"{rel[f]} includes {inc}: {h}/ is above {g}/")
        if room(target) != room(f):
            edges[room(f)].setdefault(room(target), "#include " + inc)
    body = "\n".join(l for l in src[f].splitlines() if l[:1] in (" ", "\t"))
    for name in sorted(set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", body))):
        where = defs.get(name)
        if not where or len(where) != 1:
            continue
        d = next(iter(where))
        h = folder(d)
        if g and h and g != h and FLOORS.get(h, -1) >= FLOORS.get(g, -1):
            breaches.append(f"{rel[f]} calls {name}() of {rel[d]}: {h}/ is not below {g}/")
        if room(d) != room(f):
            edges[room(f)].setdefault(room(d), name + "()")

for g in sorted({folder(f) for f in files if folder(f)}):
    if g not in FLOORS:
        breaches.append(f"{g}/ is a folder without a floor (give it one in the test and docs/architecture.md)")

# Circles: strongly connected rooms (Tarjan).
index, low, stack, on, circles = {}, {}, [], set(), []
counter = [0]
sys.setrecursionlimit(100000)


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges.get(v, {}):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            circles.append(sorted(comp))


for v in sorted(set(edges) | {w for e in edges.values() for w in e}):
    if v not in index:
        visit(v)
for comp in circles:
    folders = sorted({c.split(os.sep)[0] if os.sep in c else "" for c in comp})
    ties = [f"{a} -> {b} ({edges[a][b]})" for a in comp for b in edges.get(a, {}) if b in comp]
    if len(folders) > 1:
        breaches.append(f"a circle spans {', '.join(f + '/' for f in folders)}: " + "; ".join(ties))
    if len(comp) > MAX_CIRCLE:
        breaches.append(f"a circle of {len(comp)} files (at most {MAX_CIRCLE}): " + "; ".join(ties))

top_c = [f for f in files if not folder(f) and f.endswith(".c")]
if len(top_c) > MAX_TOP_C:
    breaches.append(f"{len(top_c)} C files at the top of {top} (at most {MAX_TOP_C})")
nfolders = len({folder(f) for f in files if folder(f)})
if nfolders < 4:
    breaches.append(f"{nfolders} module folders in {top} (at least 4)")

for b in breaches:
    print("layering:", b)
print(f"# {len(files)} files, {nfolders} folders, {sum(len(e) for e in edges.values())} ties, "
      f"{len(circles)} circles (largest {max((len(c) for c in circles), default=0)}), {len(breaches)} breaches")
sys.exit(1 if breaches else 0)
