r"""Random GBNF grammars, written twice: for leapgen and as a Lark grammar for Earley.

A grammar is ``{name: expression}`` with ``root`` first; expressions are
tuples::

    ("lit", text)  ("class", ranges, negate)  ("dot",)  ("ref", name)
    ("seq", [e])  ("alt", [e])  ("rep", e, lo, hi)      # hi None: unbounded

Each grammar mixes random rules with the shapes context-free matching gets
wrong: right recursion (``s ::= "" | [^"\\] s``, xgrammar's JSON string,
issue 15 fault 1), mutual recursion (``a ::= x b | ""``, ``b ::= y a``),
nesting (``e ::= "(" e ")" | x``) and nullable rules, over character classes
the vocabularies' token slices cover (``[a-z]``, ``[^"\\]``...) and others. A
few grammars are left-recursive on purpose: leapgen refuses those (a
``GrammarError`` naming left recursion), Earley does not.

:func:`lark` writes a grammar for Lark: every character, of a literal or a
class, is a one-character regex terminal, so the Earley parser works on
characters (no lexer decisions). :func:`derive` writes random strings of the
language by expanding rules (an oracle-side generator).
"""

from __future__ import annotations

import random

from .regex_gen import CHARS, MAX_CP, _complement, _merge, mutate, pick_char  # noqa: F401 (mutate re-exported)

#: Classes the token slices of real vocabularies cover (a frame reading them takes the slice path).
SLICE_CLASSES = [([(0x22, 0x22), (0x5C, 0x5C)], True), ([(0x61, 0x7A)], False), ([(0x61, 0x7A), (0x30, 0x39)], False),
                 ([(0x41, 0x5A), (0x61, 0x7A), (0x30, 0x39)], False), ([(0x0A, 0x0A)], True),
                 ([(0x20, 0x20), (0x41, 0x5A), (0x61, 0x7A)], False)]


class GbnfGen:
    """Random grammars; every draw from ``rng``."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def grammar(self) -> tuple[dict, bool]:
        """(rules, left_recursive): the rules, ``root`` first."""
        rng = self.rng
        n = rng.randint(1, 3)
        names = ["root"] + [f"r{i}" for i in range(1, n)]
        rules = {name: self.expr(names, 0) for name in names}
        for _ in range(rng.randint(1, 3)):  # the shapes that matter, over existing or new rules
            self.shape(rules, names)
        left = rng.random() < 0.04
        if left:
            name = rng.choice(names)
            rules[name] = ("alt", [("seq", [("ref", name), self.char()]), self.char()])
        return rules, left

    def shape(self, rules: dict, names: list) -> None:
        rng = self.rng
        kind = rng.choice(["right", "right", "mutual", "nest", "nullable"])
        fresh = f"s{len(rules)}"
        c = self.char(slice_bias=0.7)
        if kind == "right":
            body = rng.choice([("alt", [("lit", ""), ("seq", [c, ("ref", fresh)])]),
                               ("seq", [c, ("rep", ("ref", fresh), 0, 1)]),
                               ("alt", [c, ("seq", [c, ("ref", fresh)])]),
                               ("alt", [("lit", ""), ("seq", [("rep", c, 1, rng.randint(1, 3)), ("ref", fresh)])])])
            rules[fresh] = body
        elif kind == "mutual":
            other = f"t{len(rules)}"
            rules[fresh] = ("alt", [("lit", ""), ("seq", [c, ("ref", other)])])
            rules[other] = ("seq", [self.char(), ("ref", fresh)])
        elif kind == "nest":
            o, cl = rng.choice([("(", ")"), ("[", "]"), ("{", "}"), ('"', '"'), ("<", ">")])
            rules[fresh] = ("alt", [("seq", [("lit", o), ("rep", ("ref", fresh), 0, rng.choice([1, None])), ("lit", cl)]),
                                    self.expr(names, 2)])
        else:
            rules[fresh] = ("alt", [("lit", ""), ("seq", [self.char(), self.item(names, 1)])])
        host = rng.choice(names)
        rules[host] = ("seq", [rules[host], ("ref", fresh)] if rng.random() < 0.6 else
                       [("lit", rng.choice(['"', "{", "<", "x"])), ("ref", fresh), ("lit", rng.choice(['"', "}", ">"]))])
        names.append(fresh)

    def expr(self, names: list, depth: int):
        rng = self.rng
        alts = [self.seq(names, depth) for _ in range(rng.choice([1, 1, 2, 2, 3]))]
        return ("alt", alts) if len(alts) > 1 else alts[0]

    def seq(self, names: list, depth: int):
        items = [self.item(names, depth, first=i == 0) for i in range(self.rng.choice([1, 1, 2, 2, 3]))]
        return ("seq", items)

    def item(self, names: list, depth: int, first: bool = False):
        """A term; a reference leads a sequence rarely (left recursion is the exception, see ``grammar``)."""
        rng = self.rng
        r = rng.random()
        if r < 0.3:
            atom = ("lit", "".join(rng.choice(CHARS) for _ in range(rng.choice([0, 1, 1, 2, 3]))))
        elif r < 0.6:
            atom = self.char(slice_bias=0.4)
        elif (r < 0.8 or depth >= 1) and not (first and rng.random() < 0.95):
            atom = ("ref", rng.choice(names))
        elif depth < 1:
            atom = self.expr(names, depth + 1)
        else:
            atom = self.char()
        q = rng.random()
        if q < 0.6 or (atom[0] in ("ref", "alt", "seq") and q < 0.9):  # repeated rules: ambiguity Earley pays for
            return atom
        lo, hi = rng.choice([(0, None), (1, None), (0, 1), (2, 2), (1, 3), (0, 2), (2, None)])
        return ("rep", atom, lo, hi)

    def char(self, slice_bias: float = 0.3):
        rng = self.rng
        if rng.random() < slice_bias:
            ranges, negate = rng.choice(SLICE_CLASSES)
            return ("class", ranges, negate)
        if rng.random() < 0.05:
            return ("dot",)
        ranges = []
        for _ in range(rng.randint(1, 3)):
            a, b = sorted((ord(rng.choice(CHARS)), ord(rng.choice(CHARS))))
            ranges.append((a, a if rng.random() < 0.5 else b))
        return ("class", ranges, rng.random() < 0.3)


def char_ranges(node) -> list[tuple[int, int]]:
    """The code points of a class or ``.`` (merged)."""
    if node[0] == "dot":
        return [(0, MAX_CP)]
    return _complement(node[1]) if node[2] else _merge(node[1])


# -- writing ---------------------------------------------------------------------------------------


def _gbnf_char(ch: str, in_class: bool) -> str:
    cp = ord(ch)
    if ch in ("\\]^-[" if in_class else '\\"'):
        return "\\" + ch
    if cp < 0x20 or cp == 0x7F or 0x2028 <= cp <= 0x2029 or cp == 0xFEFF:
        return f"\\x{cp:02X}" if cp <= 0xFF else f"\\u{cp:04X}"
    return ch


def gbnf(rules: dict) -> str:
    """The grammar in GBNF, one rule a line."""
    return "\n".join(f"{name} ::= {_gbnf(e)}" for name, e in rules.items()) + "\n"


def _gbnf(e) -> str:
    kind = e[0]
    if kind == "lit":
        return '"' + "".join(_gbnf_char(c, False) for c in e[1]) + '"'
    if kind == "class":
        body = "".join(_gbnf_char(chr(a), True) + ("" if a == b else "-" + _gbnf_char(chr(b), True)) for a, b in e[1])
        return "[" + ("^" if e[2] else "") + body + "]"
    if kind == "dot":
        return "."
    if kind == "ref":
        return e[1]
    if kind == "seq":
        return " ".join(_gbnf_atom(x) for x in e[1]) if e[1] else '""'
    if kind == "alt":
        return " | ".join(_gbnf(x) for x in e[1])
    if kind == "rep":
        _, item, lo, hi = e
        q = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
        if q is None:
            q = f"{{{lo}}}" if lo == hi else f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}"
        return _gbnf_atom(item, wrap_seq=True) + q
    raise ValueError(e)


def _gbnf_atom(e, wrap_seq: bool = False) -> str:
    text = _gbnf(e)
    if e[0] == "alt" or (e[0] in ("seq", "rep") and wrap_seq):
        return "(" + text + ")"
    return text


def lark(rules: dict) -> str:
    """The grammar for Lark (``start`` is ``root``): one-character regex terminals, and every
    repetition a rule of its own (``aux: | aux item``: Lark's own expansion of ``x ~ m..n`` and nested
    ``+`` multiplies rules, which made Earley take seconds a character)."""
    names = {name: ("start" if name == "root" else f"rule_{i}") for i, name in enumerate(rules)}
    out: list[str] = []
    for name, e in rules.items():
        out.append(f"{names[name]}: {_lark(e, names, out)}")
    return "\n".join(out) + "\n"


def _lark_class(ranges) -> str:
    if not ranges:
        return "/(?!)/"
    return "/[" + "".join(_lark_cp(a) + ("" if a == b else "-" + _lark_cp(b)) for a, b in ranges) + "]/"


def _lark_cp(cp: int) -> str:
    """A code point in a Lark regexp class: Lark turns ``\\U`` escapes into the character before the
    regex engine sees it, so the characters special in a class are escaped with a backslash instead."""
    return "\\" + chr(cp) if chr(cp) in "\\]^-[/" else f"\\U{cp:08x}"


def _aux(out: list, body: str) -> str:
    name = f"aux_{len(out)}"
    out.append(f"{name}: {body}")
    return name


def _lark(e, names, out) -> str:
    kind = e[0]
    if kind == "lit":
        return " ".join(_lark_class([(ord(c), ord(c))]) for c in e[1])
    if kind in ("class", "dot"):
        return _lark_class(char_ranges(e))
    if kind == "ref":
        return names[e[1]]
    if kind == "seq":
        return " ".join(_lark_group(x, names, out) for x in e[1])
    if kind == "alt":
        return " | ".join(_lark(x, names, out) for x in e[1])
    _, item, lo, hi = e
    one = _lark(item, names, out)
    if not one.strip() or hi == 0:
        return ""
    one = _aux(out, one)
    tail = ""
    if hi is None:
        star = f"aux_{len(out)}"
        out.append(f"{star}: | {star} {one}")
        tail = star
    else:
        for _ in range(hi - lo):  # opt_j: | item opt_{j-1}
            tail = _aux(out, f"| {one} {tail}".rstrip())
    return " ".join([one] * lo + ([tail] if tail else []))


def _lark_group(e, names, out) -> str:
    text = _lark(e, names, out)
    return "(" + text + ")" if e[0] == "alt" else text


# -- strings ---------------------------------------------------------------------------------------


def min_heights(rules: dict) -> dict:
    """The least derivation height of each rule (None: the rule derives no string)."""
    height = {name: None for name in rules}

    def h(e):
        kind = e[0]
        if kind in ("lit", "class", "dot"):
            return 0 if kind == "lit" or char_ranges(e) else None
        if kind == "ref":
            return None if height[e[1]] is None else height[e[1]] + 1
        if kind == "seq":
            parts = [h(x) for x in e[1]]
            return None if None in parts else max(parts, default=0)
        if kind == "alt":
            parts = [p for p in (h(x) for x in e[1]) if p is not None]
            return min(parts) if parts else None
        _, item, lo, _ = e
        return 0 if lo == 0 else h(item)

    changed = True
    while changed:
        changed = False
        for name, e in rules.items():
            got = h(e)
            if got is not None and (height[name] is None or got < height[name]):
                height[name], changed = got, True
    return height


def derive(rules: dict, rng: random.Random, heights: dict, max_depth: int = 8) -> str | None:
    """A random string of the language (None when the root derives nothing); past ``max_depth``
    the shallowest alternatives are taken, so expansion ends."""
    if heights["root"] is None:
        return None
    budget = [80]

    def height(e):
        kind = e[0]
        if kind == "ref":
            return None if heights[e[1]] is None else heights[e[1]] + 1
        if kind == "seq":
            parts = [height(x) for x in e[1]]
            return None if None in parts else max(parts, default=0)
        if kind == "alt":
            parts = [p for p in (height(x) for x in e[1]) if p is not None]
            return min(parts) if parts else None
        if kind == "rep":
            return 0 if e[2] == 0 else height(e[1])
        return 0 if kind == "lit" or char_ranges(e) else None

    def go(e, depth):
        budget[0] -= 1
        kind = e[0]
        if kind == "lit":
            return e[1]
        if kind in ("class", "dot"):
            return pick_char(char_ranges(e), rng)
        if kind == "ref":
            return go(rules[e[1]], depth + 1)
        if kind == "seq":
            return "".join(go(x, depth) for x in e[1])
        if kind == "alt":
            options = [x for x in e[1] if height(x) is not None]
            if depth > max_depth or budget[0] < 0:
                best = min(height(x) for x in options)
                options = [x for x in options if height(x) == best]
            return go(rng.choice(options), depth)
        _, item, lo, hi = e
        if height(item) is None:
            return ""
        n = lo if depth > max_depth or budget[0] < 0 else rng.randint(lo, hi if hi is not None else lo + 3)
        return "".join(go(item, depth + 1) for _ in range(n))

    return go(rules["root"], 0)


def left_recursive(rules: dict) -> bool:
    """Whether some rule can reach itself before consuming a character (through nullable prefixes)."""
    nullable = {name: False for name in rules}

    def null(e):
        kind = e[0]
        if kind == "lit":
            return e[1] == ""
        if kind in ("class", "dot"):
            return False
        if kind == "ref":
            return nullable[e[1]]
        if kind == "seq":
            return all(null(x) for x in e[1])
        if kind == "alt":
            return any(null(x) for x in e[1])
        return e[2] == 0 or null(e[1])

    changed = True
    while changed:
        changed = False
        for name, e in rules.items():
            if not nullable[name] and null(e):
                nullable[name] = changed = True

    def first_refs(e, out):
        kind = e[0]
        if kind == "ref":
            out.add(e[1])
        elif kind == "seq":
            for x in e[1]:
                first_refs(x, out)
                if not null(x):
                    break
        elif kind == "alt":
            for x in e[1]:
                first_refs(x, out)
        elif kind == "rep":
            first_refs(e[1], out)
        return out

    graph = {name: first_refs(e, set()) for name, e in rules.items()}
    for start in rules:
        seen, todo = set(), list(graph[start])
        while todo:
            n = todo.pop()
            if n == start:
                return True
            if n not in seen:
                seen.add(n)
                todo.extend(graph[n])
    return False


def children(rules: dict) -> list[dict]:
    """Smaller grammars for shrinking: a rule dropped (its references become ``""``), or one rule's
    expression reduced (a part dropped, a child in its place, a repetition made plain)."""
    out = []
    for name in list(rules)[1:]:
        out.append({k: _drop_ref(e, name) for k, e in rules.items() if k != name})
    for name, e in rules.items():
        for c in _smaller(e):
            out.append({**rules, name: c})
    return out


def _drop_ref(e, name):
    kind = e[0]
    if kind == "ref":
        return ("lit", "") if e[1] == name else e
    if kind in ("seq", "alt"):
        return (kind, [_drop_ref(x, name) for x in e[1]])
    if kind == "rep":
        return ("rep", _drop_ref(e[1], name), e[2], e[3])
    return e


def _smaller(e) -> list:
    kind = e[0]
    out = []
    if kind in ("seq", "alt"):
        items = e[1]
        out += [x for x in items]
        out += [(kind, items[:i] + items[i + 1:]) for i in range(len(items)) if len(items) > 1]
        for i, x in enumerate(items):
            out += [(kind, items[:i] + [c] + items[i + 1:]) for c in _smaller(x)]
    elif kind == "rep":
        _, item, lo, hi = e
        out += [item] + [("rep", c, lo, hi) for c in _smaller(item)]
        if (lo, hi) != (0, None):
            out.append(("rep", item, 0, None))
    elif kind == "lit" and len(e[1]) > 1:
        out += [("lit", e[1][:1]), ("lit", e[1][1:])]
    elif kind == "class" and len(e[1]) > 1:
        out += [("class", [r], e[2]) for r in e[1]]
    return out
