"""miniyaml.py -- a reader of the block YAML the project's deployment files
are written in (docker/compose.yaml, docker/kubernetes.yaml, the Ansible
playbook), so that tests can check them with the standard library alone:
mappings and sequences in block style (a sequence may sit at its key's
indentation), plain and quoted scalars (kept as strings), `|` literal
blocks, comments, and `---` between documents. Flow style, anchors and
tags are refused, not guessed at."""

import re

_KEY = re.compile(r"^([\w./-]+):(?: (.*))?$")


def _strip_comment(raw):
    """The line without a trailing comment (a # after a space, outside
    quotes), right-trimmed."""
    quote = None
    for i, ch in enumerate(raw):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or raw[i - 1] in " \t"):
            return raw[:i].rstrip()
    return raw.rstrip()


def _scalar(v):
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1]
    if v[:1] in ("{", "[", "&", "*", "!") or v in ("|", ">", "|-", ">-"):
        raise ValueError(f"unsupported YAML: {v!r}")
    return v


class _Reader:
    def __init__(self, lines):
        self.raw = list(lines)
        self.i = 0

    def peek(self):
        """(indent, content) of the next line with content, moving past
        blank and comment lines; None at the end."""
        while self.i < len(self.raw):
            line = _strip_comment(self.raw[self.i])
            if line.strip():
                lead = line[:len(line) - len(line.lstrip())]
                if "\t" in lead:
                    raise ValueError(f"a tab in the indentation: {self.raw[self.i]!r}")
                return len(lead), line.strip()
            self.i += 1
        return None

    def literal(self, indent):
        """The lines of a | block after its key at indent, dedented."""
        lines = []
        while self.i < len(self.raw):
            raw = self.raw[self.i]
            if raw.strip() and len(raw) - len(raw.lstrip()) <= indent:
                break
            lines.append(raw)
            self.i += 1
        while lines and not lines[-1].strip():
            lines.pop()
        body = [l for l in lines if l.strip()]
        cut = min(len(l) - len(l.lstrip()) for l in body) if body else 0
        return "\n".join(l[cut:] for l in lines) + "\n"

    def block(self, indent):
        first = self.peek()
        if first is None or first[0] != indent:
            raise ValueError("expected a block")
        return self.seq(indent) if first[1].startswith("- ") or first[1] == "-" else self.map(indent)

    def seq(self, indent):
        out = []
        while True:
            nxt = self.peek()
            if nxt is None or nxt[0] != indent or not nxt[1].startswith("- "):
                return out
            item = nxt[1][2:].strip()
            if _KEY.match(item):
                # a mapping as the item: its first key on the dash's line
                self.raw[self.i] = " " * (indent + 2) + item
                out.append(self.map(indent + 2))
            else:
                out.append(_scalar(item))
                self.i += 1

    def map(self, indent):
        out = {}
        while True:
            nxt = self.peek()
            if nxt is None or nxt[0] < indent:
                return out
            if nxt[0] > indent:
                raise ValueError(f"bad indentation: {nxt[1]!r}")
            if nxt[1].startswith("- "):
                return out      # a sequence at its key's indentation ended
            m = _KEY.match(nxt[1])
            if not m:
                raise ValueError(f"not a key: {nxt[1]!r}")
            key, rest = m.group(1), m.group(2)
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            self.i += 1
            if rest in ("|", "|-"):
                v = self.literal(indent)
                out[key] = v.rstrip("\n") if rest == "|-" else v
            elif rest:
                out[key] = _scalar(rest)
            else:
                sub = self.peek()
                if sub and sub[0] > indent:
                    out[key] = self.block(sub[0])
                elif sub and sub[0] == indent and sub[1].startswith("- "):
                    out[key] = self.seq(indent)
                else:
                    out[key] = None


def load(text):
    """One document."""
    r = _Reader(text.splitlines())
    first = r.peek()
    if first is None:
        return None
    value = r.block(first[0])
    if r.peek() is not None:
        raise ValueError(f"left over: {r.peek()[1]!r}")
    return value


def load_all(text):
    """Every document of a stream separated by --- lines."""
    docs, cur = [], []
    for line in text.splitlines():
        if line.rstrip() == "---":
            docs.append(cur)
            cur = []
        else:
            cur.append(line)
    docs.append(cur)
    return [d for d in (load("\n".join(c)) for c in docs) if d is not None]
