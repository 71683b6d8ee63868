"""Matching and emptiness of front-end IR by Brzozowski derivatives, over
code points (no automaton is built).

The JSON Schema front-end uses this to decide small questions at compile
time: does the property name ``"foo"`` match a ``patternProperties`` regex or
a ``propertyNames`` schema, do two patterns overlap. It works on the IR that
:func:`leapgen.grammar.regex.parse_regex` and the JSON front-end build:
:class:`ir.Bytes` holding whole UTF-8 characters, ASCII :class:`ir.ByteSet`,
:class:`ir.CharSet`, and the combinators (``Intersect``, ``Diff`` and
``Embed`` included). Anything else (a non-ASCII byte set, a split character, a rule
reference) raises :class:`Unsupported`.

Brzozowski, "Derivatives of regular expressions", JACM 11(4), 1964.
"""

from __future__ import annotations

import bisect

from .. import ir
from ..ir import Node


class Unsupported(ValueError):
    """The IR holds a construct the derivative matcher does not handle."""


def nullable(node: Node, memo: dict | None = None) -> bool:
    """Whether ``node`` matches the empty string."""
    if memo is not None and node in memo:
        return memo[node]
    if isinstance(node, ir.Counted):  # matched as the repetition it counts
        node = ir.expand(node)
    if isinstance(node, ir.Bytes):
        out = not node.data
    elif isinstance(node, (ir.ByteSet, ir.CharSet)):
        out = False
    elif isinstance(node, ir.Seq):
        out = all(nullable(i, memo) for i in node.items)
    elif isinstance(node, ir.Alt):
        out = any(nullable(i, memo) for i in node.items)
    elif isinstance(node, ir.Repeat):
        out = node.lo == 0 or nullable(node.item, memo)
    elif isinstance(node, (ir.Join, ir.Embed)):
        out = nullable(node.item, memo)
    elif isinstance(node, ir.Intersect):
        out = all(nullable(i, memo) for i in node.items)
    elif isinstance(node, ir.Diff):
        out = nullable(node.left, memo) and not nullable(node.right, memo)
    else:
        raise Unsupported(f"cannot match {type(node).__name__} at compile time")
    if memo is not None:
        memo[node] = out
    return out


def _in(ranges, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


def _text(node: ir.Bytes) -> str:
    """A literal's text (:class:`Unsupported` where it splits a UTF-8 character)."""
    try:
        return node.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unsupported("a literal holds a partial UTF-8 character") from exc


def _ascii_ranges(node: ir.ByteSet) -> tuple[tuple[int, int], ...]:
    """A byte set's ranges, which are code points where ASCII (:class:`Unsupported` otherwise)."""
    if any(hi >= 0x80 for _, hi in node.ranges):
        raise Unsupported("a byte set holds non-ASCII bytes")
    return tuple(node.ranges)


def first_ranges(node: Node, memo: dict) -> tuple[tuple[int, int], ...]:
    """The code points a string of ``node`` may start with, as sorted inclusive ranges: a superset
    (exact but for an intersection's or a difference's operands, whose first code points are
    intersected / the left one's). :func:`derive` by a code point outside them is ``NOTHING``, so
    the walks below skip those classes (a walk through a property-name trie derived every class
    at every prefix). Memoized in ``memo`` (mutated).

    Raises
    ------
    Unsupported
        Where :func:`derive` raises (see the module docstring).
    """
    hit = memo.get(node)
    if hit is not None:
        return hit
    nmemo = memo.setdefault("nullable", {})
    if isinstance(node, ir.Counted):
        out = first_ranges(node.item, memo) if node.hi != 0 else ()
    elif isinstance(node, ir.Bytes):
        text = _text(node)
        out = ((ord(text[0]), ord(text[0])),) if text else ()
    elif isinstance(node, ir.ByteSet):
        out = _ascii_ranges(node)
    elif isinstance(node, ir.CharSet):
        out = tuple(node.ranges)
    elif isinstance(node, ir.Seq):
        parts = []
        for item in node.items:
            parts.extend(first_ranges(item, memo))
            if not nullable(item, nmemo):
                break
        out = ir.normalize_ranges(parts, ir.MAX_UNICODE)
    elif isinstance(node, ir.Alt):
        out = ir.normalize_ranges([r for i in node.items for r in first_ranges(i, memo)], ir.MAX_UNICODE)
    elif isinstance(node, ir.Repeat):
        out = first_ranges(node.item, memo) if node.hi != 0 else ()
    elif isinstance(node, ir.Join):
        out = first_ranges(node.item, memo)
        if nullable(node.item, nmemo):
            out = ir.normalize_ranges(out + first_ranges(node.sep, memo), ir.MAX_UNICODE)
    elif isinstance(node, ir.Intersect):
        out = first_ranges(node.items[0], memo)
        for item in node.items[1:]:
            other = first_ranges(item, memo)
            out = tuple((max(a, c), min(b, d)) for a, b in out for c, d in other if max(a, c) <= min(b, d))
    elif isinstance(node, ir.Diff):
        out = first_ranges(node.left, memo)
    elif isinstance(node, ir.Embed):
        out = first_ranges(node.item, memo)
    else:
        raise Unsupported(f"cannot match {type(node).__name__} at compile time")
    memo[node] = out
    return out


def _live(first: tuple[tuple[int, int], ...], los: list[int]) -> list[int]:
    """The indexes ``i`` of the sorted class starts ``los`` whose class may meet ``first`` (from
    :func:`first_ranges`): each class is one side of every bound in the node, so its start decides."""
    out: list[int] = []
    for a, b in first:
        out.extend(range(max(bisect.bisect_right(los, a) - 1, 0), bisect.bisect_right(los, b)))
    return out


def derive(node: Node, cp: int, memo: dict) -> Node:
    """The derivative of ``node`` by the code point ``cp`` (memoized in ``memo``)."""
    key = (node, cp)
    hit = memo.get(key)
    if hit is not None:
        return hit
    if isinstance(node, ir.Counted):
        node = ir.expand(node)
    if isinstance(node, ir.Bytes):
        text = _text(node)
        out = ir.lit(text[1:]) if text and ord(text[0]) == cp else ir.NOTHING
    elif isinstance(node, ir.ByteSet):
        out = ir.EMPTY if _in(_ascii_ranges(node), cp) else ir.NOTHING
    elif isinstance(node, ir.CharSet):
        out = ir.EMPTY if _in(node.ranges, cp) else ir.NOTHING
    elif isinstance(node, ir.Seq):
        head, rest = node.items[0], ir.seq(*node.items[1:])
        out = ir.seq(derive(head, cp, memo), rest)
        if nullable(head, memo.setdefault("nullable", {})):
            out = ir.alt(out, derive(rest, cp, memo))
    elif isinstance(node, ir.Alt):
        out = ir.alt(*(d for d in (derive(i, cp, memo) for i in node.items) if d != ir.NOTHING))
    elif isinstance(node, ir.Repeat):
        if node.hi == 0:
            out = ir.NOTHING
        else:
            lo = 0 if nullable(node.item, memo.setdefault("nullable", {})) else max(node.lo - 1, 0)
            rest = ir.repeat(node.item, lo, None if node.hi is None else node.hi - 1)
            out = ir.seq(derive(node.item, cp, memo), rest)
    elif isinstance(node, ir.Join):
        out = derive(ir.seq(node.item, ir.star(ir.seq(node.sep, node.item))), cp, memo)
    elif isinstance(node, ir.Intersect):
        out = ir.intersect(*(derive(i, cp, memo) for i in node.items))
    elif isinstance(node, ir.Diff):
        out = ir.diff(derive(node.left, cp, memo), derive(node.right, cp, memo))
    elif isinstance(node, ir.Embed):  # the item's language, built apart only in automata
        out = derive(node.item, cp, memo)
    else:
        raise Unsupported(f"cannot match {type(node).__name__} at compile time")
    memo[key] = out
    return out


def matches(node: Node, text: str, memo: dict | None = None) -> bool:
    """Whether ``node`` matches ``text`` entirely.

    Raises
    ------
    Unsupported
        See the module docstring.
    """
    memo = {} if memo is None else memo
    for ch in text:
        node = derive(node, ord(ch), memo)
        if node == ir.NOTHING:
            return False
    return nullable(node, memo.setdefault("nullable", {}))


def _boundaries(node: Node, out: set, seen: set) -> None:
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if isinstance(n, ir.Bytes):
            for ch in n.data.decode("utf-8", "replace"):
                out.add(ord(ch))
                out.add(ord(ch) + 1)
        elif isinstance(n, (ir.ByteSet, ir.CharSet)):
            for lo, hi in n.ranges:
                out.add(lo)
                out.add(hi + 1)
        elif isinstance(n, (ir.Seq, ir.Alt, ir.Intersect)):
            stack.extend(n.items)
        elif isinstance(n, (ir.Repeat, ir.Embed, ir.Counted)):
            stack.append(n.item)
        elif isinstance(n, ir.Join):
            stack.extend((n.item, n.sep))
        elif isinstance(n, ir.Diff):
            stack.extend((n.left, n.right))


def is_empty(node: Node, limit: int = 2000) -> bool | None:
    """Whether ``node`` matches no string at all (None: undecided within ``limit`` derivative states).

    Explores the derivatives by one representative code point per class of
    code points that every set and literal in ``node`` treats alike.
    """
    cuts: set = {0, ir.MAX_UNICODE + 1}
    try:
        _boundaries(node, cuts, set())
        bounds = sorted(c for c in cuts if 0 <= c <= ir.MAX_UNICODE + 1)
        reps = [lo for lo, hi in zip(bounds, bounds[1:]) if not 0xD800 <= lo <= 0xDFFF]
        reps = sorted(set(reps) | {0xE000})
        memo: dict = {}
        nmemo = memo.setdefault("nullable", {})
        fmemo: dict = {"nullable": nmemo}
        seen = {node}
        todo = [node]
        while todo:
            n = todo.pop()
            if nullable(n, nmemo):
                return False
            for i in _live(first_ranges(n, fmemo), reps):
                d = derive(n, reps[i], memo)
                if d != ir.NOTHING and d not in seen:
                    if len(seen) >= limit:
                        return None
                    seen.add(d)
                    todo.append(d)
        return True
    except Unsupported:
        return None


class _TooMany(Exception):
    pass


def finite_language(node: Node, limit: int, max_states: int = 20_000) -> list[str] | None:
    """Every string of ``node`` (code points) when there are at most ``limit`` of them; None when there
    are more, infinitely many, or the question is not settled within ``max_states`` derivatives.

    Depth-first over the derivatives by one code point of each class every set and literal of ``node``
    treats alike (see :func:`is_empty`); a derivative met again on the current path is a loop (None).
    """
    cuts: set = {0, ir.MAX_UNICODE + 1}
    try:
        _boundaries(node, cuts, set())
    except Unsupported:
        return None
    bounds = sorted(c for c in cuts if 0 <= c <= ir.MAX_UNICODE + 1)
    classes = [(lo, hi - 1) for lo, hi in zip(bounds, bounds[1:]) if not 0xD800 <= lo <= 0xDFFF]
    los = [lo for lo, _ in classes]
    memo: dict = {}
    nmemo = memo.setdefault("nullable", {})
    fmemo: dict = {"nullable": nmemo}
    out: list[str] = []
    budget = [max_states]

    def walk(n: Node, prefix: str, path: set) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooMany
        if nullable(n, nmemo):
            out.append(prefix)
            if len(out) > limit:
                raise _TooMany
        for i in _live(first_ranges(n, fmemo), los):
            lo, hi = classes[i]
            d = derive(n, lo, memo)
            if d == ir.NOTHING:
                continue
            if d in path or hi - lo + 1 > limit:
                raise _TooMany
            path.add(d)
            for cp in range(lo, hi + 1):
                if not 0xD800 <= cp <= 0xDFFF:
                    walk(d, prefix + chr(cp), path)
            path.discard(d)

    try:
        walk(node, "", {node})
    except (_TooMany, Unsupported, RecursionError):
        return None
    return out
