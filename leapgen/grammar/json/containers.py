"""Arrays for the JSON Schema front-end (objects: :mod:`.objects`).

``prefixItems`` then ``items``, bounded by ``minItems``/``maxItems``; or, under
``contains``, items that match it or not, counted. ``c`` is the running compiler
(:class:`leapgen.grammar.json.schema._Compiler`): it compiles subschemas,
knows the layout and the mode.
"""

from __future__ import annotations

from leapgen.errors import SchemaError

from .. import ir
from ..ir import Node
from .layout import container
from .logic import negate
from .merge import BLIND_ITEMS, MISSING, join_pointer
from .unique import unique_items


def count_arg(schema: dict, key: str, ptr: str) -> int | None:
    """A non-negative integer keyword argument (None when absent)."""
    arg = schema.get(key)
    if arg is None:
        return None
    if isinstance(arg, float) and arg.is_integer():
        arg = int(arg)
    if isinstance(arg, bool) or not isinstance(arg, int) or arg < 0:
        raise SchemaError(f"{key} must be a non-negative integer", pointer=join_pointer(ptr, key))
    return arg


def compile_array(c, schema: dict, ptr: str, depth: int) -> Node:
    """The IR of an array under ``schema`` (``prefixItems``, ``items``, ``minItems``, ``maxItems``,
    ``uniqueItems``: :func:`_unique`)."""
    node = _array(c, schema, ptr, depth)
    if schema.get("uniqueItems") is True and node != ir.NOTHING:
        node = _unique(c, schema, node, ptr, depth)
    return node


def _unique(c, schema: dict, node: Node, ptr: str, depth: int) -> Node:
    """``node`` (the array without ``uniqueItems``) with its items pairwise distinct: free
    when at most one item fits, exact for items from a small finite set of scalars
    (:func:`.unique.unique_items`), else unchanged with a warning."""
    cap = count_arg(schema, "maxItems", ptr)
    if cap is not None and cap <= 1:
        return node
    items = schema.get("items", schema.get("unevaluatedItems", True))
    exact = None
    if not schema.get("prefixItems") and "contains" not in schema:
        exact = unique_items(c, items, join_pointer(ptr, "items"), depth)
    if exact is None:
        c.warn(join_pointer(ptr, "uniqueItems"), "uniqueItems is not enforced (repeated items are accepted)")
        return node
    return ir.intersect(node, exact)


def _array(c, schema: dict, ptr: str, depth: int) -> Node:
    prefix = schema.get("prefixItems", [])
    if not isinstance(prefix, list):
        raise SchemaError("prefixItems must be an array", pointer=join_pointer(ptr, "prefixItems"))
    if "unevaluatedItems" in schema and schema.get(BLIND_ITEMS):
        raise SchemaError("unevaluatedItems next to array keywords from a negation (not, if, oneOf) is not "
                          "supported yet", pointer=join_pointer(ptr, "unevaluatedItems"))
    items = schema.get("items", MISSING)
    items_ptr = join_pointer(ptr, "items")
    if items is MISSING and "unevaluatedItems" in schema:
        items, items_ptr = schema["unevaluatedItems"], join_pointer(ptr, "unevaluatedItems")
    if items is MISSING:
        items = False if (c.strict and prefix) else True
    lo = count_arg(schema, "minItems", ptr) or 0
    cap = count_arg(schema, "maxItems", ptr)  # most items possible
    if "contains" in schema:
        node = _contains(c, schema, items, items_ptr, prefix, lo, cap, ptr, depth)
        if node is not None:
            return node
    elems = []  # compiled prefix items
    for i, p in enumerate(prefix):
        if cap is not None and i >= cap:
            break
        node = c.compile(p, join_pointer(ptr, "prefixItems", i), depth + 1)
        if node == ir.NOTHING:
            cap = i
            break
        elems.append(node)
    k = len(elems)
    rest = ir.NOTHING  # items after the prefix
    if cap is None or cap > k:
        rest = c.compile(items, items_ptr, depth + 1)
        if rest == ir.NOTHING:
            cap = k
        elif cap is None or cap > k + 1:
            # large items, or the many copies of an item that maxItems or minItems writes out: a rule
            # candidate (kept as a rule where inlining its copies would outgrow the automaton: rules.kept_rules);
            # not the copies under uniqueItems, which _unique may intersect with the array (no rule inside)
            copies = 1 if schema.get("uniqueItems") is True else cap - k if cap is not None else max(lo - k, 1)
            rest = c.rule(rest, items_ptr, copies)
    if cap is not None and lo > cap:
        return ir.NOTHING
    if cap == 0:
        return c.layout.empty("[]")
    comma = c.layout.comma(depth)
    if not k and cap is None and lo <= 1:  # rest (comma rest)*: one copy of the item in the automaton
        return container(c.layout, "[]", depth, ir.join(rest, comma), ir.EMPTY, empty_ok=lo == 0)
    # tail: what follows once max(k, 1) items are written.
    n0 = max(k, 1)
    tail = ir.EMPTY
    if cap is None or cap > n0:
        tail = ir.repeat(ir.seq(comma, rest), max(lo - n0, 0), None if cap is None else cap - n0)
    for i in range(k - 1, 0, -1):  # what follows once i items are written
        step = ir.seq(comma, elems[i], tail)
        tail = ir.alt(ir.EMPTY, step) if i >= lo else step
    first = elems[0] if k else rest
    return container(c.layout, "[]", depth, first, tail, empty_ok=lo == 0)

def _contains(c, schema: dict, items, items_ptr: str, prefix: list, lo: int, cap, ptr: str, depth: int):
    """An array under ``contains`` (with ``minContains``/``maxContains``): the
    items are ``A = items and not contains`` or ``B = items and contains``,
    with between ``minContains`` (default 1) and ``maxContains`` B's. None
    when ``contains`` constrains nothing (``minContains: 0`` alone).

    Raises
    ------
    SchemaError
        With ``prefixItems``, ``unevaluatedItems``, ``maxItems`` or a
        ``minItems`` above ``max(minContains, 1)``; or when ``contains``
        cannot be negated (:func:`.logic.negate`).
    """
    k = count_arg(schema, "minContains", ptr)
    k = 1 if k is None else k
    m = count_arg(schema, "maxContains", ptr)
    if k == 0 and m is None:
        return None
    cptr = join_pointer(ptr, "contains")
    if prefix or "unevaluatedItems" in schema or cap is not None or lo > max(k, 1):
        raise SchemaError("contains together with prefixItems, unevaluatedItems, maxItems or a larger minItems "
                          "is not supported yet", pointer=cptr)
    if m is not None and m < k:
        return ir.NOTHING
    cond = schema["contains"]
    a = c.rule(c.compile(c.keep({"allOf": [items, negate(c, cond, cptr)]}), items_ptr, depth + 1), items_ptr)
    b = c.rule(c.compile(c.keep({"allOf": [items, cond]}), cptr, depth + 1), cptr)
    comma = c.layout.comma(depth)
    a_more = ir.star(ir.seq(comma, a))

    def tail(j: int) -> Node:  # after the first item, with j matches so far
        need, room = max(k - j, 0), None if m is None else m - j
        return ir.seq(a_more, ir.repeat(ir.seq(comma, b, a_more), need, room))
    firsts = [ir.seq(a, tail(0))]
    if m is None or m >= 1:
        firsts.append(ir.seq(b, tail(1)))
    return container(c.layout, "[]", depth, ir.alt(*firsts), ir.EMPTY, empty_ok=k == 0 and lo == 0)
