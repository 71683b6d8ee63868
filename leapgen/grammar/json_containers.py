"""Arrays and objects for the JSON Schema front-end.

Objects: the listed members in schema order (``properties``, then names only in
``required``), optional ones skippable, then extra members; commas are right in
every combination. Arrays: ``prefixItems`` then ``items``, bounded by
``minItems``/``maxItems``. ``c`` is the running compiler
(:class:`leapgen.grammar.json_schema._Compiler`): it compiles subschemas,
knows the layout and the mode.
"""

from __future__ import annotations

import json

from leapgen.errors import SchemaError

from . import ir
from .ir import Node
from .json_layout import Layout, container
from .json_merge import MISSING, join_pointer
from .json_strings import quoted, spell_any, string_content


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
    """The IR of an array under ``schema`` (``prefixItems``, ``items``, ``minItems``, ``maxItems``)."""
    prefix = schema.get("prefixItems", [])
    if not isinstance(prefix, list):
        raise SchemaError("prefixItems must be an array", pointer=join_pointer(ptr, "prefixItems"))
    items = schema.get("items", MISSING)
    items_ptr = join_pointer(ptr, "items")
    if items is MISSING and "unevaluatedItems" in schema:
        items, items_ptr = schema["unevaluatedItems"], join_pointer(ptr, "unevaluatedItems")
    if items is MISSING:
        items = False if (c.strict and prefix) else True
    lo = count_arg(schema, "minItems", ptr) or 0
    cap = count_arg(schema, "maxItems", ptr)  # most items possible
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
            rest = c.rule(rest, items_ptr)  # written at least twice: first item, then ("," item)*
    if cap is not None and lo > cap:
        return ir.NOTHING
    if cap == 0:
        return c.layout.empty("[]")
    comma = c.layout.comma(depth)
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

def compile_object(c, schema: dict, ptr: str, depth: int) -> Node:
    """The IR of an object under ``schema`` (``properties``, ``required``, ``additionalProperties``)."""
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise SchemaError("properties must be an object", pointer=join_pointer(ptr, "properties"))
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaError("required must be an array of strings", pointer=join_pointer(ptr, "required"))
    extra = schema.get("additionalProperties", MISSING)
    extra_ptr = join_pointer(ptr, "additionalProperties")
    if extra is MISSING and "unevaluatedProperties" in schema:
        extra, extra_ptr = schema["unevaluatedProperties"], join_pointer(ptr, "unevaluatedProperties")
    explicit = extra is not MISSING
    if not explicit:
        extra = False if (c.strict and props) else True
    listed = [(n, s, join_pointer(ptr, "properties", n)) for n, s in props.items()]
    listed += [(n, extra if explicit else True, join_pointer(ptr, "required")) for n in dict.fromkeys(required)
               if n not in props]
    req = set(required)
    members = []
    for name, sub, sp in listed:
        value = c.compile(sub, sp, depth + 1)
        if value == ir.NOTHING:
            if name in req:
                return ir.NOTHING
            continue
        key = ir.lit(json.dumps(name, ensure_ascii=False))
        members.append((ir.seq(key, c.layout.colon(), value), name in req))
    extra_member = None
    if extra is not False:
        value = c.compile(extra, extra_ptr, depth + 1)
        if value != ir.NOTHING:
            names = [n for n, _, _ in listed]
            key = quoted(string_content())
            if names:
                key = ir.diff(key, ir.alt(*(quoted(spell_any(n)) for n in names)))
            extra_member = ir.seq(key, c.layout.colon(), value)
    return _object_node(c.layout, depth, members, extra_member)


def _object_node(layout: Layout, depth: int, members: list, extra: Node | None) -> Node:
    """An object: the listed members in order (each ``(node, required)``), then
    extra members (``extra``: one extra member, or None).

    Before the first required member, any ordered subset of the optional
    members may appear; :func:`_some` writes that language in
    O(n log n) size (a tree-expanding automaton builder stays small), the rest
    is one linear chain.
    """
    comma = layout.comma(depth)
    extra_tail = ir.star(ir.seq(comma, extra)) if extra is not None else ir.EMPTY
    first_req = next((i for i, (_, req) in enumerate(members) if req), None)
    if first_req is None:
        nodes = [n for n, _ in members]
        firsts = [_some(nodes, comma)] if nodes else []
        if extra is not None:
            firsts.append(extra)
        if not firsts:
            return layout.empty("{}")
        body = ir.seq(ir.alt(*firsts), extra_tail)
        return container(layout, "{}", depth, body, ir.EMPTY, empty_ok=True)
    prefix = [n for n, _ in members[:first_req]]
    lead = ir.opt(ir.seq(_some(prefix, comma), comma)) if prefix else ir.EMPTY
    chain = [ir.seq(comma, n) if req else ir.opt(ir.seq(comma, n)) for n, req in members[first_req + 1:]]
    body = ir.seq(lead, members[first_req][0], *chain, extra_tail)
    return container(layout, "{}", depth, body, ir.EMPTY, empty_ok=False)


def _some(nodes: list, comma: Node) -> Node:
    """Non-empty ordered subsets of ``nodes``, comma-separated.

    Divide and conquer: (some of the first half, then any of the second half
    each after a comma) or (some of the second half only).
    """
    if len(nodes) == 1:
        return nodes[0]
    mid = len(nodes) // 2
    left, right = nodes[:mid], nodes[mid:]
    with_commas = ir.seq(*(ir.opt(ir.seq(comma, n)) for n in right))
    return ir.alt(ir.seq(_some(left, comma), with_commas), _some(right, comma))
