#!/usr/bin/env python3
"""tests/unit/include-graph.py -- src/ as a layered graph, kept so.

A module is a file's path below src/ without its extension: src/ring/ring.c
and src/ring/ring.h are module ring/ring, src/ring/ring-t.h (types only) is
module ring/ring-t. Module a depends on b when a file of a has
`#include "b..."` (paths relative to src/). A folder is a module's
directory; src/ itself, with main.c and proxy.c, is the top.

The checks:
  1. no include circle among modules (each strongly connected component of
     more than one module is named);
  2. every x-t.h includes only -t.h headers;
  3. no include circle among folders, and no folder includes a file of
     the top (main.c, proxy.c and their headers are above every folder);
  4. every folder has a README.md whose line "Includes: a/, b/" (or
     "Includes: nothing") names every folder its files include, and no
     more: the layer it sits on is written down and held to.

  include-graph.py SRC_DIR            TAP: the four checks
  include-graph.py --print SRC_DIR    the folder graph, a folder a line, then
                                      the modules, one "module -> modules" a line
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
DECLARED = re.compile(r'^Includes:\s*(.*)$', re.M)


def module(path):
    """Module of a path relative to src/."""
    if path.endswith('-t.h'):
        return path[:-2]
    return os.path.splitext(path)[0]


def folder(mod):
    return os.path.dirname(mod)


def sources(src):
    out = []
    for d, dirs, files in os.walk(src):
        dirs[:] = sorted(x for x in dirs if x != 'man')
        for f in sorted(files):
            if f.endswith(('.c', '.h')):
                out.append(os.path.relpath(os.path.join(d, f), src))
    return sorted(out)


def read_graph(src):
    """{module: set of modules it includes}, and the -t.h offences."""
    graph, offences = {}, []
    for name in sources(src):
        with open(os.path.join(src, name), encoding='utf-8') as f:
            text = f.read()
        mod = module(name)
        deps = graph.setdefault(mod, set())
        for inc in INCLUDE.findall(text):
            # as the compiler looks: beside the file first, then src/
            near = os.path.normpath(os.path.join(os.path.dirname(name), inc))
            if os.path.exists(os.path.join(src, near)):
                target = near
            elif os.path.exists(os.path.join(src, inc)):
                target = os.path.normpath(inc)
            else:
                continue
            if name.endswith('-t.h') and not inc.endswith('-t.h'):
                offences.append('%s includes %s' % (name, inc))
            if module(target) != mod:
                deps.add(module(target))
    return graph, offences


def folder_graph(graph):
    fg = {}
    for mod, deps in graph.items():
        a = folder(mod)
        edges = fg.setdefault(a, {})
        for d in deps:
            b = folder(d)
            if b != a:
                edges.setdefault(b, []).append('%s -> %s' % (mod, d))
    return fg


def circles(graph):
    """Strongly connected components of more than one node (Tarjan's
    algorithm, iterative: the graph is small, but recursion depth is not
    ours to bet on)."""
    index, low, onstack, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        onstack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    onstack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in onstack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    onstack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def shortest_cycle(fg, comp):
    """The shortest circle of folders through the smallest edge count,
    as a list that starts and ends with the same folder: the fewest
    includes to look at."""
    best = None
    inside = set(comp)
    for start in sorted(comp):
        prev, frontier, found = {start: None}, [start], None
        while frontier and found is None:
            nxt = []
            for a in frontier:
                for b in sorted(fg.get(a, {})):
                    if b == start:
                        found = a
                        break
                    if b in inside and b not in prev:
                        prev[b] = a
                        nxt.append(b)
                if found is not None:
                    break
            frontier = nxt
        if found is None:
            continue
        path, node = [start], found
        while node is not None:
            path.append(node)
            node = prev[node]
        path.reverse()
        if best is None or len(path) < len(best):
            best = path
    return best


def declared(src, fold):
    """The folders a folder's README.md says it includes, or None."""
    path = os.path.join(src, fold, 'README.md')
    if not os.path.exists(path):
        return None
    with open(path, encoding='utf-8') as f:
        m = DECLARED.search(f.read())
    if not m:
        return None
    words = m.group(1).replace(',', ' ').split()
    if words == ['nothing']:
        return set()
    return {w.rstrip('/') for w in words}


def layers(fg):
    """Folders from the bottom up: each after every folder it includes."""
    done, out = set(), []
    while len(done) < len(fg):
        ready = sorted(f for f in fg if f not in done and set(fg[f]) <= done)
        if not ready:
            break
        out.append(ready)
        done.update(ready)
    return out


def main(argv):
    if len(argv) == 3 and argv[1] == '--print':
        graph, _ = read_graph(argv[2])
        fg = folder_graph(graph)
        for i, row in enumerate(layers(fg)):
            for f in row:
                print('floor %d  %-9s -> %s' % (i, (f or '(top)') + '/',
                      ' '.join(sorted((b or '(top)') + '/' for b in fg[f])) or '-'))
        print()
        for mod in sorted(graph):
            print('%s -> %s' % (mod, ' '.join(sorted(graph[mod]))))
        return 0
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    src = argv[1]
    graph, offences = read_graph(src)
    fg = folder_graph(graph)
    print('1..4')
    found = circles(graph)
    for comp in found:
        inner = {m: sorted(graph[m] & set(comp)) for m in comp}
        print('# circle: ' + '; '.join('%s -> %s' % (m, ' '.join(d))
                                        for m, d in sorted(inner.items())))
    print('%s 1 - no include circle among the modules of src/'
          % ('not ok' if found else 'ok'))
    for o in offences:
        print('# ' + o)
    print('%s 2 - every -t.h includes only -t.h headers'
          % ('not ok' if offences else 'ok'))
    bad = []
    for comp in circles({a: set(b) for a, b in fg.items()}):
        cycle = shortest_cycle(fg, comp)
        bad.append('folder circle: ' + '; '.join(
            '%s/ -> %s/ (%s)' % (a or '(top)', b or '(top)', fg[a][b][0])
            for a, b in zip(cycle, cycle[1:])))
    for a, edges in sorted(fg.items()):
        if a and '' in edges:
            bad.append('%s/ includes the top: %s' % (a, edges[''][0]))
    for b in bad:
        print('# ' + b)
    print('%s 3 - the folders form a DAG below the top'
          % ('not ok' if bad else 'ok'))
    wrong = []
    for a in sorted(f for f in fg if f):
        want = declared(src, a)
        have = {b for b in fg[a] if b}
        if want is None:
            wrong.append('%s/README.md is missing or has no "Includes:" line' % a)
            continue
        for b in sorted(have - want):
            wrong.append('%s/ includes %s/, which its README does not name (%s)'
                         % (a, b, fg[a][b][0]))
        for b in sorted(want - have):
            wrong.append('%s/README.md names %s/, which it does not include' % (a, b))
    for w in wrong:
        print('# ' + w)
    print('%s 4 - every folder names, in its README, the folders it includes'
          % ('not ok' if wrong else 'ok'))
    return 1 if found or offences or bad or wrong else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
