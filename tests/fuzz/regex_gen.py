"""Random ECMAScript regexes, written twice: for leapgen and for the ``regex`` module.

A pattern is a small tree (tuples, below); :func:`ecma` writes it in the
ECMA-262 syntax leapgen compiles, :func:`oracle` in the ``regex`` module's
syntax with ECMAScript's meaning (the dialect gaps translated, never avoided):

- ``$`` is ``\\Z`` (the ``regex`` module's ``$`` also matches before a final
  ``\\n``), ``^`` is ``\\A``;
- ``\\d \\w \\s`` and their negations, ``.``, and every class are written as
  explicit code point ranges (the ``regex`` module's ``\\d``/``\\w`` are
  Unicode, its ``\\s`` is not ECMAScript's white space);
- ``[]`` (matches nothing) is ``(?!)``, ``[^]`` (any character) ``[\\x00-\\U0010ffff]``;
- lazy quantifiers are greedy (the same language; the ``regex`` module's
  partial matches under lazy ones are wrong: ``a{2,3}?a`` on ``"aab"``).

Trees (``kind, ...``)::

    ("lit", ch)  ("class", items, negate)  ("dot",)  ("esc", letter)
    ("seq", [t])  ("alt", [t])  ("group", t, capture)  ("quant", t, lo, hi, lazy)
    ("look", negative, t)  ("anchor", "^" | "$")

``items`` of a class: ``("range", lo, hi)`` (code points) or ``("esc", letter)``.

Placement: lookaheads sit in the top-level sequence or in a lookahead's own
(leapgen's dialect), with ``$`` often at their end (issue 15, fault 2);
anchors at the ends of alternatives. A few trees (``misplaced``) put a
lookahead or an anchor where leapgen refuses it, to check the refusal is a
``RegexError`` with an offset. :func:`sample` writes random strings of a
tree's language with its lookaheads ignored (the oracle's verdict decides),
an oracle-side generator independent of leapgen.
"""

from __future__ import annotations

import random

import regex

DIGIT = [(0x30, 0x39)]
WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
SPACE = [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
         (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
LINE_TERMINATORS = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]
MAX_CP = 0x10FFFF
CLASS_ESCAPES = {"d": (DIGIT, False), "D": (DIGIT, True), "w": (WORD, False), "W": (WORD, True),
                 "s": (SPACE, False), "S": (SPACE, True)}
#: Characters drawn for literals and ranges: ASCII the vocabularies spell in many ways, syntax characters,
#: white space and line terminators, and every UTF-8 length (with the edges of each).
CHARS = list("abcxyz019_-. \"\\/{}()[]*+?|^$,:@") + ["\n", "\t", "\r", "\u00a0", "\u2028", "\ufeff", "é", "ß",
                                                     "\u00ff", "\u0100", "\u07ff", "\u0800", "日", "本", "\uffff",
                                                     "🎉", "\U00010000", "\U0010ffff"]
SYNTAX = set("^$\\.*+?()[]{}|/")


def _complement(ranges):
    out, lo = [], 0
    for a, b in _merge(ranges):
        if a > lo:
            out.append((lo, a - 1))
        lo = b + 1
    if lo <= MAX_CP:
        out.append((lo, MAX_CP))
    return out


def _merge(ranges):
    out = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def class_ranges(node) -> list[tuple[int, int]]:
    """The code point ranges a one-character node (class, dot, escape, literal) matches, merged."""
    kind = node[0]
    if kind == "lit":
        return [(ord(node[1]), ord(node[1]))]
    if kind == "dot":
        return _complement(LINE_TERMINATORS)
    if kind == "esc":
        ranges, negate = CLASS_ESCAPES[node[1]]
        return _complement(ranges) if negate else _merge(ranges)
    got = []
    for item in node[1]:
        got += [(item[1], item[2])] if item[0] == "range" else class_ranges(item)
    return _complement(got) if node[2] else _merge(got)


# -- generation ------------------------------------------------------------------------------------


class RegexGen:
    """Random trees; ``rng`` a ``random.Random`` (all draws from it: seeded, reproducible)."""

    def __init__(self, rng: random.Random, misplaced: bool = False):
        self.rng = rng
        self.misplaced = misplaced

    def pattern(self):
        """A whole pattern: a top-level alternation of sequences with lookaheads and anchors."""
        rng = self.rng
        alts = [self.top_seq(depth=0) for _ in range(rng.choice([1, 1, 1, 1, 2, 3]))]
        return ("alt", alts) if len(alts) > 1 else alts[0]

    def top_seq(self, depth: int, in_look: bool = False):
        rng = self.rng
        terms = [self.term(depth + 1) for _ in range(rng.randint(1 if not in_look else 0, 3))]
        for _ in range(rng.choice([0, 0, 1, 1, 2]) if depth < 2 else 0):
            body = ("alt", [self.top_seq(depth + 1, in_look=True) for _ in range(rng.choice([1, 1, 2]))])
            terms.insert(rng.randint(0, len(terms)), ("look", rng.random() < 0.4, body))
        if rng.random() < (0.45 if in_look else 0.25):
            terms.append(("anchor", "$"))
        if rng.random() < (0.05 if in_look else 0.25):
            terms.insert(0, ("anchor", "^"))
        if self.misplaced and rng.random() < 0.3 and len(terms) > 1:
            bad = rng.choice([("anchor", rng.choice("^$")), ("look", False, ("alt", [("seq", [self.atom(9)])]))])
            group = ("group", ("seq", [self.atom(9), bad]), False)
            terms.insert(rng.randint(0, len(terms)), group)
        return ("seq", terms)

    def term(self, depth: int):
        rng = self.rng
        atom = self.atom(depth)
        r = rng.random()
        if r < 0.55:
            return atom
        if r < 0.65:
            lo, hi = 0, None
        elif r < 0.75:
            lo, hi = 1, None
        elif r < 0.82:
            lo, hi = 0, 1
        else:
            lo = rng.choice([0, 1, 2, 3])
            hi = rng.choice([lo, lo + 1, lo + rng.randint(1, 4), None])
        return ("quant", atom, lo, hi, rng.random() < 0.15)

    def atom(self, depth: int):
        rng = self.rng
        r = rng.random()
        if r < 0.5 or depth > 2:
            if r < 0.1:
                return ("esc", rng.choice("dwsDWS"))
            if r < 0.15:
                return ("dot",)
            return ("lit", rng.choice(CHARS))
        if r < 0.8:
            return self.char_class()
        inner = [("seq", [self.term(depth + 1) for _ in range(rng.randint(1, 2))]) for _ in range(rng.randint(1, 2))]
        return ("group", ("alt", inner) if len(inner) > 1 else inner[0], rng.random() < 0.3)

    def char_class(self):
        rng = self.rng
        if rng.random() < 0.03:
            return ("class", [], rng.random() < 0.5)  # [] or [^]
        items = []
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.2:
                items.append(("esc", rng.choice("dwsDWS")))
            else:
                a, b = sorted((ord(rng.choice(CHARS)), ord(rng.choice(CHARS))))
                if rng.random() < 0.5 or 0xD800 <= a <= 0xDFFF:
                    b = a
                items.append(("range", a, b))
        return ("class", items, rng.random() < 0.3)


# -- writing ---------------------------------------------------------------------------------------


def _ecma_char(ch: str, rng: random.Random | None, in_class: bool) -> str:
    cp = ord(ch)
    special = "]\\^-" if in_class else SYNTAX
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    if ch in special or (in_class and ch == "["):
        return "\\" + ch
    if rng is not None and rng.random() < 0.15:  # an escape of any character, in one of three spellings
        if cp <= 0xFF and rng.random() < 0.5:
            return f"\\x{cp:02x}"
        if cp <= 0xFFFF:
            return f"\\u{cp:04X}"
        return f"\\u{{{cp:x}}}"
    return ch


def ecma(node, rng: random.Random | None = None) -> str:
    """The tree in ECMA-262 syntax (``rng``: escape some characters)."""
    kind = node[0]
    if kind == "lit":
        return _ecma_char(node[1], rng, False)
    if kind == "dot":
        return "."
    if kind == "esc":
        return "\\" + node[1]
    if kind == "class":
        parts = []
        for item in node[1]:
            if item[0] == "esc":
                parts.append("\\" + item[1])
            elif item[1] == item[2]:
                parts.append(_ecma_char(chr(item[1]), rng, True))
            else:
                parts.append(_ecma_char(chr(item[1]), rng, True) + "-" + _ecma_char(chr(item[2]), rng, True))
        return "[" + ("^" if node[2] else "") + "".join(parts) + "]"
    if kind == "seq":
        return "".join(ecma(t, rng) for t in node[1])
    if kind == "alt":
        return "|".join(ecma(t, rng) for t in node[1])
    if kind == "group":
        return ("(" if node[2] else "(?:") + ecma(node[1], rng) + ")"
    if kind == "quant":
        return _atomic(node[1], ecma(node[1], rng)) + _quantifier(node)
    if kind == "look":
        return ("(?!" if node[1] else "(?=") + ecma(node[2], rng) + ")"
    if kind == "anchor":
        return node[1]
    raise ValueError(node)


def _atomic(item, text: str) -> str:
    return text if item[0] in ("lit", "dot", "esc", "class", "group") else "(?:" + text + ")"


def _quantifier(node) -> str:
    _, _, lo, hi, lazy = node
    q = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
    if q is None:
        q = f"{{{lo}}}" if hi == lo else f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}"
    return q + ("?" if lazy else "")


def _oracle_ranges(ranges) -> str:
    if not ranges:
        return "(?!)"
    return "[" + "".join(_oracle_cp(a) if a == b else _oracle_cp(a) + "-" + _oracle_cp(b) for a, b in ranges) + "]"


def _oracle_cp(cp: int) -> str:
    return f"\\U{cp:08x}"


def oracle(node) -> str:
    """The tree in the ``regex`` module's syntax, with ECMAScript's meaning (see the module docstring)."""
    kind = node[0]
    if kind in ("lit", "dot", "esc", "class"):
        return _oracle_ranges(class_ranges(node))
    if kind == "seq":
        return "".join(oracle(t) for t in node[1])
    if kind == "alt":
        return "|".join(oracle(t) for t in node[1])
    if kind == "group":
        return "(" + ("" if node[2] else "?:") + oracle(node[1]) + ")"
    if kind == "quant":  # greedy: the same language, and the regex module's partial matches of lazy ones are wrong
        return "(?:" + oracle(node[1]) + ")" + _quantifier(node[:4] + (False,))
    if kind == "look":
        return ("(?!" if node[1] else "(?=") + oracle(node[2]) + ")"
    if kind == "anchor":
        return "\\A" if node[1] == "^" else "\\Z"
    raise ValueError(node)


def compile_oracle(node):
    """The ``regex`` module's compiled pattern of a tree (V1 off: the defaults of ``re``)."""
    return regex.compile(oracle(node))


def partial_inexact(node) -> bool:
    """Whether the ``regex`` module's partial matching may be inexact on the tree: it says "partial"
    wherever its backtracking reaches the end of the text, also where no extension can match, so a
    construct that can fail where the text could go on (a lookahead, an anchor, ``[]``, which matches
    nothing) makes its ``partial=True`` verdict an over-approximation (``^|a*[]`` on ``a``)."""
    kind = node[0]
    if kind in ("look", "anchor"):
        return True
    if kind in ("lit", "dot", "esc", "class"):
        return not class_ranges(node)
    if kind in ("seq", "alt"):
        return any(partial_inexact(t) for t in node[1])
    if kind in ("group", "quant"):
        return partial_inexact(node[1])
    return False


def char_pool(node, out: dict | None = None) -> list[str]:
    """A few characters of each character node of the tree (its ranges' ends and :data:`CHARS` inside
    them), and a line feed: what a search for strings of the tree's language tries."""
    out = {"\n": None} if out is None else out
    kind = node[0]
    if kind in ("lit", "dot", "esc", "class"):
        ranges = class_ranges(node)
        for a, b in ranges[:3]:
            for cp in (a, b):
                if not 0xD800 <= cp <= 0xDFFF:
                    out[chr(cp)] = None
        for c in CHARS:
            if any(a <= ord(c) <= b for a, b in ranges):
                out[c] = None
                break
    elif kind in ("seq", "alt"):
        for t in node[1]:
            char_pool(t, out)
    elif kind in ("group", "quant"):
        char_pool(node[1], out)
    elif kind == "look":
        char_pool(node[2], out)
    return list(out)


# -- strings ---------------------------------------------------------------------------------------


def sample(node, rng: random.Random, budget: list[int] | None = None) -> str:
    """A random string of the tree's language with lookaheads and anchors ignored."""
    budget = budget if budget is not None else [200]
    kind = node[0]
    if kind in ("lit", "dot", "esc", "class"):
        return pick_char(class_ranges(node), rng)
    if kind == "seq":
        return "".join(sample(t, rng, budget) for t in node[1])
    if kind == "alt":
        return sample(rng.choice(node[1]), rng, budget)
    if kind == "group":
        return sample(node[1], rng, budget)
    if kind == "quant":
        _, item, lo, hi, _ = node
        n = rng.randint(lo, hi if hi is not None else lo + 3)
        out = []
        for i in range(n):
            if i >= lo and budget[0] <= 0:
                break
            budget[0] -= 1
            out.append(sample(item, rng, budget))
        return "".join(out)
    return ""  # look, anchor


def pick_char(ranges, rng: random.Random) -> str:
    """A character of ``ranges`` (none: the empty string), often one of :data:`CHARS`."""
    if not ranges:
        return ""
    inside = [c for c in CHARS if any(a <= ord(c) <= b for a, b in ranges)]
    if inside and rng.random() < 0.6:
        return rng.choice(inside)
    a, b = rng.choice(ranges)
    for _ in range(8):
        cp = rng.choice([a, b, rng.randint(a, b)])
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)
    return inside[0] if inside else ""


def mutate(text: str, rng: random.Random) -> str:
    """A random edit of ``text``: delete, insert, replace or duplicate a piece (a final ``\\n`` often)."""
    r = rng.random()
    i = rng.randint(0, len(text))
    if r < 0.15:
        return text + "\n"
    if r < 0.35 and text:
        j = min(len(text), i + rng.randint(1, 3))
        return text[:i] + text[j:]
    if r < 0.6:
        return text[:i] + rng.choice(CHARS) + text[i:]
    if r < 0.8 and text:
        i = min(i, len(text) - 1)
        return text[:i] + rng.choice(CHARS) + text[i + 1:]
    j = min(len(text), i + rng.randint(1, 4))
    return text[:j] + text[i:j] + text[j:]


def children(node) -> list:
    """Smaller trees for shrinking: each child, and the node with a part dropped or simplified."""
    kind = node[0]
    out = []
    if kind in ("seq", "alt"):
        items = node[1]
        out += [t for t in items]
        out += [(kind, items[:i] + items[i + 1:]) for i in range(len(items)) if len(items) > 1]
        for i, t in enumerate(items):
            out += [(kind, items[:i] + [c] + items[i + 1:]) for c in children(t)]
    elif kind in ("group",):
        out += [node[1]] + [("group", c, node[2]) for c in children(node[1])]
    elif kind == "quant":
        _, item, lo, hi, lazy = node
        out += [item, ("quant", item, 0, hi, False) if lo else None, ("quant", item, lo, lo, False) if hi != lo else None]
        out += [("quant", c, lo, hi, lazy) for c in children(item)]
    elif kind == "look":
        out += [("look", node[1], c) for c in children(node[2])]
    elif kind == "class":
        items = node[1]
        out += [("lit", chr(items[0][1]))] if items and items[0][0] == "range" else []
        out += [("class", items[:i] + items[i + 1:], node[2]) for i in range(len(items)) if len(items) > 1]
    elif kind in ("dot", "esc"):
        out.append(("lit", "a"))
    return [c for c in out if c is not None]
