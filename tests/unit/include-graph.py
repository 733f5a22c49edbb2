#!/usr/bin/env python3
"""tests/unit/include-graph.py -- src/ as a layered graph, kept so.

A module is a file name without its extension: src/x.c and src/x.h are
module x, src/x-t.h (types only) is module x-t. Module a depends on b when
a file of a has `#include "b..."`. The test fails on any include circle
among modules (each strongly connected component of more than one module
is named) and on any x-t.h that includes a header other than a -t.h.

  include-graph.py SRC_DIR            TAP: the two checks
  include-graph.py --print SRC_DIR    the graph, one "module -> modules" a line
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module(name):
    if name.endswith('-t.h'):
        return name[:-2]
    return os.path.splitext(name)[0]


def read_graph(src):
    """{module: set of modules it includes}, and the -t.h offences."""
    graph, offences = {}, []
    for name in sorted(os.listdir(src)):
        if not name.endswith(('.c', '.h')):
            continue
        with open(os.path.join(src, name), encoding='utf-8') as f:
            text = f.read()
        mod = module(name)
        deps = graph.setdefault(mod, set())
        for inc in INCLUDE.findall(text):
            if not os.path.exists(os.path.join(src, inc)):
                continue
            if name.endswith('-t.h') and not inc.endswith('-t.h'):
                offences.append('%s includes %s' % (name, inc))
            if module(inc) != mod:
                deps.add(module(inc))
    return graph, offences


def circles(graph):
    """Strongly connected components of more than one module (Tarjan's
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


def main(argv):
    if len(argv) == 3 and argv[1] == '--print':
        graph, _ = read_graph(argv[2])
        for mod in sorted(graph):
            print('%s -> %s' % (mod, ' '.join(sorted(graph[mod]))))
        return 0
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    graph, offences = read_graph(argv[1])
    found = circles(graph)
    print('1..2')
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
    return 1 if found or offences else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
