#!/usr/bin/env python3
"""tests/unit/function-length.py -- no function in src/ over 120 lines.

A function is read as C reads it, not by its layout: the sources are
scanned with comments, string and character literals and preprocessor
lines skipped, braces counted, and a brace block at file level whose
opening brace follows a `)` is a function body (a struct, an enum or an
initialiser's brace follows a name or `=`). Its length runs from the
first line of its declaration (the line after the previous declaration,
comment or directive) to its closing brace. The scan checks itself: the
braces of every file must balance, and each body found must close on a
`}` at the start of a line, as this code base writes them; either
failing is reported as a failure of the scan, not passed over.

  function-length.py SRC_DIR [MAX]        TAP: one check, longest named
  function-length.py --print SRC_DIR      every function, longest first
"""
import os
import re
import sys

MAX = 120
IDENT = re.compile(r'[A-Za-z_][A-Za-z_0-9]*')


def blank_out(text):
    """text with comments, literals and preprocessor lines turned into
    spaces (newlines kept, so offsets and line numbers stay)."""
    out, i, n = [], 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in ' \t':
            out.append(c)
            i += 1
            continue
        if line_start and c == '#':
            # to the end of the line, continuations and comments in it
            j = i
            while j < n and (text[j] != '\n' or text[j - 1] == '\\'):
                if text.startswith('/*', j):
                    k = text.find('*/', j + 2)
                    j = n if k < 0 else k + 2
                else:
                    j += 1
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
            continue
        line_start = c == '\n'
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            j += 1
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def functions(path):
    """[(name, first line, last line)] of path's function bodies, and the
    problems the scan met (each a string)."""
    with open(path, encoding='utf-8') as f:
        text = blank_out(f.read())
    found, problems = [], []
    depth, body, prev_end = 0, None, 0
    for i, c in enumerate(text):
        if c == '{':
            if depth == 0:
                before = text[prev_end:i].rstrip()
                if before.endswith(')'):
                    body = (before, prev_end, i)
            depth += 1
        elif c == '}':
            depth -= 1
            if depth < 0:
                problems.append('%s: unbalanced } at line %d'
                                % (path, text.count('\n', 0, i) + 1))
                return found, problems
            if depth == 0:
                if body:
                    decl, start, _ = body
                    first = start + len(decl) - len(decl.lstrip())
                    line_first = text.count('\n', 0, first) + 1
                    line_last = text.count('\n', 0, i) + 1
                    names = IDENT.findall(decl[:decl.find('(')])
                    name = names[-1] if names else '?'
                    if text.rfind('\n', 0, i) != i - 1:
                        problems.append('%s:%d: %s does not close at the start of a line'
                                        % (path, line_last, name))
                    found.append((name, line_first, line_last))
                    body = None
                prev_end = i + 1
        elif c == ';' and depth == 0:
            prev_end = i + 1
    if depth != 0:
        problems.append('%s: braces do not balance' % path)
    return found, problems


def scan(src):
    every, problems = [], []
    names = sorted(os.path.relpath(os.path.join(d, f), src)
                   for d, _, fs in os.walk(src) for f in fs)
    for name in names:
        if name.endswith(('.c', '.h')):
            path = os.path.join(src, name)
            found, probs = functions(path)
            problems += probs
            every += [(last - first + 1, name, fn, first) for fn, first, last in found]
    every.sort(key=lambda e: (-e[0], e[1], e[3]))
    return every, problems


def main(argv):
    if len(argv) == 3 and argv[1] == '--print':
        every, problems = scan(argv[2])
        for lines, name, fn, first in every:
            print('%5d %s:%d %s' % (lines, name, first, fn))
        for p in problems:
            print('# ' + p, file=sys.stderr)
        return 1 if problems else 0
    if len(argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    limit = int(argv[2]) if len(argv) == 3 else MAX
    every, problems = scan(argv[1])
    over = [e for e in every if e[0] > limit]
    print('1..2')
    for p in problems:
        print('# ' + p)
    print('%s 1 - the scan read every file of src/ (%d functions)'
          % ('not ok' if problems or not every else 'ok', len(every)))
    for lines, name, fn, first in over:
        print('# %s:%d: %s is %d lines' % (name, first, fn, lines))
    if every:
        print('# longest: %s:%d %s, %d lines' % (every[0][1], every[0][3], every[0][2],
                                                 every[0][0]))
    print('%s 2 - every function in src/ is at most %d lines'
          % ('not ok' if over else 'ok', limit))
    return 1 if problems or over or not every else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
