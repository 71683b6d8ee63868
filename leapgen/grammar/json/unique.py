"""``uniqueItems: true`` (JSON Schema 2020-12 validation, section 6.4.3) where
it stays a small regular language: items drawn from a finite set of scalars.

With ``n`` possible item values (an ``enum``/``const``, booleans, ``null``),
arrays without repeats are the intersection over each value ``v`` of "``v``
occurs at most once", each a small automaton over the items' JSON texts; the
product has about ``2**n`` states per position in an item's text (the set of
values written so far), so it is built only below :data:`MAX_UNIQUE_SIZE`.
Each value has exactly one JSON text in the items' language (enum members are
matched as their text, :mod:`.values`), so comparing texts is comparing
values. Anything else is not enforced (the caller warns).
"""

from __future__ import annotations

from .. import ir
from ..ir import Node
from .disjoint import kinds
from .layout import container
from .values import dedupe, json_type, scalar_text, values_node

MAX_UNIQUE_SIZE = 60_000
"""Largest ``2**n * (total length of the n values' texts)`` enforced (an upper bound on the
automaton states; 8 enum strings of 82 bytes in all: 6.7k states, 0.2 s)."""


def finite_scalars(c, items, ptr: str) -> list | None:
    """The scalar values ``items`` can take, when finitely many (a superset
    of them, deduplicated; None when not finite or when one is a container)."""
    if items is True or items is False:
        return None if items else []
    k = kinds(c, items, ptr)
    if k.values is not None:
        values = dedupe(k.values)
    elif k.types and k.types <= {"boolean", "null"}:
        values = ([True, False] if "boolean" in k.types else []) + ([None] if "null" in k.types else [])
    else:
        return None
    if any(json_type(v) in ("array", "object") for v in values):
        return None
    return values


def unique_items(c, items, ptr: str, depth: int) -> Node | None:
    """Arrays at ``depth`` whose items (texts of the values ``items`` can take)
    are pairwise distinct; None when not enforceable (see the module docstring)."""
    values = finite_scalars(c, items, ptr)
    if values is None:
        return None
    if (2 ** len(values)) * sum(len(scalar_text(v).encode("utf-8")) for v in values) > MAX_UNIQUE_SIZE:
        return None
    if not values:
        return c.layout.empty("[]")
    texts = [values_node(c.layout, [v], depth + 1) for v in values]
    comma = c.layout.comma(depth)
    parts = []
    for i, once in enumerate(texts):
        other = ir.alt(*(t for j, t in enumerate(texts) if j != i))
        none = ir.star(ir.seq(comma, other))  # more items, none of them ``once``
        first = ir.alt(ir.seq(other, ir.alt(none, ir.seq(none, comma, once, none))), ir.seq(once, none))
        parts.append(container(c.layout, "[]", depth, first, ir.EMPTY, empty_ok=True))
    return ir.intersect(*parts)
