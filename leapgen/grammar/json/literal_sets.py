"""Finite sets of literal strings as IR: what the number and the string
spellings share.

- :func:`literal_trie`: the union of byte strings as a prefix tree (``const``/
  ``enum`` values, the digit strings of ``multipleOf``).
- :func:`digits_range`: the fixed-width digit strings whose value lies in a
  range, in any radix (decimal integer bounds, the hex digits of ``\\uXXXX``
  escapes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from .. import ir
from ..ir import Node


def digits_range(lo: Sequence[int], hi: Sequence[int], digit: Callable[[int, int], Node], base: int) -> Node:
    """Fixed-width digit strings whose value lies in ``[lo, hi]``.

    Parameters
    ----------
    lo, hi : sequence of int
        The bounds as digit lists of equal length, most significant first;
        ``lo <= hi`` as numbers.
    digit : callable (int, int) -> Node
        ``digit(a, b)`` matches one digit with value in ``[a, b]``.
    base : int
        The radix (10 or 16).
    """
    n = len(lo)
    if n == 0:
        return ir.EMPTY
    top = base - 1
    if lo[0] == hi[0]:
        return ir.seq(digit(lo[0], lo[0]), digits_range(lo[1:], hi[1:], digit, base))
    rest_lo_zero = all(d == 0 for d in lo[1:])
    rest_hi_top = all(d == top for d in hi[1:])
    anyd = ir.repeat(digit(0, top), n - 1, n - 1)
    if rest_lo_zero and rest_hi_top:
        return ir.seq(digit(lo[0], hi[0]), anyd)
    parts = []
    if not rest_lo_zero:
        parts.append(ir.seq(digit(lo[0], lo[0]), digits_range(lo[1:], [top] * (n - 1), digit, base)))
    first = lo[0] if rest_lo_zero else lo[0] + 1
    last = hi[0] if rest_hi_top else hi[0] - 1
    if first <= last:
        parts.append(ir.seq(digit(first, last), anyd))
    if not rest_hi_top:
        parts.append(ir.seq(digit(hi[0], hi[0]), digits_range([0] * (n - 1), hi[1:], digit, base)))
    return ir.alt(*parts)


def literal_trie(items: Iterable[bytes]) -> Node:
    """The union of byte strings, built as a prefix tree (no ambiguity for the
    automata layer to resolve; shared prefixes are stored once).

    Parameters
    ----------
    items : iterable of bytes
        The strings; duplicates are fine.
    """
    root: dict = {}
    end = object()
    for data in items:
        node = root
        for b in data:
            node = node.setdefault(b, {})
        node[end] = True

    def build(node: dict) -> Node:
        parts = [ir.EMPTY] if end in node else []
        for b in sorted(k for k in node if k is not end):
            child = node[b]
            chunk = bytearray([b])
            while end not in child and len(child) == 1:
                (nb, nxt), = child.items()
                chunk.append(nb)
                child = nxt
            parts.append(ir.seq(ir.Bytes(bytes(chunk)), build(child)))
        return ir.alt(*parts)

    if not root:
        return ir.NOTHING
    return build(root)
